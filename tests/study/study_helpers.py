"""What the study tests share: a tiny model and a config for the study archives."""

from __future__ import annotations

from pathlib import Path

from asrtrain.model.config import ModelConfig
from asrtrain.train.config import TrainConfig

TINY = ModelConfig(hidden=8, layers=1, proj=0, dropout=0.0)


def tiny_cfg(archives: tuple[Path, Path], exp: Path, **kw) -> TrainConfig:
    base = dict(archive=archives[0], valid=archives[1], exp=exp, epochs=2, batch=16, base_batch=16, lr=0.2,
                warmup_epochs=0, momentum=0.5, block_chunks=32, model=TINY, log_every=1000, num_threads=1,
                prefetch=2)
    base.update(kw)
    return TrainConfig(**base)

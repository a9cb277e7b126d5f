"""A step holds the batch asked for, whatever the loader's block size: batches carry over blocks.

Batches below, at and above a block (16 chunks here) on one learner: every step but
the epoch's last trains ``--batch`` chunks, each chunk once, and the dry-run plan's
steps per epoch are the steps the run takes (the distributed side:
``tests/distributed/test_batch_over_blocks.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asrtrain.data.archive import Archive
from asrtrain.distributed.config import DistConfig
from asrtrain.model.blstm import ModelConfig
from asrtrain.train.config import TrainConfig
from asrtrain.train.hooks import Hooks
from asrtrain.train.run import plan
from asrtrain.train.trainer import train

BLOCK = 16


class StepSizes(Hooks):
    """Chunks of every step, by epoch."""

    def __init__(self) -> None:
        self.sizes: dict[int, list[int]] = {}
        self.epoch = 1

    def after_step(self, trainer: Any, x: Any, y: Any, lr: float) -> None:
        self.sizes.setdefault(self.epoch, []).append(len(x))

    def end_epoch(self, trainer: Any, row: dict[str, Any]) -> None:
        self.epoch += 1


@pytest.mark.parametrize("batch", [6, BLOCK, 40])
def test_every_step_holds_the_batch_and_the_plan_counts_the_steps(
        learnable_archives: tuple[Path, Path], tmp_path: Path, batch: int) -> None:
    cfg = TrainConfig(archive=learnable_archives[0], exp=tmp_path / "exp", epochs=2, batch=batch, base_batch=batch,
                      lr=0.1, warmup_epochs=0, block_chunks=BLOCK, prefetch=2, num_threads=1, log_every=1000,
                      model=ModelConfig(hidden=4, layers=1, proj=0))
    chunks = Archive(cfg.archive).num_chunks
    assert chunks > 3 * 40  # several blocks and several batches above a block
    steps, last = cfg.epoch_steps(chunks)
    shown = plan(cfg, DistConfig("single"))
    assert shown["steps/epoch"] == steps and shown["last step (chunks)"].startswith(str(last))
    hooks = StepSizes()
    result = train(cfg, hooks=hooks)
    assert result.steps == 2 * steps
    for sizes in hooks.sizes.values():
        assert sizes == [batch] * (steps - 1) + [last]

"""Training on a sharded archive: the manifest where an .h5 goes, the same steps, a checkpoint tied to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from asrtrain.core.errors import ConfigError
from asrtrain.data.archive import Archive
from asrtrain.data.fuse import Stream
from asrtrain.data.shard_writer import write_sharded
from asrtrain.model.blstm import ModelConfig
from asrtrain.train.config import TrainConfig
from asrtrain.train.trainer import train

TINY = ModelConfig(hidden=16, layers=1, proj=8)


def _cfg(archive: Path, exp: Path, epochs: int) -> TrainConfig:
    return TrainConfig(archive=archive, exp=exp, valid=None, epochs=epochs, batch=16, base_batch=16,
                       lr=0.3, model=TINY, num_threads=1, block_chunks=8, seed=5)


def test_train_on_shards_as_on_one_file(learnable_archives: tuple[Path, Path],
                                                   tmp_path: Path) -> None:
    src = learnable_archives[0].parent / f"{learnable_archives[0].stem}_src"  # its arks

    manifest = tmp_path / "train.json"
    write_sharded(manifest, [Stream("feats", src / "feats.scp")], str(src / "ali.scp"), Archive(learnable_archives[0]).num_pdfs,
                  shards=3, nj=1)
    one = train(_cfg(learnable_archives[0], tmp_path / "one", 1))
    three = train(_cfg(manifest, tmp_path / "three", 1))
    # the same chunks in the same batches: the loss differs only by the input moments' float32 rounding
    assert three.steps == one.steps
    assert three.history[0]["train_loss"] == pytest.approx(one.history[0]["train_loss"], rel=1e-4)
    with pytest.raises(ConfigError, match="not the one this run was trained on"):  # by its identity
        train(_cfg(learnable_archives[0], tmp_path / "three", 2))

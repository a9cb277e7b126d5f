"""TensorBoard events beside metrics.jsonl: the same figures, written by the run `asrtrain train` makes,
purged after the checkpoint on resume, and none with --no-tensorboard."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from asrtrain.model.blstm import ModelConfig
from asrtrain.train.config import TrainConfig
from asrtrain.train.events import EVENTS_DIR
from asrtrain.train.trainer import train


@pytest.fixture()
def tiny_cfg(learnable_archives: tuple[Path, Path], tmp_path: Path) -> TrainConfig:
    train_h5, valid_h5 = learnable_archives
    return TrainConfig(archive=train_h5, exp=tmp_path / "exp", valid=valid_h5, epochs=2, batch=16,
                       base_batch=16, lr=0.3, warmup_epochs=0, model=ModelConfig(hidden=16, layers=1, proj=8),
                       log_every=4, num_threads=1)


def _scalars(exp: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(exp / EVENTS_DIR), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_the_metrics_rows_are_tensorboard_scalars(tiny_cfg: TrainConfig) -> None:
    cfg = replace(tiny_cfg, epochs=2, log_every=1)
    train(cfg)
    rows = [json.loads(line) for line in (cfg.exp / "metrics.jsonl").read_text().splitlines()]
    scalars = _scalars(cfg.exp)
    steps = [r for r in rows if r["kind"] == "step"]
    epochs = [r for r in rows if r["kind"] == "epoch"]
    assert [s for s, _ in scalars["train/loss"]] == [r["step"] for r in steps]
    for (_, got), row in zip(scalars["train/loss"], steps, strict=True):
        assert abs(got - row["loss"]) < 1e-5 * max(1.0, abs(row["loss"]))
    assert [s for s, _ in scalars["epoch/train_loss"]] == [r["step"] for r in epochs]
    assert {"train/lr", "train/frames_per_s", "epoch/lr", "epoch/train_acc"} <= set(scalars)


def test_a_resumed_run_purges_the_events_after_its_checkpoint(tiny_cfg: TrainConfig) -> None:
    cfg = replace(tiny_cfg, epochs=2, log_every=1)
    train(cfg)
    shutil.rmtree(cfg.exp / "checkpoints" / "epoch-2")   # as if killed before epoch 2's checkpoint
    train(cfg)                                            # resumes after epoch 1, trains epoch 2 again
    steps = [s for s, _ in _scalars(cfg.exp)["train/loss"]]
    rows = [json.loads(line) for line in (cfg.exp / "metrics.jsonl").read_text().splitlines()]
    assert steps == [r["step"] for r in rows if r["kind"] == "step"]   # each step once, as in metrics.jsonl


def test_no_tensorboard_writes_no_events(tiny_cfg: TrainConfig) -> None:
    cfg = replace(tiny_cfg, epochs=1, tensorboard=False)
    train(cfg)
    assert not (cfg.exp / EVENTS_DIR).exists()

"""The loop's side of the strategy interface: which Strategy methods it calls, when, with what."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from asrtrain.distributed.base import Strategy
from asrtrain.model.blstm import ModelConfig
from asrtrain.train.config import TrainConfig
from asrtrain.train.trainer import train


class Recording(Strategy):
    """A single learner that logs every hook and trains on the blocks it chooses."""

    name = "recording"

    def __init__(self, blocks: list[int] | None = None, factor: float = 2.0) -> None:
        super().__init__()
        self.factor = factor
        self.calls: list[tuple[Any, ...]] = []
        self.chosen = blocks
        self.loaded: dict[str, Any] | None = None

    @property
    def device(self) -> str:
        return "cpu"

    def wrap(self, model: nn.Module) -> nn.Module:
        self.calls.append(("wrap",))
        return model

    def batches(self, loader: Any, epoch: int) -> Iterator[Any]:
        self.calls.append(("batches", epoch, loader.num_blocks))
        yield from loader.epoch(epoch, blocks=self.chosen)

    def loss_denominator(self, local_frames: int) -> float:
        self.calls.append(("denominator", local_frames))
        return self.factor * local_frames  # 2: halves the gradient, a visible effect

    def after_step(self, model: nn.Module, step: int) -> None:
        self.calls.append(("after_step", step))

    def end_epoch(self, model: nn.Module, epoch: int) -> None:
        self.calls.append(("end_epoch", epoch))

    def all_sum(self, values: list[float]) -> list[float]:
        self.calls.append(("all_sum", len(values)))
        return list(values)

    def state_dict(self, mid_epoch: bool = False) -> dict[str, Any]:
        return {"rounds": 7, "own_weights": False}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.loaded = state

    def close(self) -> None:
        self.calls.append(("close",))


def _cfg(archives: tuple[Path, Path], exp: Path, **kw: Any) -> TrainConfig:
    base: dict[str, Any] = dict(archive=archives[0], exp=exp, valid=archives[1], epochs=2, batch=16,
                                base_batch=16, lr=0.3, warmup_epochs=0, block_chunks=32,
                                model=ModelConfig(hidden=8, layers=1, proj=4), num_threads=1)
    base.update(kw)
    return TrainConfig(**base)


def test_hooks_in_order(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    strategy = Recording(blocks=[3, 1])  # two blocks of 32 chunks: 2 steps each
    result = train(_cfg(learnable_archives, tmp_path / "exp"), strategy)
    names = [c[0] for c in strategy.calls]
    assert names[0] == "wrap" and names[-1] == "close" and names.count("wrap") == 1
    per_epoch = ["batches"] + ["denominator", "after_step"] * 4 + ["end_epoch", "all_sum"]
    assert names[1:-1] == per_epoch * 2
    assert [c[1] for c in strategy.calls if c[0] == "after_step"] == list(range(1, 9))
    assert ("batches", 1, 5) in strategy.calls  # 158 chunks in blocks of 32
    assert ("all_sum", 7) in strategy.calls  # 4 training + 3 held-out figures
    assert [r["train_frames"] for r in result.history] == [sum(
        c[1] for c in strategy.calls[i:j] if c[0] == "denominator")
        for i, j in ((0, len(strategy.calls) // 2), (len(strategy.calls) // 2, len(strategy.calls)))]
    # the strategy's state is in the checkpoint and handed back on resume
    again = Recording(blocks=[0])
    train(_cfg(learnable_archives, tmp_path / "exp", epochs=3), again)
    assert again.loaded == {"rounds": 7, "own_weights": False}


def test_the_denominator_scales_the_step(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    """Dividing by twice the frames with twice the rate gives the plain learner's first step."""
    cfg = dict(epochs=1, momentum=0.0, clip=0.0, valid=None, max_steps_per_epoch=1)
    plain = train(_cfg(learnable_archives, tmp_path / "a", **cfg), Recording(blocks=[2], factor=1.0))
    halved = train(_cfg(learnable_archives, tmp_path / "b", lr=0.6, **cfg), Recording(blocks=[2]))
    assert plain.steps == halved.steps == 1
    a = torch.load(tmp_path / "a" / "checkpoints" / "epoch-1" / "model.pt")
    b = torch.load(tmp_path / "b" / "checkpoints" / "epoch-1" / "model.pt")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    same_rate = train(_cfg(learnable_archives, tmp_path / "c", **cfg), Recording(blocks=[2]))
    c = torch.load(tmp_path / "c" / "checkpoints" / "epoch-1" / "model.pt")
    assert same_rate.steps == 1 and not torch.allclose(a["output.weight"], c["output.weight"])

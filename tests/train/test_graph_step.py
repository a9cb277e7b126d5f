"""The training step replayed as a CUDA graph is the eager step: same weights, same figures.

The GPU tests train the same run twice through ``Trainer.fit`` (``--cuda-graph`` on and off)
and compare the weights; the rate changes every step (warm-up by step), and the epoch's last
batch is short, so the static rate and the padded short batch are both exercised. On a CPU:
a short batch padded as the graph's input is takes the step the batch itself takes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from asrtrain.model.blstm import ModelConfig
from asrtrain.train.config import TrainConfig
from asrtrain.train.graph_step import WARMUP_STEPS, fill, why_not

GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: CUDA-graph capture and replay")


def test_only_a_learners_own_plain_step_on_a_gpu_is_captured() -> None:
    cuda = torch.device("cuda")
    assert why_not(cuda, own_model=True, spec_augment=False, dropout=0.0) is None
    assert "GPU" in str(why_not(torch.device("cpu"), True, False, 0.0))
    assert "DDP" in str(why_not(cuda, False, False, 0.0))
    assert "SpecAugment" in str(why_not(cuda, True, True, 0.0))
    assert "dropout" in str(why_not(cuda, True, False, 0.1))


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the tests below compare the two steps")
def test_on_a_cpu_the_option_changes_nothing(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    runs = [_fit(learnable_archives, tmp_path / str(flag), graph=flag) for flag in (True, False)]
    assert runs[0][1] is None and runs[1][1] is None  # nothing captured off a GPU
    for a, b in zip(runs[0][0], runs[1][0], strict=True):
        assert torch.equal(a, b)


def test_a_short_batch_padded_to_the_full_batch_takes_the_same_step(learnable_archives: tuple[Path, Path],
                                                                    tmp_path: Path) -> None:
    from asrtrain.train.device import ahead
    from asrtrain.train.trainer import Trainer

    cfg = TrainConfig(archive=learnable_archives[0], exp=tmp_path / "exp", epochs=1, batch=12, base_batch=12,
                      warmup_epochs=0, model=ModelConfig(hidden=16, layers=2, proj=8), tensorboard=False)
    short, padded = Trainer(cfg), Trainer(cfg)  # the same seed: the same initial weights
    full = next(ahead(short.loader.epoch(1), short.device))
    x, y = full.x[:5], full.y[:5]
    static_x, static_y = 7 + torch.randn_like(full.x), torch.randint_like(full.y, 0, 5)  # a previous batch's
    fill(static_x, static_y, x, y)
    frames = int((y >= 0).sum())
    a = short._step_math(short.model, x, y, frames, True)
    b = padded._step_math(padded.model, static_x, static_y, frames, True)
    for name, u, v in zip(("loss", "correct", "gradient norm"), a, b, strict=True):
        assert u is not None and v is not None
        assert torch.allclose(u.double(), v.double(), rtol=1e-5), f"{name}: {u} against {v}"
    for p, q in zip(short.model.parameters(), padded.model.parameters(), strict=True):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-7)


def _fit(archives: tuple[Path, Path], exp: Path, graph: bool, optimizer: str = "sgd", precision: str = "fp32"
         ) -> tuple[list[torch.Tensor], object]:
    """Final weights (on the host) and the trainer's CapturedStep after one run of ``fit``."""
    from asrtrain.train.trainer import Trainer

    lr = 0.2 if optimizer == "sgd" else 2e-3
    cfg = TrainConfig(archive=archives[0], exp=exp, epochs=2, batch=12, base_batch=6, lr=lr, warmup_epochs=2,
                      warmup_granularity="step", optimizer=optimizer, model=ModelConfig(hidden=24, layers=2, proj=12),
                      log_every=5, precision=precision, cuda_graph=graph, tensorboard=False, resume=False)
    trainer = Trainer(cfg)
    trainer.fit()
    return [p.detach().cpu().clone() for p in trainer.model.parameters()], trainer.captured


@GPU
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_the_replayed_step_trains_the_eager_steps_weights(learnable_archives: tuple[Path, Path], tmp_path: Path,
                                                          optimizer: str) -> None:
    torch.backends.cudnn.deterministic = True
    try:
        graphed, captured = _fit(learnable_archives, tmp_path / "graph", True, optimizer)
        eager, none = _fit(learnable_archives, tmp_path / "eager", False, optimizer)
    finally:
        torch.backends.cudnn.deterministic = False
    assert none is None and captured is not None and captured.failed is None, getattr(captured, "failed", None)
    assert captured.replays > 10 and captured.warm == WARMUP_STEPS
    scale = max(float(p.abs().max()) for p in eager)
    worst = max(float((a - b).abs().max()) for a, b in zip(graphed, eager, strict=True))
    assert worst < 1e-4 * scale, f"graph and eager weights differ by {worst:.2e} (scale {scale:.2f})"


@GPU
def test_a_bf16_run_replays_and_learns(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    from asrtrain.train.metrics import epoch_rows

    _, captured = _fit(learnable_archives, tmp_path / "graph", True, precision="bf16")
    assert captured is not None and captured.failed is None and captured.replays > 10
    losses = [r["train_loss"] for r in epoch_rows(tmp_path / "graph" / "metrics.jsonl")]
    assert len(losses) == 2 and losses[1] < losses[0]

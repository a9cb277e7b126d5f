"""The step's figures stay on the device until read; batches go to the device ahead of the step."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from asrtrain.data.loader import IGNORE_INDEX
from asrtrain.model.blstm import ModelConfig
from asrtrain.train.config import TrainConfig
from asrtrain.train.device import StepFigures, ahead
from asrtrain.train.step import frame_loss


def test_figures_sum_the_window_and_name_the_first_bad_step() -> None:
    fig = StepFigures(torch.device("cpu"))
    one = torch.tensor(1.0)
    fig.add(1, torch.tensor(2.0), torch.tensor(3), one, frames=10)
    fig.add(2, torch.tensor(4.0), torch.tensor(5), one, frames=20)
    assert fig.read() == (6.0, 30, 8.0, 0, 0)
    assert fig.read() == (0.0, 0, 0.0, 0, 0)  # read resets the window
    fig.add(3, torch.tensor(1.0), torch.tensor(1), torch.tensor(math.inf), frames=5)
    fig.add(4, torch.tensor(math.nan), torch.tensor(1), torch.tensor(math.nan), frames=5)
    fig.add(5, torch.tensor(math.nan), torch.tensor(1), one, frames=5)
    *_, bad_loss, bad_grad = fig.read()
    assert (bad_loss, bad_grad) == (4, 3)  # the first step of each kind, not the last


def test_ahead_keeps_every_batch_and_counts_real_frames_on_the_host() -> None:
    ys = [torch.tensor([[0, 1, IGNORE_INDEX]]), torch.tensor([[IGNORE_INDEX] * 3]), torch.tensor([[2, 2, 2]])]
    batches = [(torch.full((1, 3, 2), float(i)), y) for i, y in enumerate(ys)]
    out = list(ahead(iter(batches), torch.device("cpu")))
    assert [b.frames for b in out] == [2, 0, 3]
    assert all(torch.equal(b.x, x) and torch.equal(b.y, y) for b, (x, y) in zip(out, batches, strict=True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: checks that the step never syncs the host")
def test_the_step_never_waits_for_the_gpu(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    from asrtrain.train.trainer import Trainer

    cfg = TrainConfig(archive=learnable_archives[0], exp=tmp_path / "exp", epochs=1, batch=16, base_batch=16,
                      warmup_epochs=0, model=ModelConfig(hidden=16, layers=2, proj=8), log_every=10 ** 6)
    trainer = Trainer(cfg)
    batches = list(ahead(trainer.loader.epoch(1), trainer.device))
    trainer.train_step(trainer.model, batches[0], 0.1)  # first step: cuDNN and allocator set-up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for batch in batches[1:4]:
            trainer.train_step(trainer.model, batch, 0.1)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    loss, frames, _, bad_loss, bad_grad = trainer.figures.read()
    assert frames > 0 and loss > 0 and bad_loss == bad_grad == 0


def test_the_loss_of_bf16_logits_matches_the_float32_loss_without_their_copy() -> None:
    torch.manual_seed(0)
    logits = 3 * torch.randn(6, 21, 50)
    y = torch.randint(0, 50, (6, 21))
    y[0, 15:] = IGNORE_INDEX
    exact = frame_loss(logits, y)
    low = logits.to(torch.bfloat16).requires_grad_()
    loss, frames, correct = frame_loss(low, y)
    assert loss.dtype == torch.float32 and int(frames) == int(exact[1]) == 6 * 21 - 6
    assert abs(float(loss) / float(exact[0]) - 1) < 2e-3  # bf16 rounding of the logits and per-frame losses
    assert abs(int(correct) - int(exact[2])) <= 2  # near-ties may flip in bf16
    loss.backward()
    assert low.grad is not None and torch.isfinite(low.grad.float()).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: cuDNN's LSTM under bf16 autocast")
def test_bf16_autocast_runs_the_lstm_in_bf16_with_float32_weights_and_gradients() -> None:
    from asrtrain.model.blstm import BLSTM

    model = BLSTM(ModelConfig(input_dim=12, hidden=16, layers=2, proj=8, num_pdfs=10)).cuda()
    seen: list[torch.dtype] = []
    model.lstm.register_forward_hook(lambda _m, _i, out: seen.append(out[0].dtype))
    x = torch.randn(3, 21, 12, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(x)
    logits.float().sum().backward()
    assert seen == [torch.bfloat16]  # autocast alone would run cuDNN's RNN in float16
    assert all(p.dtype == torch.float32 and p.grad is not None and p.grad.dtype == torch.float32
               for p in model.parameters())
    with torch.no_grad():  # the same function as the float32 model, to bf16's precision
        ref = model(x)
    assert (logits.float() - ref).abs().max() < 0.05 * ref.abs().max()

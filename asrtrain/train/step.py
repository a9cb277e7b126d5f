"""The arithmetic of one step: mixed precision, and the frame loss over real frames only.

Chunks are padded to 21 frames with ``IGNORE_INDEX`` targets; those frames add
nothing to the loss, the frame count or the accuracy. The loss is summed, not
averaged: the caller divides by the strategy's denominator (the frames of the
whole super-learner), which is what makes SSGD on several learners equal one learner.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.nn.functional as F

from asrtrain.core.errors import ConfigError
from asrtrain.data.loader import IGNORE_INDEX


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """bf16 autocast on GPU by default; fp32 (no autocast) on CPU unless asked."""
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        if device.type == "cpu":
            check_cpu_bf16_lstm()
        return torch.bfloat16
    return None


@functools.lru_cache(maxsize=1)
def cpu_bf16_lstm_problem() -> str | None:
    """Why this CPU cannot run a bf16 LSTM (None when it can): oneDNN's bf16 LSTM needs
    AVX-512 (BF16 or AMX); without it the first forward fails deep inside torch."""
    lstm = torch.nn.LSTM(8, 8, batch_first=True, bidirectional=True)
    try:
        with torch.no_grad(), torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            lstm(torch.zeros(1, 2, 8))
    except RuntimeError as exc:
        return str(exc).splitlines()[0]
    return None


def check_cpu_bf16_lstm() -> None:
    """A ConfigError before training when ``--precision bf16`` cannot run on this CPU."""
    problem = cpu_bf16_lstm_problem()
    if problem:
        raise ConfigError(f"--precision bf16: this CPU cannot run the LSTM in bf16 ({problem}); "
                          "use --precision fp32")


def autocast(device: torch.device, dtype: torch.dtype | None, cache: bool = True) -> contextlib.AbstractContextManager:
    """Autocast to ``dtype`` on ``device``, or nothing for full precision. ``cache=False``: no
    weight-cast cache (it cannot live across the replays of a captured CUDA graph)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=cache)


def frame_loss(logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(summed cross-entropy, real frames, correct frames) as tensors on the logits' device.
    ``label_smoothing`` ε: each real frame's target is 1 − ε on its pdf plus ε spread evenly
    over all of them (training only: the held-out loss is the plain cross-entropy)."""
    flat = logits.reshape(-1, logits.shape[-1])
    y = targets.reshape(-1)
    if flat.dtype == torch.bfloat16:
        # no float32 copy of the logits (for the paper's 32,000 pdfs the largest tensor of the
        # step: 30% of an H200's step time at batch 4096); the softmax accumulates in float32
        # inside the kernel, and the per-frame losses are summed in float32
        loss_sum = F.cross_entropy(flat, y, ignore_index=IGNORE_INDEX, reduction="none",
                                   label_smoothing=label_smoothing).float().sum()
    else:
        flat = flat.float()
        loss_sum = F.cross_entropy(flat, y, ignore_index=IGNORE_INDEX, reduction="sum",
                                   label_smoothing=label_smoothing)
    real = y != IGNORE_INDEX
    with torch.no_grad():
        correct = ((flat.argmax(-1) == y) & real).sum()
    return loss_sum, real.sum(), correct

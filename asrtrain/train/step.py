"""The arithmetic of one step: mixed precision, and the frame loss over real frames only.

Chunks are padded to 21 frames with ``IGNORE_INDEX`` targets; those frames add
nothing to the loss, the frame count or the accuracy. The loss is summed, not
averaged: the caller divides by the strategy's denominator (the frames of the
whole super-learner), which is what makes SSGD on several learners equal one learner.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from asrtrain.data.loader import IGNORE_INDEX


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """bf16 autocast on GPU by default; fp32 (no autocast) on CPU unless asked."""
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """Autocast to ``dtype`` on ``device``, or nothing for full precision."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def frame_loss(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(summed cross-entropy, real frames, correct frames) as tensors on the logits' device."""
    flat = logits.reshape(-1, logits.shape[-1]).float()
    y = targets.reshape(-1)
    loss_sum = F.cross_entropy(flat, y, ignore_index=IGNORE_INDEX, reduction="sum")
    real = y != IGNORE_INDEX
    with torch.no_grad():
        correct = ((flat.argmax(-1) == y) & real).sum()
    return loss_sum, real.sum(), correct

"""Batches onto the device ahead of the step, and figures that stay there until they are read.

On a GPU every ``float(tensor)`` or ``int(tensor)`` in the step waits for the work
queued before it: the host stops feeding the device. So the step keeps its sums
(loss, correct frames, the first step whose loss or gradient was not finite) in one
device tensor, and the loop reads it every ``log_every`` steps and at the epoch's
end. The host copy of a batch (float16, as stored) is pinned by the loader; :func:`ahead`
copies the next batch on a side stream while the current one computes, and makes it
float32 on the device. On the CPU both are the same
code with nothing to overlap: the figures are read as often, the copies are no-ops.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from asrtrain.data.loader import real_frames

LOSS, CORRECT, BAD_LOSS, BAD_GRAD = range(4)


@dataclass
class DeviceBatch:
    """A batch on the device, with what the host knows of it without reading the device."""

    x: torch.Tensor
    y: torch.Tensor
    frames: int  # real (unpadded) frames, counted on the host copy


def ahead(batches: Iterator[tuple[torch.Tensor, torch.Tensor]], device: torch.device) -> Iterator[DeviceBatch]:
    """``batches`` on ``device``, each copied on a side stream while the GPU still runs the previous step.

    No batch is taken from ``batches`` before the step that uses it is due: a strategy's
    batch generator has side effects (a super-learner's members agree on each step's frames,
    gossip and checkpoint as they take it; a work-shared piece is marked served), and a
    batch read ahead would be lost at a checkpoint's pause and agree for the wrong step.
    The overlap needs no read-ahead: the step never waits for the GPU, so the host asks
    for the next batch while the GPU still computes the last, and the copy runs then.
    """
    if device.type != "cuda":
        for x, y in batches:
            yield DeviceBatch(x.to(device, torch.float32), y.to(device), real_frames(y))
        return
    side = torch.cuda.Stream(device)
    compute = torch.cuda.current_stream(device)
    for x, y in batches:
        with torch.cuda.stream(side):  # the archive's float16 crosses the bus, float32 is made on the GPU
            nxt = DeviceBatch(x.to(device, non_blocking=True).float(), y.to(device, non_blocking=True),
                              real_frames(y))
        compute.wait_stream(side)  # the copy is done before the step that uses it
        nxt.x.record_stream(compute)  # the caching allocator must not reuse it while the step runs
        nxt.y.record_stream(compute)
        yield nxt


class StepFigures:
    """The loss sum, correct frames and first non-finite steps of a window of steps, on the device.

    :meth:`add` is a few tiny device ops and never waits; :meth:`read` is the one
    host sync of the window. Steps are counted from 1; 0 in a ``BAD_*`` slot means
    every step of the window was finite.
    """

    def __init__(self, device: torch.device) -> None:
        self.sums = torch.zeros(4, dtype=torch.float64, device=device)
        self.frames = 0  # host side

    def add(self, step: int, loss_sum: torch.Tensor, correct: torch.Tensor, grad_norm: torch.Tensor | None,
            frames: int) -> None:
        """Count one step's figures (all device tensors) without a sync."""
        norm = grad_norm.detach().double() if grad_norm is not None else torch.zeros((), dtype=torch.float64,
                                                                                    device=self.sums.device)
        loss = loss_sum.detach().double()
        bad = ~torch.isfinite(torch.stack([loss, norm]))  # [loss, gradient], as BAD_LOSS, BAD_GRAD
        first = self.sums[BAD_LOSS:] == 0
        self.sums[BAD_LOSS:] = torch.where(bad & first, float(step), self.sums[BAD_LOSS:])
        self.sums[LOSS:BAD_LOSS] += torch.stack([loss, correct.double()])
        self.frames += frames

    def read(self) -> tuple[float, int, float, int, int]:
        """(loss sum, frames, correct frames, first bad-loss step, first bad-gradient step); resets."""
        loss, correct, bad_loss, bad_grad = (float(v) for v in self.sums.tolist())
        frames = self.frames
        self.sums.zero_()
        self.frames = 0
        return loss, frames, correct, int(bad_loss), int(bad_grad)

"""Combining the learners' models: gradients inside a super-learner every step, weights over all.

Members of a super-learner allreduce their gradients every step
(DistributedDataParallel on the super-learner's group); each divides its summed
loss so that DDP's mean is one big learner's gradient. All learners start from
rank 0's weights, and at an epoch's end their weights can be replaced by the mean.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from asrtrain.distributed.groups import Layout


def _no_buffer_sync() -> dict[str, Any]:
    """DDP's switch for not broadcasting buffers every forward (renamed in torch 2.13)."""
    import inspect

    from torch.nn.parallel import DistributedDataParallel as DDP

    params = inspect.signature(DDP.__init__).parameters
    return {"forward_sync_buffers": False} if "forward_sync_buffers" in params else {"broadcast_buffers": False}


def broadcast_weights(model: nn.Module, own_weights: bool) -> None:
    """Rank 0's weights and buffers everywhere; learners resumed with weights of their own keep them."""
    import torch.distributed as dist

    with torch.no_grad():
        tensors = list(model.buffers()) if own_weights else list(model.parameters()) + list(model.buffers())
        for t in tensors:
            dist.broadcast(t.data, src=0)


def _all_reduce_flat(tensors: list[torch.Tensor], group: Any, divide: float = 1.0) -> None:
    """Each tensor replaced by its sum over ``group`` divided by ``divide``, in one allreduce."""
    import torch.distributed as dist

    with torch.no_grad():
        flat = torch.cat([t.detach().reshape(-1) for t in tensors])
        dist.all_reduce(flat, group=group)
        if divide != 1.0:
            flat /= divide
        offset = 0
        for t in tensors:
            t.copy_(flat[offset:offset + t.numel()].view_as(t))
            offset += t.numel()


def average_weights(model: nn.Module, group: Any, count: int) -> None:
    """Replace the weights by their mean over ``group`` (``count`` learners; ``None``: all)."""
    _all_reduce_flat(list(model.parameters()), group, count)


def sum_gradients(model: nn.Module, group: Any) -> None:
    """Replace the gradients by their sum over ``group``: SSGD where DDP cannot be used (a loop
    that runs the network several times before one backward); a learner whose share of the step
    was empty takes part with zeros."""
    grads = []
    for p in model.parameters():
        if p.requires_grad:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
    _all_reduce_flat(grads, group)


class GradientCombiner:
    """One super-learner's gradient allreduce (DDP) and the loss denominator that makes it one learner."""

    def __init__(self, layout: Layout, group: Any, device: str) -> None:
        self.layout, self.group, self.device = layout, group, device
        self.ddp: nn.Module | None = None
        self._denominator: float | None = None

    def wrap(self, model: nn.Module) -> nn.Module:
        """DDP on the super-learner's group (a super-learner of one: the model itself)."""
        if self.layout.group_size == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel as DDP

        ids = [torch.device(self.device)] if self.device != "cpu" else None
        # Buffers (input normalisation) are equal already: broadcast before.
        # find_unused_parameters keeps DDP from rebuilding its buckets in the order the
        # first step's gradients became ready: a job resumed in the middle of an epoch
        # then sums each gradient element in the same order as the job it continues
        # (with more than 2 learners the order changes the float sum), so SSGD resumes bit for bit.
        self.ddp = DDP(model, device_ids=ids, process_group=self.group, find_unused_parameters=True,
                       **_no_buffer_sync())
        return self.ddp

    def agreed(self, frames: int) -> None:
        """The members' real frames of the next step, agreed before it (the lockstep)."""
        self._denominator = max(frames, 1) / self.layout.group_size

    def loss_denominator(self, local_frames: int) -> float:
        """The super-learner's real frames over the group size that DDP's mean divides by.

        DDP averages the members' gradients; dividing each member's summed loss by
        ``total / group_size`` makes the average equal the gradient of the summed
        loss of the union of the batches over its total frames (one big learner).
        The total was agreed on before the step (:meth:`agreed`); a super-learner
        of one divides by its own frames.
        """
        if self.layout.group_size == 1:
            return float(max(local_frames, 1))
        assert self._denominator is not None, "a super-learner's batches come from batches()"
        value, self._denominator = self._denominator, None
        return value

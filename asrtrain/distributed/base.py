"""How learners cooperate, as the training loop sees it: the interface, and the single learner.

The training loop is the same for one learner and for SSGD, ADPSGD and
H-ADPSGD. It asks a :class:`Strategy` for the module to run and
for the epoch's batches, divides the summed frame loss by
:meth:`Strategy.loss_denominator`, and tells it when a step and an epoch end. This
base class is the single learner (no communication, the loader's own order);
:class:`asrtrain.distributed.strategy.DistributedStrategy` is the three strategies.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import torch
from torch import nn

Batch = tuple[torch.Tensor, torch.Tensor]
Batches = Generator[Batch, None, None]  # closing it stops the loader's prefetch thread


class Strategy:
    """The single learner: no communication, every block of the epoch in the loader's order."""

    name = "single"

    def __init__(self) -> None:
        self.rank = 0
        self.world_size = 1
        self.stats: dict[str, Any] = {}  # what the strategy did this epoch (rounds, blocks), for logs and tests

    @property
    def is_main(self) -> bool:
        """The learner that writes checkpoints, metrics and ``final.pt``."""
        return self.rank == 0

    @property
    def device(self) -> str:
        """Where this learner computes."""
        return "cuda" if torch.cuda.is_available() else "cpu"

    def wrap(self, model: nn.Module) -> nn.Module:
        """The module the loop calls forward/backward on (DDP-wrapped in a super-learner)."""
        return model

    def batches(self, loader: Any, epoch: int) -> Batches:
        """This learner's batches of the epoch (a generator: closing it stops the prefetch)."""
        yield from loader.epoch(epoch)

    @property
    def weights_agree(self) -> bool:
        """Whether every learner holds the same weights at an epoch's end (else each saves its own)."""
        return True

    def blocks_handed_out(self) -> int | None:
        """Blocks of this epoch handed to all learners so far; ``None``: no shared counter.

        Under work sharing no learner knows its own number of steps in advance, so
        the epoch's progress is read from the shared counter instead.
        """
        return None

    def loss_denominator(self, local_frames: int) -> float:
        """What the summed frame loss is divided by before backward.

        One learner: its own number of real (unpadded) frames. A super-learner
        divides by the total over its members so that its gradient equals one
        learner's on the union of the batches.
        """
        return float(max(local_frames, 1))

    def after_step(self, model: nn.Module, step: int) -> None:
        """Called after each optimizer step (gossip hands the new weights to its thread)."""

    def end_epoch(self, model: nn.Module, epoch: int) -> None:
        """Called when this learner has no more batches: agree on the end, average weights."""

    def all_sum(self, values: list[float]) -> list[float]:
        """Sum numbers over all learners (metrics); identity for one learner."""
        return list(values)

    def barrier(self) -> None:
        """Wait for every learner (used only outside the epoch's inner loop)."""

    def state_dict(self) -> dict[str, Any]:
        """Whatever the strategy needs for an exact resume."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""

    def close(self) -> None:
        """Stop background threads and leave process groups."""

    def describe(self) -> dict[str, Any]:
        """The plan, for ``--dry-run`` and the log."""
        return {"strategy": self.name, "world_size": self.world_size}

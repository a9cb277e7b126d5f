"""How learners cooperate, as the training loop sees it: the interface, and the single learner.

The training loop is the same for one learner and for SSGD, ADPSGD and
H-ADPSGD. It asks a :class:`Strategy` for the module to run and for the epoch's
batches, divides the summed frame loss by :meth:`Strategy.loss_denominator`, tells
it when a step and an epoch end, and asks it at every step boundary whether to
pause for a checkpoint. This base class is the single learner: no communication,
the epoch's blocks in the loader's order through the same work-sharing hand as
many learners (:mod:`asrtrain.distributed.worksharing`, over an in-process store),
so that a checkpoint in the middle of an epoch means the same for one learner as
for many. :class:`asrtrain.distributed.strategy.DistributedStrategy` is the three
strategies, composed of parts beside it.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import asdict
from typing import Any

import torch
from torch import nn

from asrtrain.data.loader import Piece
from asrtrain.distributed import signals
from asrtrain.distributed.worksharing import EpochWork, Hand

Batch = tuple[torch.Tensor, torch.Tensor]
Batches = Generator[Batch, None, None]  # closing it stops the loader's prefetch thread


class Strategy:
    """The single learner: no communication, every block of the epoch in the loader's order."""

    name = "single"

    def __init__(self) -> None:
        self.rank = 0
        self.world_size = 1
        self.stats: dict[str, Any] = {}  # what the strategy did this epoch (rounds, blocks), for logs and tests
        self.hand: Hand | None = None
        self._restored: dict[str, Any] | None = None  # a mid-epoch checkpoint's work, until its epoch starts

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

    # ----- the epoch's work ------------------------------------------------------------------
    def batches(self, loader: Any, epoch: int) -> Batches:
        """This learner's batches of the epoch (a generator: closing it stops the prefetch).

        Called again after a pause, it goes on where the last step left off.
        """
        hand = self.hand_for(loader, epoch)
        for x, y, piece, end in loader.tagged(epoch, hand.feed()):
            hand.served(piece, end)
            yield x, y

    def hand_for(self, loader: Any, epoch: int) -> Hand:
        """This learner's hand for ``epoch``: the one in use, a restored one, or a new one."""
        if self.hand is None or self.hand.work.epoch != epoch:
            work = EpochWork(self.work_store(), epoch, loader.block_order(epoch), self._owner())
            self.hand = Hand(work, loader.block_length, self._restored_pieces(work), self._wait_more(work))
        return self.hand

    def _owner(self) -> int | None:
        """The rank claims are recorded under (``None``: not recorded; only learners that may leave need it)."""
        return None

    def _wait_more(self, work: EpochWork) -> Any:
        """What a learner out of ``work`` waits on (``None``: its epoch's work is over)."""
        return None

    def learner_ranks(self) -> list[int]:
        """The learners whose state a checkpoint holds: all of them, unless some left the job."""
        return list(range(self.world_size))

    def events(self) -> list[dict[str, Any]]:
        """What happened to the job since the last call (learners that left, blocks handed out again)."""
        return []

    def work_store(self) -> Any:
        """Where the epoch's work is handed out: an in-process store for one learner."""
        import torch.distributed as dist

        if not hasattr(self, "_local_store"):
            self._local_store = dist.HashStore()
        return self._local_store

    def _restored_pieces(self, work: EpochWork) -> list[Piece]:
        """The hand of a mid-epoch checkpoint of this epoch (the store's side restored first)."""
        saved, self._restored = self._restored, None
        if saved is None or saved["epoch"] != work.epoch:
            return []
        if self.is_main and saved.get("store"):
            work.restore(saved["store"])
        self.barrier()  # no claim before the main learner has restored the counters
        return [Piece(**p) for p in saved["hand"]]

    def work_state(self) -> dict[str, Any]:
        """This learner's part of the epoch's work for a mid-epoch checkpoint (and the store's, on the main)."""
        assert self.hand is not None
        state: dict[str, Any] = {"epoch": self.hand.work.epoch, "hand": [asdict(p) for p in self.hand.pieces],
                                 "finished": self.hand.finished}
        if self.is_main:
            ranks = self.learner_ranks()
            state["store"] = self.hand.work.snapshot(ranks if len(ranks) < self.world_size else None)
        return state

    def restore_work(self, state: dict[str, Any]) -> None:
        """Take over a mid-epoch checkpoint's work; it is applied when that epoch's batches start."""
        self._restored = state

    def blocks_handed_out(self) -> int | None:
        """Blocks of this epoch handed to all learners so far; ``None``: the loop counts steps instead.

        Under work sharing no learner knows its own number of steps in advance, so
        the epoch's progress is read from the shared counter instead.
        """
        return None

    @property
    def weights_agree(self) -> bool:
        """Whether every learner holds the same weights at an epoch's end (else each saves its own)."""
        return True

    # ----- the step ---------------------------------------------------------------------------
    def loss_denominator(self, local_frames: int) -> float:
        """What the summed frame loss is divided by before backward.

        One learner: its own number of real (unpadded) frames. A super-learner
        divides by the total over its members so that its gradient equals one
        learner's on the union of the batches.
        """
        return float(max(local_frames, 1))

    def after_step(self, model: nn.Module, step: int) -> None:
        """Called after each optimizer step: the batch served first is trained."""
        if self.hand is not None:
            self.hand.stepped()

    # ----- checkpoints and the end of an epoch ---------------------------------------------
    def pause_wanted(self, want: bool) -> bool:
        """At a step boundary: whether to pause for a checkpoint now (``want``: this learner asks)."""
        return want or signals.requested() is not None

    def pause(self, model: nn.Module, step: int) -> int | None:
        """Every learner at a step boundary, nothing in flight: the main learner's step (which names
        the checkpoint), or ``None`` if the checkpoint was called off."""
        if self.hand is not None:
            self.hand.pause()
        return step

    def decide_stop(self, name: str) -> bool:
        """The main learner, checkpoint ``name`` sealed: whether the job stops now (a preemption)."""
        return signals.requested() is not None

    def stops(self, name: str) -> bool:
        """Every learner, after checkpoint ``name``: whether the job stops now."""
        return signals.requested() is not None

    def end_epoch(self, model: nn.Module, epoch: int) -> None:
        """Called when this learner has no more batches: agree on the end, average weights."""
        self.stats["blocks"] = self.hand.finished if self.hand is not None else 0

    def all_sum(self, values: list[float]) -> list[float]:
        """Sum numbers over all learners (metrics); identity for one learner."""
        return list(values)

    def sum_gradients(self, model: nn.Module) -> None:
        """Sum every learner's gradients in place: SSGD for a loop that runs the network several
        times before one backward (train-seq, a forward per utterance), where DDP cannot; one
        learner: nothing to do."""

    def barrier(self) -> None:
        """Wait for every learner (used only outside the epoch's inner loop)."""

    def state_dict(self, mid_epoch: bool = False) -> dict[str, Any]:
        """Whatever the strategy needs for an exact resume (``own_weights``: each learner saves its weights)."""
        return {"strategy": self.name, "world_size": self.world_size, "own_weights": False}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""

    def close(self) -> None:
        """Stop background threads and leave process groups."""

    def describe(self) -> dict[str, Any]:
        """The plan, for ``--dry-run`` and the log."""
        return {"strategy": self.name, "world_size": self.world_size}

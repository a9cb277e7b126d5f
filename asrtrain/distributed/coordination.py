"""Coordinating the job: who is in it, checkpoint pauses, barriers, sums over the learners alive.

Everything here is off the step's path or at its boundaries: membership
(:mod:`asrtrain.distributed.membership`, learners leaving an ``--elastic`` job),
checkpoint meetings (:mod:`asrtrain.distributed.pause`), barriers that a long
validation does not trip, and the group of the learners alive for global sums.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import torch

from asrtrain.distributed import signals
from asrtrain.distributed.heartbeat import Heartbeat
from asrtrain.distributed.membership import Membership, wait_for_all
from asrtrain.distributed.pause import PauseAgreement

log = logging.getLogger("asrtrain.distributed")


class JobCoordination:
    """One learner's part in the job's agreements (main thread only).

    ``in_lockstep``: members of a super-learner agree on a checkpoint before a step
    (the lockstep's ``pause``, handed in as :attr:`pause_after_step`); a learner on
    its own reads the open checkpoint from the store.
    """

    def __init__(self, store: Any, rank: int, world_size: int, timeout_s: float, members: Membership,
                 heartbeat: Heartbeat, in_lockstep: bool) -> None:
        self.store, self.rank, self.world_size, self.timeout_s = store, rank, world_size, timeout_s
        self.members, self.heartbeat, self.in_lockstep = members, heartbeat, in_lockstep
        self.pauses = PauseAgreement(store, rank, members, heartbeat)
        self.pause_after_step = 0  # members of a super-learner: the checkpoint agreed before this step
        self._barriers = 0
        self._world: tuple[int, Any] = (0, None)  # (membership version, group of the learners alive)
        self._reported: set[int] = set()  # departures already in the metrics

    @property
    def is_main(self) -> bool:
        """The lowest rank alive (rank 0 unless it left an ``--elastic`` job)."""
        return self.members.is_main

    def learner_ranks(self) -> list[int]:
        return list(self.members.live)

    def departures(self) -> list[dict[str, Any]]:
        """Learners that left since the last call, for the main learner's metrics."""
        self.members.refresh()
        out = [{"event": "learner left", "rank": r, **self.members.gone[r]}
               for r in sorted(self.members.gone) if r not in self._reported]
        self._reported.update(self.members.gone)
        return out

    # ----- checkpoints -------------------------------------------------------------------------
    def pause_wanted(self, want: bool) -> bool:
        """Ask for a checkpoint if wanted (or on a signal); whether this learner pauses now.

        Members of a super-learner pause at the step they agreed on before it.
        """
        stop = signals.requested() is not None
        if want or stop:
            self.pauses.request(stop)
        if self.in_lockstep:
            return self.pause_after_step > 0
        return self.pauses.pending() is not None

    def take_pause(self) -> int:
        """The checkpoint to join now (0: none), forgotten for the next step."""
        ident = self.pause_after_step if self.in_lockstep else self.pauses.pending()
        self.pause_after_step = 0
        return ident or 0

    def join(self, ident: int, step: int, meanwhile: Any) -> int | None:
        """Wait for every learner in checkpoint ``ident``: the main learner's step, or ``None`` if called off."""
        main_step = self.pauses.join(ident, step, meanwhile=meanwhile)
        if main_step is None:
            log.info("rank %d: checkpoint %d called off (a learner reached the end of the epoch)", self.rank, ident)
        return main_step

    def decide_stop(self, name: str) -> bool:
        return self.pauses.decide(name)

    def stops(self, name: str) -> bool:
        return self.pauses.decision(name)

    # ----- all learners --------------------------------------------------------------------------
    def barrier(self) -> None:
        """Wait for every learner, as long as they are alive (the main one may be validating).

        A store counter rather than ``dist.barrier``: a long validation on the main
        learner must not trip the collectives' timeout, a dead learner still must.
        """
        self._barriers += 1
        key = f"barrier/{self._barriers}"
        self.store.set(f"{key}/{self.rank}", "1")
        wait_for_all(self.store, key, self.members, self.heartbeat)

    def all_sum(self, values: list[float], device: str) -> list[float]:
        """Sum numbers over the learners alive (metrics)."""
        import torch.distributed as dist

        group, _ = self.alive_group()
        t = torch.tensor(values, dtype=torch.float64, device=device)
        dist.all_reduce(t, group=group)
        return [float(v) for v in t.cpu()]

    def alive_group(self) -> tuple[Any, int]:
        """The group of every learner alive (the default group until one leaves) and its size.

        A group of the survivors is made by them alone (``use_local_synchronization``):
        the learner that left cannot take part. Called by all survivors at the same
        points (the epoch's end), in the same membership version.
        """
        import torch.distributed as dist

        if not self.members.gone:
            return None, self.world_size
        version, group = self._world
        if version != self.members.version:
            group = dist.new_group(self.members.live, timeout=timedelta(seconds=self.timeout_s),
                                   use_local_synchronization=True)
            self._world = (self.members.version, group)
        return group, len(self.members.live)

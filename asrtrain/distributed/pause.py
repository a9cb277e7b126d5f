"""Mid-epoch checkpoints among learners that do not step together: who pauses, and when.

ADPSGD learners are at different steps at any moment, so a checkpoint is a
meeting: a learner that wants one (the main learner's clock, any learner's
SIGTERM) *opens* it under the store key ``ck/open`` (compare-and-set: one open at
a time, each with a new id). Every learner sees the key within a heartbeat and
*joins* at its next step boundary: it stops taking work and waits until every
learner alive has joined; then all end gossip on the same round, each saves its
own state and the main learner seals the checkpoint and *closes* it, writing
whether the job goes on or stops (a preemption).

A learner that reaches the end of the epoch's work while a checkpoint is open
*cancels* it (the epoch's own checkpoint comes next): learners waiting in it go
back to work. A preemption is not lost by a cancel: the stop request is sticky
and the epoch's checkpoint decides it.
"""

from __future__ import annotations

from typing import Any

from asrtrain.distributed.heartbeat import Heartbeat
from asrtrain.distributed.membership import Membership, wait_for_all

OPEN = "ck/open"
STOP = "ck/stop"


class PauseAgreement:
    """One learner's side of the checkpoint meetings (all store traffic off the step path)."""

    def __init__(self, store: Any, rank: int, members: Membership, heartbeat: Heartbeat) -> None:
        self.store, self.rank, self.members, self.heartbeat = store, rank, members, heartbeat
        self.joined = 0  # the last checkpoint id this learner took part in (or saw cancelled)
        heartbeat.watch(OPEN)

    def request(self, stop: bool) -> None:
        """Ask for a checkpoint (and, for a preemption, for the job to stop after it)."""
        if stop:
            self.store.set(STOP, str(self.rank))
        if self._open() is not None:
            return
        new = str(int(self.store.add("ck/ids", 1)))
        if self.store.compare_set(OPEN, "", new) == new.encode():
            self.heartbeat.watched[OPEN] = new.encode()  # the opener needs no beat to see it

    def _open(self) -> int | None:
        """The open checkpoint's id, read now from the store (closed: the key is empty or absent)."""
        value = self.store.get(OPEN) if self.store.check([OPEN]) else b""
        return int(value) if value else None

    def pending(self) -> int | None:
        """The open checkpoint this learner has not joined yet, as last seen by the heartbeat."""
        seen = self.heartbeat.watched.get(OPEN)
        ident = int(seen) if seen else 0
        return ident if ident > self.joined else None

    def join(self, ident: int, step: int, meanwhile: Any = None) -> int | None:
        """Take part in checkpoint ``ident``: wait for every learner alive; the main learner's step,
        or ``None`` if it was called off."""
        self.joined = ident
        if self.members.is_main:
            self.store.set(f"ck/{ident}/step", str(step))
        self.store.set(f"ck/{ident}/joined/{self.rank}", "1")
        cancelled = f"ck/{ident}/cancel"

        def watch() -> None:
            if meanwhile is not None:
                meanwhile()
            if self.store.check([cancelled]):
                raise _Cancelled

        try:
            wait_for_all(self.store, f"ck/{ident}/joined", self.members, self.heartbeat, meanwhile=watch)
        except _Cancelled:
            return None
        if self.store.check([cancelled]):
            return None
        return int(self.store.get(f"ck/{ident}/step"))

    def cancel_open(self) -> None:
        """At the epoch's end: an open checkpoint that this learner will not join is called off."""
        ident = self._open()
        if ident is None or ident <= self.joined:
            return
        self.store.set(f"ck/{ident}/cancel", "1")
        self.store.compare_set(OPEN, str(ident), "")
        self.joined = ident
        self.heartbeat.watched[OPEN] = None

    def decide(self, name: str) -> bool:
        """Main learner, checkpoint ``name`` written: record whether the job stops, close the meeting."""
        stop = self.store.check([STOP])
        self.store.set(f"ck/{name}/decision", "stop" if stop else "go")
        if self.joined:
            self.store.compare_set(OPEN, str(self.joined), "")
        return stop

    def decision(self, name: str) -> bool:
        """After the checkpoint's last barrier: whether the job stops."""
        return self.store.get(f"ck/{name}/decision") == b"stop"


class _Cancelled(Exception):
    """A learner reached the end of the epoch: the open checkpoint is called off."""

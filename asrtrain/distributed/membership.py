"""Who is still in the job: the learners (and super-learners) alive, as every learner sees it.

Under ``--elastic`` a learner that stops answering is not an error but a departure.
Whoever notices it first (a heartbeat that stopped, a partner whose connection
closed, the ``--nproc`` launcher that saw the process exit) *declares* it gone in
the store: ``members/gone/<rank>`` and a new ``members/version``. Every learner
reads the version at each gossip round and at each wait, so all move to the same
view; a super-learner is alive only while all its members are (a member whose
sibling left cannot step alone, and leaves too). The gossip ring is re-formed over
the super-learners alive, from each learner's next round in the new version
(:mod:`asrtrain.distributed.gossip`); the lowest rank alive is the main learner.

Without ``--elastic`` nothing is ever declared gone: a silent learner is an error
naming it, as before.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from asrtrain.core.errors import AsrtrainError
from asrtrain.distributed.groups import Layout
from asrtrain.distributed.heartbeat import CHECK_S, POLL_S, Heartbeat, Silent

log = logging.getLogger("asrtrain.distributed")

VERSION = "members/version"


def announce_gone(store: Any, rank: int, why: str) -> bool:
    """Record ``rank`` as gone in the store, once whoever notices first; True for the first."""
    if int(store.add(f"members/gone/{rank}/n", 1)) != 1:
        return False
    store.set(f"members/gone/{rank}", json.dumps({"why": why, "time": time.time()}))
    store.add(VERSION, 1)
    return True


class TooFewLearners(AsrtrainError):
    """Fewer learners are left than ``--min-learners``."""


class Membership:
    """This learner's view of who is alive (refreshed from the store), and how to declare a departure."""

    def __init__(self, store: Any, layout: Layout, elastic: bool, min_learners: int | None) -> None:
        self.store, self.layout, self.elastic = store, layout, elastic
        self.min_learners = min_learners if min_learners is not None else -(-layout.world_size // 2)
        self.version = 0
        self.gone: dict[int, dict[str, Any]] = {}  # rank -> {"why", "time"} of its departure
        self.live = list(range(layout.world_size))

    def refresh(self) -> bool:
        """Read the store's view; True if it changed since the last call."""
        if not self.elastic:
            return False
        version = int(self.store.add(VERSION, 0))
        if version == self.version:
            return False
        ranks = range(self.layout.world_size)
        for r in ranks:
            if r not in self.gone and self.store.check([f"members/gone/{r}"]):
                self.gone[r] = json.loads(self.store.get(f"members/gone/{r}"))
        self.version = version
        self.live = [r for r in ranks if r not in self.gone and self._super_alive(r, list(self.gone))]
        log.warning("rank %d: membership version %d: learners alive %s, gone %s", self.layout.rank, version,
                    self.live, sorted(self.gone))
        if self.layout.rank not in self.live:
            lost = sorted(set(self.layout.ranks_of(self.layout.super_id)) & set(self.gone))
            raise AsrtrainError(f"learner rank {self.layout.rank} leaves the job: " + (
                f"its super-learner lost rank(s) {lost}" if lost and lost != [self.layout.rank]
                else "the others declared it gone"))
        if len(self.live) < self.min_learners:
            raise TooFewLearners(f"only {len(self.live)} learner(s) left ({self.live}), fewer than "
                                 f"--min-learners {self.min_learners}")
        return True

    def _super_alive(self, rank: int, gone: list[int]) -> bool:
        lay = self.layout
        return not any(r in gone for r in lay.ranks_of(rank // lay.group_size))

    def declare_gone(self, rank: int, why: str) -> None:
        """Record ``rank`` as gone (once, whoever notices first); every learner moves to the new view."""
        if not self.elastic:
            raise AsrtrainError(f"learner rank {rank} {why}")
        if announce_gone(self.store, rank, why):
            log.warning("rank %d: learner rank %d is gone (%s)", self.layout.rank, rank, why)
        self.refresh()

    @property
    def is_main(self) -> bool:
        """The lowest rank alive writes checkpoints, metrics and the final model."""
        return self.layout.rank == min(self.live)

    def alive(self, rank: int) -> bool:
        return rank in self.live

    def live_supers(self) -> list[int]:
        """The super-learners alive, in order: the nodes of the gossip ring."""
        g = self.layout.group_size
        return sorted({r // g for r in self.live})

    def counts(self) -> int:
        """Learners alive (what a wait for everyone waits for)."""
        return len(self.live)


def check_alive(members: Membership, heartbeat: Heartbeat) -> None:
    """Check every learner alive: a silent one is declared gone (``--elastic``) or an error naming it."""
    try:
        heartbeat.check(members.live)
    except Silent as silent:
        members.declare_gone(silent.rank, silent.why)


def wait_for_all(store: Any, prefix: str, members: Membership, heartbeat: Heartbeat,
                 meanwhile: Callable[[], None] | None = None, poll_s: float = POLL_S * 5) -> list[int]:
    """Wait until every learner alive has set ``prefix/<rank>``; returns the ranks waited for.

    A learner that leaves meanwhile is no longer waited for. ``meanwhile`` runs at
    every poll (a learner done with its epoch keeps applying gossip rounds its
    partners still start); the heartbeats are checked every half second.
    """
    last_check = time.monotonic()
    while True:
        members.refresh()
        live = list(members.live)
        if store.check([f"{prefix}/{r}" for r in live]):
            return live
        heartbeat.touch()
        if meanwhile is not None:
            meanwhile()
        if time.monotonic() - last_check > CHECK_S:
            check_alive(members, heartbeat)
            last_check = time.monotonic()
        time.sleep(poll_s)

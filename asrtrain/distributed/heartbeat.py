"""Failure detection: a heartbeat per learner, and waits on the store that a dead peer cannot stall.

Every learner bumps ``hb/<rank>`` in the rendezvous store once a second while its
compute thread makes progress. A learner whose counter has not moved for
``timeout_s`` is dead or hung (:class:`Silent`). Every wait of the parallel layer
that is not a collective (agreeing on an epoch's last gossip round, the barrier
between epochs, a gossip partner) polls the store and checks the heartbeats
meanwhile (:func:`asrtrain.distributed.membership.wait_for_all`), so a dead or
stopped learner is named within the timeout instead of stalling the job, or under
``--elastic`` declared gone.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from asrtrain.core.errors import AsrtrainError

POLL_S = 0.002
HEARTBEAT_S = 1.0
WATCH_S = 0.1  # watched keys (an open checkpoint) are read this often
CHECK_S = 0.5  # how often a waiting learner looks at the others' heartbeats
GUARD_S = 0.5  # how often the guard looks at the last store trip that returned
UNREACHABLE_EXIT = 1


class Silent(AsrtrainError):
    """A learner whose heartbeat stopped: dead, hung, or cut off."""

    def __init__(self, rank: int, why: str) -> None:
        self.rank, self.why = rank, why
        super().__init__(f"learner rank {rank} {why}")


def own_client(store: Any) -> Any:
    """A store client for one thread alone (a TCPStore client is not safe across threads)."""
    return store.clone() if hasattr(store, "clone") else store


class Heartbeat:
    """A thread that bumps ``hb/<rank>`` every second, and the watcher of the others'.

    The beat stops when the compute thread has not called :meth:`touch` for half the
    timeout while an epoch runs (``free`` is False): a learner stuck in a step is
    reported as hung, not only a dead process.
    """

    def __init__(self, store: Any, rank: int, world_size: int, timeout_s: float) -> None:
        self.store = own_client(store)
        self.watch_store = own_client(store)
        self.rank, self.world_size, self.timeout_s = rank, world_size, timeout_s
        self._stop = threading.Event()
        self._seen: dict[int, tuple[int, float]] = {}
        self._lock = threading.Lock()
        self.store.add(f"hb/{rank}", 1)
        self.store.set(f"hb/{rank}/t", repr(time.time()))
        self._touched = time.monotonic()
        self.free = True
        self.watched: dict[str, bytes | None] = {}  # keys read at every beat (no store trip on the step path)
        self.reached = time.monotonic()  # the last store trip that returned
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{rank}", daemon=True)
        self._thread.start()
        threading.Thread(target=self._guard, name=f"store-guard-{rank}", daemon=True).start()

    def touch(self) -> None:
        """The compute thread made progress (a step, a poll in a wait)."""
        self._touched = time.monotonic()

    def watch(self, key: str) -> None:
        """Read ``key`` at every beat into :attr:`watched` (``None`` while it does not exist)."""
        self.watched.setdefault(key, None)

    def _beat(self) -> None:
        next_beat = time.monotonic() + HEARTBEAT_S
        while not self._stop.wait(WATCH_S if self.watched else HEARTBEAT_S):
            try:
                for key in list(self.watched):
                    self.watched[key] = self.store.get(key) if self.store.check([key]) else None
                if time.monotonic() < next_beat:
                    self.reached = time.monotonic()
                    continue
                next_beat = time.monotonic() + HEARTBEAT_S
                if not self.free and time.monotonic() - self._touched > self.timeout_s / 2:
                    self.store.check([f"hb/{self.rank}"])  # no beat, but the store is still reached
                else:
                    self.store.add(f"hb/{self.rank}", 1)
                    self.store.set(f"hb/{self.rank}/t", repr(time.time()))
                self.reached = time.monotonic()
            except Exception:  # noqa: BLE001 - the store is gone: the job is ending
                return

    def _guard(self) -> None:
        """End this learner when the store has not answered for the timeout.

        A store call over a link that went down (no reset, no FIN) blocks in TCP for as
        long as the kernel retransmits (about 15 minutes), whatever the store's timeout:
        the compute thread, the beat and every wait would hang with it. Nothing in the
        process can interrupt those calls, so the guard says why and exits; checkpoints
        are written atomically, so none is left half-written.
        """
        while not self._stop.wait(GUARD_S):
            silent = time.monotonic() - self.reached
            if silent > self.timeout_s + HEARTBEAT_S:
                message = (f"Error: learner rank {self.rank}: the job's store (on rank 0's host) has not "
                           f"answered for {silent:.0f} s: this host is cut off, or rank 0's host is down\n")
                os.write(2, message.encode())
                os._exit(UNREACHABLE_EXIT)

    def check(self, ranks: list[int] | None = None) -> None:
        """Raise naming the first rank whose heartbeat stopped more than ``timeout_s`` ago."""
        now = time.monotonic()
        with self._lock:
            for r in range(self.world_size) if ranks is None else ranks:
                if r == self.rank:
                    continue
                try:
                    count = int(self.watch_store.add(f"hb/{r}", 0))
                except Exception as exc:  # noqa: BLE001
                    raise AsrtrainError(f"lost the rendezvous store while watching learner rank {r}: {exc}") from None
                last = self._seen.get(r)
                if last is None or last[0] != count:
                    self._seen[r] = (count, now)
                elif now - last[1] > self.timeout_s:
                    raise Silent(r, f"stopped responding (no heartbeat for {now - last[1]:.0f} s)")

    def stale(self, wait_s: float) -> list[int]:
        """Ranks whose heartbeat does not move within ``wait_s`` (to name a failed peer)."""
        first = {r: int(self.watch_store.add(f"hb/{r}", 0)) for r in range(self.world_size) if r != self.rank}
        time.sleep(wait_s)
        return [r for r, c in first.items() if int(self.watch_store.add(f"hb/{r}", 0)) == c]

    def first_silent(self, wait_s: float) -> list[int]:
        """The learners that went silent first: whose heartbeat stopped earliest, of those stopped now.

        When a collective fails (a learner stopped, every other one waiting for it in
        the collective), all hearts stop in the end: the waiting ones half a timeout
        after they began to wait, the stopped one at once. So the culprit is the one
        whose last beat is the oldest.
        """
        stale = self.stale(wait_s)
        last = {r: float(self.watch_store.get(f"hb/{r}/t")) if self.watch_store.check([f"hb/{r}/t"]) else 0.0
                for r in stale}
        oldest = min(last.values(), default=0.0)
        return sorted(r for r, t in last.items() if t <= oldest + 1.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

"""The handshake of one gossip round between two learners: both exchange, or neither does.

A round is named by the membership version and its number within it, ``(v, k)``,
and a pair meets on one store counter, ``gp/<v>/<k>/<a>-<b>``. Each side adds 1 on
arrival: whoever gets 2 knows the other is there and goes on to the exchange; the
first waits, as long as its partner lives. A side that must give up waiting (its
partner left the job, or the membership changed so that the ring is re-formed) adds
``ABORT``: if it gets ``ABORT + 1`` the partner never came, and the partner will
see the flag when it does; if it gets ``ABORT + 2`` the partner arrived just
before and is already exchanging, so it exchanges too. So an exchange is never
half done, and no learner waits for one that will not come.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

ABORT = 100


def pair_key(version: int, k: int, a: int, b: int) -> str:
    return f"gp/{version}/{k}/{min(a, b)}-{max(a, b)}"


def read_key(version: int, k: int, rank: int) -> str:
    """Set when ``rank`` has read its partner's snapshot in place (the partner may overwrite it now)."""
    return f"gr/{version}/{k}/{rank}"


def meet(store: Any, key: str, give_up: Callable[[], bool], stopping: Callable[[], bool]) -> bool:
    """Arrive at the pair's key; True when both are there, False if the round is called off.

    ``give_up`` is polled while waiting (it checks the partner's heartbeat and the
    membership); ``stopping`` ends the wait with an error (the thread is closing).
    """
    n = int(store.add(key, 1))
    if n >= ABORT:
        store.delete_key(key)  # the partner called it off before we came: nobody else reads it
        return False
    if n == 2:
        return True
    pause = 0.0005  # polled with a growing pause: cheap when the partner is close behind, quiet when slow
    while True:
        time.sleep(pause)
        pause = min(pause * 1.5, 0.02)
        if int(store.add(key, 0)) == 2:
            store.delete_key(key)
            return True
        if stopping():
            raise RuntimeError("the gossip thread is closing")
        if give_up():
            return int(store.add(key, ABORT)) == ABORT + 2


def wait_read(store: Any, key: str, give_up: Callable[[], bool], stopping: Callable[[], bool]) -> bool:
    """Wait for the partner's read key (then delete it); False if the partner is gone meanwhile."""
    pause = 0.0005
    while not store.check([key]):
        time.sleep(pause)
        pause = min(pause * 1.5, 0.02)
        if stopping():
            raise RuntimeError("the gossip thread is closing")
        if give_up():
            return False
    store.delete_key(key)
    return True

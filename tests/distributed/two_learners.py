"""Two learners in one test process: threads, each with its own client of a real TCPStore
(and, where asked, a real gloo group), so the coordination code runs as in a job, in
milliseconds instead of the seconds that spawning learners with torch costs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

TIMEOUT = timedelta(seconds=30)
_GROUPS: list[Any] = []  # registered by gloo_group, unregistered when their job_store ends


@contextmanager
def job_store(world: int = 2) -> Iterator[Callable[[], Any]]:
    """A TCPStore hosted here; yields a function that makes one more client of it."""
    import torch.distributed as dist

    host = dist.TCPStore("127.0.0.1", 0, world, True, TIMEOUT, wait_for_workers=False)

    def client() -> Any:
        return dist.TCPStore("127.0.0.1", host.port, world, False, TIMEOUT)

    try:
        yield client
    finally:
        from torch.distributed.distributed_c10d import _world

        while _GROUPS:
            _world.pg_group_ranks.pop(_GROUPS.pop(), None)


def gloo_group(store: Any, rank: int, size: int, prefix: str = "pg") -> Any:
    """A gloo process group of ``size`` over ``store`` (one per learner thread), its ranks the
    global ones: registered as ``new_group`` would (collectives naming a ``src`` look it up),
    without the process-wide default group that one process cannot hold twice."""
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _world

    group = dist.ProcessGroupGloo(dist.PrefixStore(prefix, store), rank, size, TIMEOUT)
    _world.pg_group_ranks[group] = {r: r for r in range(size)}
    _GROUPS.append(group)
    return group


def run_both(*fns: Callable[[], Any], timeout: float = 30.0) -> list[Any]:
    """Run each function in a thread of its own, together; their results (a failure re-raised)."""
    results: list[Any] = [None] * len(fns)
    errors: list[BaseException | None] = [None] * len(fns)

    def call(i: int) -> None:
        try:
            results[i] = fns[i]()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            errors[i] = exc

    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a learner did not finish: a deadlock"
    for exc in errors:
        if exc is not None:
            raise exc
    return results

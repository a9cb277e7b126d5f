"""Preemption: SIGTERM or SIGUSR1 (and a first Ctrl-C) ask a learner to checkpoint and stop.

A batch system ends a job with SIGTERM (SLURM sends it at the time limit, or
SIGUSR1 ahead of it with ``--signal``). A learner that gets one finishes its step,
takes part in a checkpoint with the others and exits with the requeue status
(:class:`asrtrain.core.errors.Preempted`). The handler only records the signal:
the loop acts on it at the next step boundary. A second Ctrl-C interrupts at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

GRACEFUL = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
_state: dict[str, int | None] = {"signal": None}


def requested() -> int | None:
    """The preemption signal received by this process, if any."""
    return _state["signal"]


def _handler(signum: int, _frame: Any) -> None:
    if signum == signal.SIGINT and _state["signal"] == signal.SIGINT:
        raise KeyboardInterrupt
    _state["signal"] = signum


@contextlib.contextmanager
def caught() -> Iterator[None]:
    """Record preemption signals while the block runs (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state["signal"] = None
    old = {s: signal.signal(s, _handler) for s in GRACEFUL}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)

"""How the gossip thread's device work is ordered against the compute stream: CUDA events, no host sync.

On a GPU the compute thread only *enqueues* work, so "the snapshot is taken" and
"the delta is ready" are events on streams, not moments on the host. The gossip
thread runs its copies, exchanges and subtraction on a stream of its own that first
waits for the compute stream's snapshot event; the compute stream waits for the
gossip stream's done event before it adds the delta. Neither wait blocks the host,
so a step never stalls for communication that is still in flight. Where another
process reads this learner's buffer (a partner on the same GPU host through CUDA
IPC), the gossip thread (never the compute thread) waits on the host for the event.

On the CPU every method is a no-op: the work is done when the call returns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


class DeviceOrder:
    """A side stream for the gossip thread, and the events that order it with the compute stream."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device
        self.stream = torch.cuda.Stream(device) if self.cuda else None

    def mark(self) -> torch.cuda.Event | None:
        """An event after the work enqueued so far on the calling thread's current stream."""
        if not self.cuda:
            return None
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        return event

    @contextlib.contextmanager
    def after(self, event: torch.cuda.Event | None) -> Iterator[None]:
        """Run the block's device work on the side stream, after ``event``."""
        if self.stream is None:
            yield
            return
        with torch.cuda.stream(self.stream):
            if event is not None:
                self.stream.wait_event(event)
            yield

    @staticmethod
    def finished(event: torch.cuda.Event | None) -> bool:
        """Whether the work before ``event`` is done (a query: never blocks)."""
        return event is None or bool(event.query())

    def before_use(self, event: torch.cuda.Event | None) -> None:
        """Make the calling thread's current stream wait for ``event`` (no host wait)."""
        if event is not None:
            torch.cuda.current_stream(self.device).wait_event(event)

    @staticmethod
    def host_wait(event: torch.cuda.Event | None) -> None:
        """Block the calling (gossip) thread until ``event``: before another process reads our buffer."""
        if event is not None:
            event.synchronize()

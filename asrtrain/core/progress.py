"""Progress for long work: a rich bar on a terminal, a log line every N seconds elsewhere.

Batch jobs and CI have no terminal; a bar there would fill log files with
control codes, so they get a plain line at a fixed interval instead.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger("asrtrain.progress")


class Progress:
    """A task counter shown as a rich bar (TTY) or logged every ``interval`` seconds.

    Use as a context manager; call :meth:`advance` as work completes and
    :meth:`update` to change the extra fields shown (loss, lr, ...).
    """

    def __init__(self, description: str, total: float | None = None, interval: float = 30.0,
                 enabled: bool | None = None, unit: str = "") -> None:
        self.description = description
        self.total = total
        self.interval = interval
        self.unit = unit
        self.done = 0.0
        self.fields: dict[str, Any] = {}
        self.tty = sys.stderr.isatty() if enabled is None else enabled
        self._rich: Any = None
        self._task: Any = None
        self._start = time.time()
        self._last_log = self._start

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress
            self._rich = RichProgress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                transient=False)
            self._rich.start()
            self._task = self._rich.add_task(self.description, total=self.total, info="")
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif et is None:
            self._log(final=True)

    def advance(self, amount: float = 1.0, **fields: Any) -> None:
        """Count ``amount`` more units of work done; keyword fields are shown beside the bar."""
        self.done += amount
        self.fields.update(fields)
        if self._rich is not None:
            self._rich.update(self._task, advance=amount, info=self._info())
        elif time.time() - self._last_log >= self.interval:
            self._log()

    def set_done(self, done: float, **fields: Any) -> None:
        """Set the work done so far (when it is read from elsewhere rather than counted here)."""
        self.advance(done - self.done, **fields)

    def set_total(self, total: float) -> None:
        """Change the work expected (work that turned out not to be needed: a run that ended early)."""
        self.total = total
        if self._rich is not None:
            self._rich.update(self._task, total=total)

    def update(self, **fields: Any) -> None:
        """Change the extra fields without counting work."""
        self.fields.update(fields)
        if self._rich is not None:
            self._rich.update(self._task, info=self._info())

    def _info(self) -> str:
        return "  ".join(f"{k} {_fmt(v)}" for k, v in self.fields.items())

    def _log(self, final: bool = False) -> None:
        self._last_log = time.time()
        elapsed = self._last_log - self._start
        total = f"/{self.total:g}" if self.total else ""
        eta = ""
        if self.total and self.done and not final:
            eta = f", {elapsed * (self.total - self.done) / self.done:.0f}s left"
        log.info("%s: %g%s%s in %.0fs%s  %s", self.description, self.done, total, self.unit,
                 elapsed, eta, self._info())


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def track(items: Iterable[T], description: str, total: float | None = None,
          interval: float = 30.0) -> Iterator[T]:
    """Iterate ``items`` with progress shown; ``total`` defaults to ``len(items)``."""
    if total is None and hasattr(items, "__len__"):
        total = float(len(items))  # type: ignore[arg-type]
    with Progress(description, total, interval) as bar:
        for item in items:
            yield item
            bar.advance()

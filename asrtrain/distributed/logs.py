"""Where a learner's log goes: its own file, and for rank 0 the console and the run log.

Workers started by ``--nproc`` are fresh processes: the ``asrtrain`` logger the
CLI configured lives in the parent only, so without this their progress and epoch
lines went nowhere. Under ``torchrun``/``mpiexec`` every rank runs the CLI, so
every rank would print everything. :func:`learner_logging` gives each rank
``EXP/log/train.rank<R>.log`` (everything it logs), shows rank 0's lines on stderr
as the single learner does, appends them to the command's run log, and lets the
other ranks' console say only warnings and errors, prefixed with their rank.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from asrtrain.core.errors import Preempted
from asrtrain.core.journal import open_append

LOGGER = "asrtrain"
CONSOLE_FORMAT = "%(asctime)s %(levelname)s %(message)s"
CONSOLE_DATE = "%H:%M:%S"


@dataclass(frozen=True)
class LogSpec:
    """What a worker needs to set up its logging (crosses to spawned workers: plain values)."""

    log_dir: Path
    main_log: Path | None = None
    level: int = logging.INFO


def rank_log_path(log_dir: Path, rank: int) -> Path:
    """``log_dir/train.rank<R>.log``: the file one learner writes, appended run after run."""
    return Path(log_dir) / f"train.rank{rank}.log"


def parent_spec(log_dir: Path, main_log: Path | None = None) -> LogSpec:
    """The spec for workers of this process: its ``asrtrain`` logger's level, at most INFO."""
    level = logging.getLogger(LOGGER).getEffectiveLevel()
    return LogSpec(Path(log_dir), main_log, min(level, logging.INFO))


def _is_console(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler)


def _has_file(logger: logging.Logger, path: Path) -> bool:
    target = os.path.abspath(path)
    return any(isinstance(h, logging.FileHandler) and os.path.abspath(h.baseFilename) == target
               for h in logger.handlers)


def _file_handler(path: Path, fmt: str, level: int) -> logging.FileHandler:
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter(fmt))
    handler.setLevel(level)
    return handler


@contextlib.contextmanager
def learner_logging(spec: LogSpec | None, rank: int) -> Iterator[Path | None]:
    """Route this learner's ``asrtrain`` log for the duration; yields its rank log's path.

    Handlers added here are removed, and console levels lowered here restored, on exit.
    """
    if spec is None:
        yield None
        return
    from asrtrain.core.runlog import LOG_FORMAT

    logger = logging.getLogger(LOGGER)
    old_level, old_propagate = logger.level, logger.propagate
    added: list[logging.Handler] = []
    lowered: list[tuple[logging.Handler, int, logging.Formatter | None]] = []
    spec.log_dir.mkdir(parents=True, exist_ok=True)
    path = rank_log_path(spec.log_dir, rank)
    with open_append(path) as fh:  # a line a killed run cut off stays, ended: this run's start on its own line
        fh.write(f"# learner rank {rank}, pid {os.getpid()}, started "
                 f"{dt.datetime.now().isoformat(timespec='seconds')}\n")
    own = _file_handler(path, LOG_FORMAT, logging.DEBUG)
    added.append(own)
    consoles = [h for h in logger.handlers if _is_console(h)]
    if rank == 0:
        if spec.main_log is not None and not _has_file(logger, spec.main_log):
            added.append(_file_handler(spec.main_log, LOG_FORMAT, spec.level))
        if not consoles:
            added.append(_console(CONSOLE_FORMAT, spec.level))
    else:
        for h in consoles:
            lowered.append((h, h.level, h.formatter))
            h.setLevel(max(h.level, logging.WARNING))
            h.setFormatter(logging.Formatter(f"%(asctime)s rank {rank} %(levelname)s %(message)s",
                                             CONSOLE_DATE))
        if not consoles:
            added.append(_console(f"%(asctime)s rank {rank} %(levelname)s %(message)s", logging.WARNING))
    for h in added:
        logger.addHandler(h)
    if logger.level == logging.NOTSET or logger.level > spec.level:
        logger.setLevel(spec.level)
    logger.propagate = False
    try:
        yield path
    except Preempted as exc:  # not a failure: no traceback
        own.handle(logger.makeRecord(logger.name, logging.INFO, __file__, 0, "learner rank %d: %s", (rank, exc),
                                     None))
        raise
    except BaseException as exc:  # the traceback goes to the rank's file; the console says one line
        own.handle(logger.makeRecord(logger.name, logging.ERROR, __file__, 0, "learner rank %d stopped: %s",
                                     (rank, exc), sys.exc_info()))
        raise
    finally:
        for h in added:
            logger.removeHandler(h)
            h.close()
        for h, level, formatter in lowered:
            h.setLevel(level)
            h.setFormatter(formatter)
        logger.setLevel(old_level)
        logger.propagate = old_propagate


def _console(fmt: str, level: int) -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt, CONSOLE_DATE))
    handler.setLevel(level)
    return handler

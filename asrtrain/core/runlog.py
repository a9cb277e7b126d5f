"""One log file per command run, in Kaldi's layout: ``OUT/log/<command>.<time>.log``.

The file starts with the command line and the start time and ends with the end
time and the exit status, so a failed stage in a recipe can be read after the
fact. Everything the ``asrtrain`` logger says during the run goes into it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import shlex
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrtrain.core.config import write_config
from asrtrain.core.fingerprint import write_fingerprint
from asrtrain.core.lock import hold

log = logging.getLogger("asrtrain")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@dataclass
class Run:
    """A command run writing into ``out``: where its log is and when it started."""

    name: str
    out: Path
    log_path: Path
    started: float


def _stamp() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def _unique(path: Path) -> Path:
    """``path``, or ``path`` with ``.1``, ``.2``… before the suffix if it exists already."""
    candidate, n = path, 0
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}.{n}{path.suffix}")
    return candidate


@contextlib.contextmanager
def command_run(name: str, out: str | os.PathLike[str], params: dict[str, Any] | None = None,
                extra_fingerprint: dict[str, Any] | None = None,
                config_name: str | None = None, log_dir: str | os.PathLike[str] | None = None,
                fingerprint_name: str = "fingerprint.json",
                lock: str | os.PathLike[str] | None = None) -> Iterator[Run]:
    """Hold the output's lock, open ``out/log/<name>.<time>.log``, write the fingerprint and the config.

    The lock (:mod:`asrtrain.core.lock`) is of ``lock``, by default ``out``: the output
    itself where ``out`` is only where its records go (an archive file in its
    directory, a directory being built under a temporary name). Another run holding it
    stops this one before anything is written. ``params`` (the command's resolved
    options) are written to ``out/<config_name or name + '.config.yaml'>``; commands
    whose output is one file among others in ``out`` name their fingerprint after it
    (``fingerprint_name``) so that several outputs in one directory keep their own. The
    log's last line says ``exit status 0`` or the exception that ended the run.
    """
    with hold(out if lock is None else lock) as held:
        with _logged_run(name, Path(out), params, extra_fingerprint, config_name, log_dir,
                         fingerprint_name) as run:
            note = held.take_note()
            if note:
                log.warning("%s", note)
            yield run


@contextlib.contextmanager
def _logged_run(name: str, out_path: Path, params: dict[str, Any] | None, extra_fingerprint: dict[str, Any] | None,
                config_name: str | None, log_dir: str | os.PathLike[str] | None,
                fingerprint_name: str) -> Iterator[Run]:
    """The run's log, config and fingerprint (:func:`command_run` without the lock)."""
    logdir = Path(log_dir) if log_dir is not None else out_path / "log"
    logdir.mkdir(parents=True, exist_ok=True)
    log_path = _unique(logdir / f"{name.replace(' ', '-')}.{_stamp()}.{os.getpid()}.log")
    handler = logging.FileHandler(log_path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger("asrtrain")
    root.addHandler(handler)
    previous_level = root.level
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    started = time.time()
    with open(log_path, "a", encoding="utf-8") as fh:
        fh.write(f"# {shlex.join(sys.argv)}\n# started {dt.datetime.now().isoformat(timespec='seconds')}"
                 f" on {os.uname().nodename} pid {os.getpid()}\n")
    config_path = out_path / (config_name or f"{name.replace(' ', '-')}.config.yaml")
    # The config and fingerprint describe the output there: a run that fails must not
    # rewrite those of an earlier run's output. Written now only if there are none yet
    # (a long first run shows them while it works), and again once it succeeds.
    if params is not None and not config_path.exists():
        write_config(config_path, params)
    if not (out_path / fingerprint_name).exists():
        write_fingerprint(out_path, extra_fingerprint, name=fingerprint_name)
    status = "exit status 0"
    try:
        yield Run(name=name, out=out_path, log_path=log_path, started=started)
        if params is not None:
            write_config(config_path, params)
        write_fingerprint(out_path, extra_fingerprint, name=fingerprint_name)
    except SystemExit as exc:
        status = f"exit status {exc.code}"
        raise
    except BaseException as exc:
        status = f"exit status {getattr(exc, 'exit_code', 1)} ({type(exc).__name__}: {exc})"
        raise
    finally:
        elapsed = time.time() - started
        root.removeHandler(handler)
        handler.close()
        root.setLevel(previous_level)
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(f"# ended {dt.datetime.now().isoformat(timespec='seconds')} after "
                     f"{elapsed:.1f}s, {status}\n")

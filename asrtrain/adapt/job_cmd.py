"""``--job-cmd`` of ``prepare fmllr`` and ``prepare ivectors``: each job a command, on any host.

As Kaldi's ``queue.pl``: a pass's jobs are written to ``OUT/jobs/<stage>.pkl`` (the job
function, each job's arguments: paths, utterance lists, small models, and the parent's
working directory), job J runs as ``CMD <python> -m asrtrain.cli.main prepare adapt-job
OUT/jobs/<stage>.pkl J`` (``srun --ntasks=1``, a site's wrapper, ``env`` for this host) with
its output in ``OUT/log/<stage>.J.log``, and writes its answer to
``OUT/jobs/<stage>.J.answer.pkl``, complete or not at all. A job reads its features itself:
every host must see DATA and OUT under the same paths (a shared file system, as for
``prepare align --job-cmd``). The jobs are one-shot, so unlike the aligner's there is no
connection to keep: a job that exits non-zero or without an answer ends the others and is
one error line naming it and its log.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import pickle
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from asrtrain.core.errors import AsrtrainError, ConfigError

log = logging.getLogger("asrtrain.adapt")


def run_commands(command: str, what: str, stage: str, target: Callable[..., Any],
                 jobs: Sequence[tuple[Any, ...]], log_dir: Path,
                 done: Callable[[int], None]) -> list[Any]:
    """``target(*job)`` for every job, each started by ``command``; the answers in job
    order. ``done(j)`` is called as job j ends well."""
    from asrtrain.core.atomic import atomic_open

    argv0 = shlex.split(command)
    if not argv0:
        raise ConfigError("--job-cmd is empty")
    spec_dir = log_dir.parent / "jobs"
    spec_dir.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    spec = (spec_dir / f"{stage}.pkl").resolve()
    with atomic_open(spec, "wb") as fh:
        pickle.dump({"target": (target.__module__, target.__name__), "jobs": list(jobs),
                     "cwd": os.getcwd()}, fh, protocol=pickle.HIGHEST_PROTOCOL)
    n = len(jobs)
    answers = [spec_dir / f"{stage}.{j + 1}.answer.pkl" for j in range(n)]
    logs = [(log_dir / f"{stage}.{j + 1}.log").resolve() for j in range(n)]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for j in range(n):
            answers[j].unlink(missing_ok=True)
            argv = [*argv0, sys.executable, "-m", "asrtrain.cli.main", "prepare", "adapt-job",
                    str(spec), str(j + 1)]
            procs.append(_start(argv, logs[j], f"{what}: job {j + 1}"))
        log.info("%s: %d jobs started with %r, logs %s", what, n, command,
                 log_dir / f"{stage}.*.log")
        pending = set(range(n))
        while pending:
            for j in sorted(pending):
                code = procs[j].poll()
                if code is None:
                    continue
                pending.discard(j)
                if code != 0 or not answers[j].is_file():
                    raise AsrtrainError(f"{what}: job {j + 1} of {n} (log {logs[j]}) failed "
                                        f"({_status(code)}){_last_words(logs[j])}")
                done(j)
            time.sleep(0.2)
        results = []
        for path in answers:
            with open(path, "rb") as fh:
                results.append(pickle.load(fh))
        return results
    finally:
        for proc in procs:
            _end(proc)
        for path in [spec, *answers]:
            path.unlink(missing_ok=True)


def _start(argv: list[str], log_path: Path, name: str) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as fh:
        fh.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%S')} {shlex.join(argv)}\n".encode())
        fh.flush()
        try:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise AsrtrainError(f"{name}: cannot start {argv[0]!r} ({exc.strerror or exc}); "
                                f"see {log_path}") from None


def _end(proc: subprocess.Popen[bytes]) -> None:
    """A job still running (another failed, or Ctrl-C): its process group, TERM then KILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def _status(code: int | None) -> str:
    from asrtrain.align.remote import _status as status
    return status(code)


def _last_words(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return f": {lines[-1][:300]}" if len(lines) > 1 else ""


def run_job(spec: Path, job: int) -> None:
    """``prepare adapt-job``: job ``job`` of ``spec``, its answer written complete."""
    import socket

    import torch

    from asrtrain.core.atomic import atomic_open

    with open(spec, "rb") as fh:
        plan = pickle.load(fh)
    if not 1 <= job <= len(plan["jobs"]):
        raise ConfigError(f"job {job} of {len(plan['jobs'])}: no such job in {spec}")
    os.chdir(plan["cwd"])
    module, name = plan["target"]
    target = getattr(importlib.import_module(module), name)
    torch.set_num_threads(1)   # many small products: a second thread only waits (DESIGN.md)
    log.info("adapt-job: job %d of %s on %s pid %d", job, spec, socket.gethostname(), os.getpid())
    result = target(*plan["jobs"][job - 1], report=lambda _n: None)
    with atomic_open(Path(spec).with_name(f"{Path(spec).stem}.{job}.answer.pkl"), "wb") as fh:
        pickle.dump(result, fh, protocol=pickle.HIGHEST_PROTOCOL)
    log.info("adapt-job: job %d done", job)

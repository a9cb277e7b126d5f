"""A learner that hangs, and a job killed as a group: named in time, nothing left behind.

A hung learner (SIGSTOP: alive to the launcher, silent to the others) must be named
with its rank within ``--timeout`` plus a few seconds under every strategy, and
the launcher must not wait on it. A job SIGKILLed as a process group (what a
batch system does) must leave no named semaphores in ``/dev/shm``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_cluster_life import _chunks_job, _env  # noqa: E402
from test_elastic import _kill_when_in_epoch, _log  # noqa: E402

TIMEOUT = 10.0
#: The 2 cores are shared by 4 learners and the test: time for the survivors to notice the
#: silence (heartbeats every 0.1 s), agree and stop; measured 1.2 to 5.2 s over the timeout.
MARGIN = 15.0


def _semaphores_of(pgid: int) -> set[int]:
    """Inodes of the named semaphores mapped by the live processes of group ``pgid``: the
    job's own, whatever else on the machine creates or removes them (``/dev/shm`` is
    machine-wide). Inodes, not names: glibc maps a temporary file, then links it to the name."""
    inodes: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getpgid(int(proc.name)) != pgid:
                continue
            maps = (proc / "maps").read_text()
        except OSError:  # gone meanwhile (ProcessLookupError is an OSError)
            continue
        inodes.update(int(m) for m in re.findall(r" (\d+) +/dev/shm/sem\.", maps))
    return inodes


def _left_in_shm(inodes: set[int]) -> list[str]:
    """The files of ``/dev/shm`` that are one of ``inodes``."""
    shm = Path("/dev/shm")
    return [p.name for p in shm.iterdir() if p.stat().st_ino in inodes] if shm.is_dir() else []


@pytest.mark.slow  # three 4-learner jobs, each stopped after its timeout (~25 s each)
@pytest.mark.parametrize("strategy,options", [("ssgd", ()), ("adpsgd", ()), ("h-adpsgd", ("--group-size", "2"))])
def test_hung_learner_is_named_within_the_timeout(archives, tmp_path, strategy, options):
    train, _ = archives
    logs = tmp_path / "logs"
    logs.mkdir()
    job = subprocess.Popen(_chunks_job(train, tmp_path / "exp", logs, strategy, 4, "--epochs", "50",
                                       "--every", "1000", "--timeout", str(TIMEOUT), *options),
                           env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        stopped_at = _kill_when_in_epoch(logs, 2, epoch=1, steps=4, proc=job, how=signal.SIGSTOP)
        out, _ = job.communicate(timeout=TIMEOUT + 120)
        took = time.time() - stopped_at
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    victim = int(next(parts for parts in _log(logs, 2) if parts[0] == "start")[2])
    assert job.returncode not in (0, None), out[-3000:]
    errors = [ln for ln in out.splitlines() if ln.startswith("Error:")]
    assert errors and "rank 2" in errors[-1], out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    print(f"\n{strategy}: named {took:.1f} s after it stopped: {errors[-1]}")  # the figure for the notes (-s)
    assert took <= TIMEOUT + MARGIN, f"named {took:.1f} s after it stopped ({errors[-1]})"
    with pytest.raises(ProcessLookupError):  # the launcher did not leave the stopped learner behind
        os.kill(victim, 0)


def test_job_killed_as_a_group_leaves_no_semaphores(archives, tmp_path):
    train, _ = archives
    logs = tmp_path / "logs"
    logs.mkdir()
    seen: set[int] = set()
    job = subprocess.Popen(_chunks_job(train, tmp_path / "exp", logs, "adpsgd", 4, "--epochs", "50", "--every", "1000"),
                           env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        end = time.monotonic() + 240
        while not all(len(_log(logs, r)) >= 3 for r in range(4)):
            assert job.poll() is None and time.monotonic() < end, "the job never got going"
            seen |= _semaphores_of(job.pid)
            time.sleep(0.05)
        seen |= _semaphores_of(job.pid)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=60)
    time.sleep(0.5)
    assert _left_in_shm(seen) == []

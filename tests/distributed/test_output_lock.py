"""A distributed job holds one lock on its experiment directory, shared by its learners: taken by the
process that runs the command (``--nproc``'s launcher, rank 0 under torchrun), kept when the main
learner leaves an elastic job; a second ``asrtrain train`` on the directory is refused meanwhile.
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

from cli_run import ASRTRAIN, TINY  # noqa: E402

from asrtrain.core.lock import OutputBusy, OutputLock, holder_of, lock_path  # noqa: E402
from asrtrain.train.metrics import read_metrics  # noqa: E402

BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMI_RANK", "PMI_SIZE")}
    env["OMP_NUM_THREADS"] = "1"
    return env


def _learner_pids(exp: Path, world: int) -> dict[int, int]:
    """Each learner's pid, from the first line its rank log got in this run."""
    pids = {}
    for rank in range(world):
        path = exp / "log" / f"train.rank{rank}.log"
        m = re.search(r"# learner rank \d+, pid (\d+)", path.read_text()) if path.exists() else None
        if m:
            pids[rank] = int(m.group(1))
    return pids


def _wait_for(what, proc: subprocess.Popen, limit: float = 180.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        value = what()
        if value:
            return value
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        time.sleep(0.05)
    raise AssertionError("timed out")


def _start(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _refused(archives, exp: Path) -> str:
    """A second ``asrtrain train`` on ``exp``: its one error line (asserts it failed)."""
    proc = subprocess.run([str(ASRTRAIN), "train", str(archives[0]), str(exp), *TINY, "--epochs", "1"], env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _only_lock(root: Path) -> Path:
    locks = list(root.rglob(".*.lock"))
    assert len(locks) == 1, locks
    return locks[0]


@pytest.mark.slow  # a 2-learner job and a second asrtrain process (~20 s)
def test_nproc_job_holds_one_lock_taken_by_the_launcher(archives, tmp_path):
    exp = tmp_path / "exp"
    job = _start([str(ASRTRAIN), "train", str(archives[0]), str(exp), *TINY, "--epochs", "1000",
                  "--strategy", "adpsgd", "--nproc", "2"])
    try:
        learners = _wait_for(lambda: len(_learner_pids(exp, 2)) == 2 and _learner_pids(exp, 2), job)
        assert _only_lock(tmp_path) == lock_path(exp)
        holder = holder_of(exp)
        assert holder is not None and holder.pid == job.pid and holder.pid not in learners.values()
        error = _refused(archives, exp)
        assert f"Error: {exp}: in use by another run (host {holder.host}, pid {job.pid}, since {holder.started}: " \
               f"asrtrain train {archives[0]} {exp}" in error
    finally:
        _stop(job)


@pytest.mark.slow  # torchrun with 2 workers (~20 s)
def test_torchrun_job_holds_one_lock_taken_by_rank_0(archives, tmp_path):
    exp = tmp_path / "exp"
    job = _start([str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "2", str(ASRTRAIN), "train",
                  str(archives[0]), str(exp), *TINY, "--epochs", "1000", "--strategy", "adpsgd"])
    try:
        learners = _wait_for(lambda: len(_learner_pids(exp, 2)) == 2 and _learner_pids(exp, 2), job)
        assert _only_lock(tmp_path) == lock_path(exp)
        holder = holder_of(exp)
        assert holder is not None and holder.pid == learners[0]  # rank 0 ran the command's run
        with pytest.raises(OutputBusy, match=f"pid {learners[0]}"):
            OutputLock(exp).acquire()
    finally:
        _stop(job)


@pytest.mark.slow  # a 2-learner elastic job whose rank 0 is killed (~30 s)
def test_elastic_job_keeps_its_lock_and_metrics_when_the_main_learner_leaves(long_archives, tmp_path):
    train, valid = long_archives
    exp = tmp_path / "exp"
    job = _start([str(ASRTRAIN), "train", str(train), str(exp), *TINY, "--epochs", "4", "--valid", str(valid),
                  "--strategy", "adpsgd", "--nproc", "2", "--elastic", "--timeout", "20", "--log-every", "1"])
    try:
        learners = _wait_for(lambda: len(_learner_pids(exp, 2)) == 2 and _learner_pids(exp, 2), job)
        metrics = exp / "metrics.jsonl"

        def well_into_epoch_2() -> bool:
            rows = read_metrics(metrics) if metrics.exists() else []
            ends = [r["step"] for r in rows if r["kind"] == "epoch"]
            return bool(ends) and any(r["kind"] == "step" and r["step"] >= ends[0] + 20 for r in rows)

        _wait_for(well_into_epoch_2, job)
        os.kill(learners[0], signal.SIGKILL)  # the main learner, mid-epoch: it wrote metrics.jsonl so far
        with pytest.raises(OutputBusy, match=f"pid {job.pid}"):  # the launcher still holds the lock
            OutputLock(exp).acquire()
        out, _ = job.communicate(timeout=600)
    finally:
        _stop(job)
    assert job.returncode == 0, out[-3000:]
    rows = read_metrics(exp / "metrics.jsonl")
    epochs = [r["epoch"] for r in rows if r["kind"] == "epoch"]
    assert epochs == [1, 2, 3, 4], epochs  # epoch 1's row (the old main's) kept by the new main
    assert [r["rank"] for r in rows if r["kind"] == "event" and r.get("event") == "learner left"] == [0]
    assert not lock_path(exp).exists()  # released by the launcher at the end

"""``asrtrain train`` under torchrun and mpiexec (the --nproc launcher: test_mechanism.py).

The fast tests run the command as a user does under each launcher: two learners, one
short epoch. The slow ones go deeper: ``jobs.py`` runs the real Trainer for every
strategy in one launch of 4 fresh workers (~25 s on 2 busy cores each).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
JOB = HERE / "jobs.py"

sys.path.insert(0, str(HERE))

from cli_run import TINY, epoch_rows  # noqa: E402
from needs import missing  # noqa: E402

from asrtrain.data.archive import Archive  # noqa: E402


def check_result(out: Path, launcher: str, blocks: int) -> None:
    result = json.loads(out.read_text())
    assert result["launcher"] == launcher and result["world"] == 4
    sizes = {"ssgd": 4, "adpsgd": 1, "h-adpsgd": 2}
    for name, size in sizes.items():
        recs = result[name]
        assert [r["group_size"] for r in recs] == [size] * 4
        # work sharing over the job: every block of the epoch trained once
        assert sum(r["epochs"][0]["blocks"] for r in recs) == blocks, name
        # global average (or one super-learner): every learner ends with the same weights
        assert all(r["final"] == recs[0]["final"] for r in recs), name


def _blocks(train: Path) -> int:
    """Blocks of 8 chunks in the archive (jobs.tiny_config's block size)."""
    return math.ceil(Archive(train).num_chunks / 8)


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMI_RANK", "PMI_SIZE"):
        env.pop(key, None)
    return env


def _mpiexec() -> str:
    """The mpiexec of the venv (the mpich wheel) or of the system; missing: a skip, a failure under CI."""
    mpiexec = BIN / "mpiexec"
    found = str(mpiexec) if mpiexec.exists() else shutil.which("mpiexec")
    if found is None:
        missing("no mpiexec (pip install mpich; the mpi extra of make install installs it)")
    return found


def _train_two_learners(launch: list[str], archives, exp: Path) -> list[int]:
    """``LAUNCH asrtrain train`` on two learners (ADPSGD, one epoch); checks what must hold under any
    launcher: the epoch shared (every frame once), rank 0 writing the run's files. Returns the
    ranks whose logs show epoch 1 (the caller asserts both: one job of both ranks)."""
    train, valid = archives
    proc = _run([*launch, str(BIN / "asrtrain"), "train", str(train), str(exp), "--valid", str(valid), *TINY,
                 "--strategy", "adpsgd", "--epochs", "1"], _env())
    rows = epoch_rows(exp)
    assert [r["epoch"] for r in rows] == [1], rows
    assert rows[0]["train_frames"] == sum(u[3] for u in Archive(train).utterances)
    assert (exp / "final.pt").is_file() and "final model: " in proc.stdout
    assert len([p for p in (exp / "log").glob("train.*.log") if ".rank" not in p.name]) == 1
    ranks = sorted(int(p.name.removeprefix("train.rank").removesuffix(".log"))
                   for p in (exp / "log").glob("train.rank*.log"))
    return [r for r in ranks if f"rank {r} epoch 1: " in (exp / "log" / f"train.rank{r}.log").read_text()]


def test_torchrun_runs_two_learners_of_the_command_line(archives, tmp_path):
    torchrun = BIN / "torchrun"
    if not torchrun.exists():
        missing("no torchrun beside the venv's python (it comes with torch)")
    ranks = _train_two_learners([str(torchrun), "--standalone", "--nproc-per-node", "2"], archives,
                                tmp_path / "exp")
    assert ranks == [0, 1]


@pytest.mark.mpi
def test_mpiexec_runs_two_learners_of_the_command_line(archives, tmp_path):
    assert _train_two_learners([_mpiexec(), "-n", "2"], archives, tmp_path / "exp") == [0, 1]


@pytest.mark.slow
def test_torchrun(archives, tmp_path):
    out = tmp_path / "result.json"
    _run([str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "4", str(JOB), str(out),
          str(archives[0]), str(tmp_path / "exp")], _env())
    check_result(out, "torchrun", _blocks(archives[0]))


@pytest.mark.slow
def test_torchrun_runs_the_command_line(archives, tmp_path):
    """``torchrun … asrtrain train``: every rank runs the CLI; rank 0 writes the run's files."""
    exp = tmp_path / "exp"
    proc = _run([str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "4", str(BIN / "asrtrain"),
                 "train", str(archives[0]), str(exp), "--valid", str(archives[1]), *TINY,
                 "--strategy", "h-adpsgd", "--group-size", "2", "--epochs", "2"], _env())
    rows = epoch_rows(exp)
    assert [r["epoch"] for r in rows] == [1, 2] and rows[1]["valid_loss"] < rows[0]["valid_loss"]
    assert (exp / "final.pt").is_file() and "final model: " in proc.stdout
    assert len([p for p in (exp / "log").glob("train.*.log") if ".rank" not in p.name]) == 1
    assert sorted(p.name for p in (exp / "log").glob("train.rank*.log")) == [f"train.rank{r}.log" for r in range(4)]


@pytest.mark.slow
@pytest.mark.mpi
def test_mpiexec(archives, tmp_path):
    out = tmp_path / "result.json"
    _run([_mpiexec(), "-n", "4", sys.executable, str(JOB), str(out), str(archives[0]), str(tmp_path / "exp")], _env())
    check_result(out, "mpich", _blocks(archives[0]))

"""Each strategy under torchrun and mpiexec (the --nproc launcher: test_mechanism.py).

Marked slow: each starts 4 fresh workers (~25 s on 2 busy cores).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
JOB = HERE / "tiny_job.py"


def check_result(out: Path, launcher: str) -> None:
    result = json.loads(out.read_text())
    assert result["launcher"] == launcher and result["world"] == 4
    sizes = {"ssgd": 4, "adpsgd": 1, "h-adpsgd": 2}
    for name, size in sizes.items():
        recs = result[name]
        assert [r["group_size"] for r in recs] == [size] * 4
        assert sum(r["steps"] for r in recs) > 0
        # global average (or one super-learner): every learner ends with the same weights
        assert all(r["final"] == recs[0]["final"] for r in recs), name


def _run(cmd: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMI_RANK", "PMI_SIZE"):
        env.pop(key, None)
    return env


@pytest.mark.slow
def test_torchrun(tmp_path):
    out = tmp_path / "result.json"
    _run([str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "4", str(JOB), str(out)], _env())
    check_result(out, "torchrun")


@pytest.mark.slow
@pytest.mark.mpi
def test_mpiexec(tmp_path):
    mpiexec = BIN / "mpiexec"
    if not mpiexec.exists() and shutil.which("mpiexec") is None:
        pytest.skip("no mpiexec (pip install mpich)")
    out = tmp_path / "result.json"
    exe = str(mpiexec) if mpiexec.exists() else shutil.which("mpiexec")
    _run([exe, "-n", "4", sys.executable, str(JOB), str(out)], _env())
    check_result(out, "mpich")

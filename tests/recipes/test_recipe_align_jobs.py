"""recipes/custom with ``cmd_backend=slurm``: its alignment stage starts every job of
``prepare align`` through ``srun`` (``cmd.sh``'s ``align_cmd``), here a shim on PATH
that records its options and runs the job on this host, as SLURM would on a node.
With the default backend no job command is given (the jobs stay processes of
``prepare align``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_custom_recipe import copy_recipe, needs_yesno, yesno_dirs

SRUN = """#!/usr/bin/env bash
# srun shim: record the options, drop them, run the command here
printf '%s\\n' "$*" >> "$SRUN_CALLS"
while [[ "$1" == -* ]]; do shift; done
exec "$@"
"""


def _run(recipe: Path, data: Path, env: dict[str, str], *stages: str) -> None:
    proc = subprocess.run(["bash", str(recipe / "run.sh"), "--config", "conf/yesno.conf",
                           "--train", str(data / "train"), "--test", str(data / "test"),
                           "--dict", str(data / "dict"), "--lm-text", str(data / "lm_text"),
                           "--ali-nj", "2", *stages],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _align_only(recipe: Path, data: Path, env: dict[str, str]) -> None:
    """Stages 0 (dev held out) and 1 (the features stage 2 reads, and data/sizes.sh with the
    sizes left at auto, which stage 2 checks), then stage 2."""
    _run(recipe, data, env, "--stage", "0", "--stop-stage", "1")
    _run(recipe, data, env, "--stage", "2", "--stop-stage", "2", "--mono-iters", "4",
         "--ali-iters", "3")


@pytest.mark.slow  # 14 s; make test keeps the job-command backend (test_align_parallel)
@needs_yesno
def test_slurm_backend_starts_the_alignment_jobs_with_srun(tmp_path: Path) -> None:
    recipe = copy_recipe(tmp_path)
    data = yesno_dirs(tmp_path)
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "srun").write_text(SRUN)
    (shims / "srun").chmod(0o755)
    calls = tmp_path / "srun_calls"
    env = dict(os.environ, OMP_NUM_THREADS="1", cmd_backend="slurm", SRUN_CALLS=str(calls),
               slurm_align_opts="--partition=cpu --mem=4G",
               PATH=f"{shims}:{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    _align_only(recipe, data, env)
    started = calls.read_text().splitlines()
    assert len(started) == 2, started   # the two jobs, started once for every split
    for line in started:
        assert line.startswith("--ntasks=1 --nodes=1 --cpus-per-task=1 --partition=cpu --mem=4G ")
        assert "prepare align-worker --connect " in line
    ali = recipe / "exp" / "ali"
    assert (ali / "train" / "ali.scp").is_file() and (ali / "dev" / "ali.scp").is_file()
    for j in (1, 2):
        assert "align-worker: job" in (ali / "log" / f"align-worker.{j}.log").read_text()
    config = (ali / "prepare-align.config.yaml").read_text()
    assert "job_cmd: srun --ntasks=1" in config and "nj: 2" in config

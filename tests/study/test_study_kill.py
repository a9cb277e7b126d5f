"""SIGKILL ``asrtrain study batch`` in the middle of a run, run the same command again: the finished runs'
records are kept, the killed run resumes from its last checkpoint, and the study ends with the records an
unkilled study writes (every held-out loss, bit for bit)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TIMING = {"time", "seconds", "frames_per_s"}


def _cmd(archives: tuple[Path, Path], out: Path) -> list[str]:
    return [sys.executable, "-m", "asrtrain.cli.main", "study", "batch", str(archives[0]), str(archives[1]), str(out),
            "--learners", "4", "--batches", "8,32", "--rate-multipliers", "1", "--base-batch", "8", "--lr", "0.2",
            "--warmup-epochs", "1", "--epochs", "3", "--hidden", "8", "--layers", "1", "--proj", "0",
            "--threads", "1", "--min-steps", "3", "--spread-every", "1", "--save-every", "0.0005"]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def _runs(out: Path) -> dict[str, list[dict]]:
    record = json.loads((out / "batch.json").read_text())
    return {r["name"]: [{k: v for k, v in h.items() if k not in TIMING} for h in r["history"]]
            for r in record["runs"]}


def _metrics(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(x).items() if k not in TIMING} for x in path.read_text().splitlines()]


def test_sigkill_mid_run_then_the_same_command_finishes_the_same_study(study_archives, tmp_path):
    ref = tmp_path / "ref"
    done = subprocess.run(_cmd(study_archives, ref), env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]

    out = tmp_path / "killed"
    victim = out / "runs" / "adpsgd-8-x1"  # the third run: ssgd-8-x1 and ssgd-32-x1 come first
    proc = subprocess.Popen(_cmd(study_archives, out), env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline:
        ckpts = victim / "checkpoints"
        if ckpts.is_dir() and any(p.name.startswith("epoch-2.step-") for p in ckpts.iterdir()):
            break
        assert proc.poll() is None, "the study ended before the kill"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    kept = {p.parent.name for p in (out / "runs").glob("*/record.json")}
    assert kept == {"ssgd-8-x1", "ssgd-32-x1"} and not (victim / "record.json").exists()
    before = (out / "runs" / "ssgd-8-x1" / "record.json").read_text()

    again = subprocess.run(_cmd(study_archives, out), env=_env(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "2 finished before, 2 to run" in again.stderr
    assert "resuming from" in again.stderr and "adpsgd-8-x1/checkpoints/epoch-" in again.stderr
    assert (out / "runs" / "ssgd-8-x1" / "record.json").read_text() == before  # not run again
    assert _runs(out) == _runs(ref)
    for name in ("adpsgd-8-x1", "adpsgd-32-x1"):
        assert _metrics(out / "runs" / name / "metrics.jsonl") == _metrics(ref / "runs" / name / "metrics.jsonl")
    assert json.loads((victim / "elapsed.json").read_text())["seconds"] > 0

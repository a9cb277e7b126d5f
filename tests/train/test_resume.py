"""Kill `asrtrain train` with SIGKILL while it writes a checkpoint, resume, compare.

The run is a real subprocess. A test-only environment variable makes the
checkpoint writer sleep after writing model.pt of epoch 2, so the kill lands
with that checkpoint half written. Resuming must start after epoch 1 (the last
complete checkpoint), remove the half-written one, and end with weights equal,
bit for bit, to those of an uninterrupted run with the same seed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from asrtrain.model.io import load_final
from asrtrain.train.checkpoint import SLEEP_ENV, list_checkpoints


def _train_cmd(archives: tuple[Path, Path], exp: Path) -> list[str]:
    return [sys.executable, "-m", "asrtrain.cli.main", "train", str(archives[0]), str(exp),
            "--valid", str(archives[1]), "--epochs", "3", "--batch", "16", "--base-batch", "16",
            "--lr", "0.3", "--warmup-epochs", "2", "--hidden", "16", "--layers", "2",
            "--proj", "8", "--seed", "7", "--log-every", "3", "--threads", "1"]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", **extra}


def test_sigkill_mid_checkpoint_then_resume_equals_uninterrupted(
        learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    done = subprocess.run(_train_cmd(learnable_archives, ref), env=_env(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    proc = subprocess.Popen(_train_cmd(learnable_archives, killed), env=_env(**{SLEEP_ENV: "2:60"}),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ckpts = killed / "checkpoints"
    deadline = time.time() + 90
    half = None
    while time.time() < deadline and half is None:
        time.sleep(0.05)
        if ckpts.is_dir():
            half = next((p for p in ckpts.iterdir() if p.name.startswith(".epoch-2")
                         and (p / "model.pt").is_file()), None)
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
    assert half is not None, "the epoch-2 checkpoint never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stderr.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL
    assert [e for e, _ in list_checkpoints(killed)] == [1]
    assert half.exists() and not (half / "optimizer.pt").exists()
    assert not (killed / "final.pt").exists()

    resumed = subprocess.run(_train_cmd(learnable_archives, killed), env=_env(),
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming from" in resumed.stderr and "epoch-1" in resumed.stderr
    assert sorted(p.name for p in ckpts.iterdir()) == ["epoch-1", "epoch-2", "epoch-3"]

    a = load_final(ref / "final.pt").model.state_dict()
    b = load_final(killed / "final.pt").model.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)

    def figures(exp: Path) -> list[tuple]:
        rows = [json.loads(x) for x in (exp / "metrics.jsonl").read_text().splitlines()]
        return [(r["kind"], r["epoch"], r["step"], r.get("loss"), r.get("valid_loss")) for r in rows]

    assert figures(ref) == figures(killed)

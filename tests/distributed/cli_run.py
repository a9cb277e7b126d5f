"""Run ``asrtrain train`` with a tiny BLSTM as a subprocess (the way a user does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ASRTRAIN = Path(sys.executable).parent / "asrtrain"
TINY = ["--hidden", "8", "--layers", "1", "--proj", "0", "--batch", "8", "--block-chunks", "8",
        "--lr", "0.5", "--warmup-epochs", "0", "--log-every", "1000"]


def run_train(train: Path, valid: Path, exp: Path, *args: str) -> subprocess.CompletedProcess:
    """Train (outside any launcher's environment); asserts it succeeded."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "PMI_RANK")}
    env["OMP_NUM_THREADS"] = "1"
    proc = subprocess.run([str(ASRTRAIN), "train", str(train), str(exp), "--valid", str(valid), *TINY, *args],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def epoch_rows(exp: Path) -> list[dict]:
    """The per-epoch rows of ``metrics.jsonl``."""
    rows = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["kind"] == "epoch"]

"""Two gloo ADPSGD learners at an epoch's end: a slow main learner that wants a mid-epoch
checkpoint after every step, while the other has finished its share of the epoch.

The first request that the finished learner calls off must be the last of that epoch
(before, the main learner asked again at its next step, and the next, each called off:
15 "called off" lines in 5 s were seen), and each learner's wait at the epoch's end goes
into the epoch's row, beside its gossip rounds and their time.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

JOB = Path(__file__).resolve().parent / "jobs.py"


def test_a_called_off_checkpoint_is_not_asked_again_and_the_wait_is_measured(
        archives: tuple[Path, Path], tmp_path: Path) -> None:
    train, logs, exp = archives[0], tmp_path / "logs", tmp_path / "exp"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE")}
    cmd = [sys.executable, str(JOB), "chunks", str(train), str(exp), str(logs), "adpsgd", "2",
           "--epochs", "2", "--every", "1", "--main-sleep", "0.05"]
    proc = subprocess.run(cmd, env={**env, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stderr + "".join(p.read_text() for p in exp.rglob("*.log"))
    called_off = Counter(re.findall(r"rank (\d+): checkpoint (\d+) called off", text))
    # one meeting called off at most per epoch (both learners may log it once)
    assert len({ident for _, ident in called_off}) <= 2, called_off
    rows = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    epochs = [r for r in rows if r.get("kind") == "epoch"]
    assert len(epochs) == 2
    for row in epochs:
        idle = row["idle_s_by_learner"]
        assert len(idle) == 2 and all(v >= 0 for v in idle)
        rounds = row["gossip_rounds_total_by_learner"]
        assert len(rounds) == 2 and all(r > 0 for r in rounds)

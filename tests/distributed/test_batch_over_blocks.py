"""Two gloo learners: a step holds each learner's share of ``--batch``, whatever the block size.

``jobs.py chunks`` runs ``asrtrain train``'s own call with blocks of 8 chunks and logs
every trained chunk by step. Shares below (4), at (8) and above (12) a block under
SSGD (lockstep members, which hold a short batch back for their next block), and
above a block under ADPSGD (work sharing, batches over the blocks each claims): every
step of a learner but its last holds its share, and every chunk is trained once, with a
mid-epoch checkpoint (a pause that restarts the batches) every 3 steps.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs import chunk_hash  # noqa: E402

from asrtrain.data.archive import Archive  # noqa: E402

JOB = Path(__file__).resolve().parent / "jobs.py"


def _steps_by_rank(logs: Path) -> dict[str, list[int]]:
    """Chunks of every step, per learner, from the ChunkLog files (one run, one epoch)."""
    out = {}
    for path in sorted(logs.glob("rank*.log")):
        per_step = Counter(int(line.split()[1]) for line in path.read_text().splitlines()
                           if line and not line.startswith("start"))
        out[path.stem] = [per_step[s] for s in sorted(per_step)]
    return out


@pytest.mark.parametrize(("strategy", "batch"), [("ssgd", 8), pytest.param("ssgd", 16, marks=pytest.mark.slow),
                                                   pytest.param("ssgd", 24, marks=pytest.mark.slow), ("adpsgd", 24)])
def test_each_step_holds_the_learners_share(archives: tuple[Path, Path], tmp_path: Path, strategy: str,
                                             batch: int) -> None:
    train, logs = archives[0], tmp_path / "logs"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE")}
    cmd = [sys.executable, str(JOB), "chunks", str(train), str(tmp_path / "exp"), str(logs), strategy, "2",
           "--batch", str(batch), "--epochs", "1", "--every", "3"]
    proc = subprocess.run(cmd, env={**env, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    share = batch // 2
    sizes = _steps_by_rank(logs)
    assert len(sizes) == 2
    for rank, steps in sizes.items():
        assert steps and all(n == share for n in steps[:-1]) and 0 < steps[-1] <= share, (rank, steps)
    feats, _ = Archive(train).read_chunks(0, Archive(train).num_chunks)
    every = Counter(chunk_hash(torch.from_numpy(np.asarray(f))) for f in feats)
    trained = Counter(line.split()[2] for path in logs.glob("rank*.log") for line in path.read_text().splitlines()
                      if line and not line.startswith("start"))
    assert trained == every

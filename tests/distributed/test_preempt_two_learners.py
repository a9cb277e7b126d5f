"""Preemption, the cheapest whole case: two learners of a tiny model, as `asrtrain train` runs them.

SIGTERM means: finish the step, checkpoint, exit 75 (what batch scripts requeue on); the
same command then resumes from that mid-epoch checkpoint, here on one learner instead of
two, and trains every frame of each epoch once. (test_cluster_life.py goes deeper, behind
``slow``: bit-for-bit equality with an uninterrupted run, four learners, other counts.)

In `make test` since learners are forked from a server that imported torch once
(distributed/local.py): 22 s on cores shared with two trainings, where spawned learners
took 52 s.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_run import epoch_rows  # noqa: E402
from test_cluster_life import REQUEUE, _mid_epoch, _train_cli, _wait_for_new_mid_epoch  # noqa: E402

from asrtrain.data.archive import Archive  # noqa: E402


def test_sigterm_exits_75_then_one_learner_resumes_two_and_trains_every_frame_once(archives, tmp_path):
    train, valid = archives
    exp = tmp_path / "exp"
    job = _train_cli(train, valid, exp, "--strategy", "ssgd", "--nproc", "2", epochs=1)
    assert _wait_for_new_mid_epoch(exp, job, set()), "no mid-epoch checkpoint"
    os.kill(job.pid, signal.SIGTERM)  # the launcher passes it on to both learners
    out, _ = job.communicate(timeout=120)
    assert job.returncode == REQUEUE, out[-3000:]
    assert "run the same command again to go on" in out
    last = _mid_epoch(exp)[-1]
    again = _train_cli(train, valid, exp, "--strategy", "single", epochs=1)
    out, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out[-3000:]
    assert f"resuming from {exp}/checkpoints/{last}" in out
    frames = sum(u[3] for u in Archive(train).utterances)
    assert [r["train_frames"] for r in epoch_rows(exp)] == [frames]

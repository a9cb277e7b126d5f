"""A learner that dies or hangs stops the job with an error naming its rank, within a minute."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tiny_job import JobSpec, job  # noqa: E402

from asrtrain.core.errors import AsrtrainError  # noqa: E402
from asrtrain.distributed.config import DistConfig  # noqa: E402
from asrtrain.distributed.entry import run_job  # noqa: E402


def test_killed_learner_is_named():
    t0 = time.monotonic()
    with pytest.raises(AsrtrainError, match=r"rank 2\b"):
        run_job(job, DistConfig("adpsgd", nproc=4, timeout_s=10.0),
                JobSpec(num_blocks=40, step_sleep_s=0.02, die_rank=2, die_step=2))
    assert time.monotonic() - t0 < 60


@pytest.mark.slow
def test_hung_learner_is_named_by_the_others():
    # Rank 2 sleeps inside a step: its process lives but its heartbeat stops after
    # timeout/2; the learners waiting for it (gossip partner, epoch end) name it.
    t0 = time.monotonic()
    with pytest.raises(AsrtrainError, match=r"learner rank 2 stopped responding"):
        run_job(job, DistConfig("adpsgd", nproc=4, timeout_s=4.0),
                # enough blocks that rank 2 gets one even if it starts late on busy cores
                JobSpec(num_blocks=40, step_sleep_s=0.01, die_rank=2, die_step=1, hang=True))
    assert time.monotonic() - t0 < 60

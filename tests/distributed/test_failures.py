"""A learner that dies or hangs stops the job with an error naming its rank, within a minute.

The job is ``asrtrain.train.run.run``, the call behind ``asrtrain train``; a
:class:`~jobs.Recorder` hook kills or stops one learner at a chosen step.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs import Recorder, tiny_config  # noqa: E402

from asrtrain.core.errors import AsrtrainError  # noqa: E402
from asrtrain.distributed.config import DistConfig  # noqa: E402
from asrtrain.train.run import run  # noqa: E402


def test_killed_learner_is_named(archives, tmp_path):
    t0 = time.monotonic()
    with pytest.raises(AsrtrainError, match=r"rank 2\b"):
        run(tiny_config(archives[0], tmp_path / "exp"), DistConfig("adpsgd", nproc=4, timeout_s=10.0),
            hooks=Recorder(step_sleep_s=0.02, die_rank=2, die_step=2))
    assert time.monotonic() - t0 < 60


@pytest.mark.slow
def test_hung_learner_is_named_by_the_others(archives, tmp_path):
    # Rank 2 sleeps inside a step: its process lives but its heartbeat stops after
    # timeout/2; the learners waiting for it (gossip partner, epoch end) name it.
    t0 = time.monotonic()
    with pytest.raises(AsrtrainError, match=r"learner rank 2 stopped responding"):
        run(tiny_config(archives[0], tmp_path / "exp", batch=4, block_chunks=4),
            DistConfig("adpsgd", nproc=4, timeout_s=4.0),
            hooks=Recorder(step_sleep_s=0.01, die_rank=2, die_step=1, hang=True))
    assert time.monotonic() - t0 < 60

"""A learner that dies or hangs stops the job with an error naming its rank, within its timeout.

The job is ``asrtrain.train.run.run``, the call behind ``asrtrain train``; a
:class:`~jobs.Recorder` hook kills or stops one learner at a chosen step and notes when.
The time is counted from that moment, not from the start: starting four learners on two
shared cores takes what it takes, the promise is about noticing the loss.
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

#: Time for the others to notice, agree and stop on 2 shared cores, beyond the timeout.
MARGIN = 15.0


def _since(mark: Path) -> float:
    """Seconds since the dying learner wrote ``mark``."""
    assert mark.is_file(), "the learner never reached the step it was to die at"
    return time.time() - float(mark.read_text())


def test_killed_learner_is_named(archives, tmp_path):
    mark = tmp_path / "died"
    with pytest.raises(AsrtrainError, match=r"rank 2\b"):
        run(tiny_config(archives[0], tmp_path / "exp"), DistConfig("adpsgd", nproc=4, timeout_s=10.0),
            hooks=Recorder(step_sleep_s=0.02, die_rank=2, die_step=2, death_mark=str(mark)))
    assert _since(mark) < 10.0 + MARGIN


def test_hung_learner_is_named_by_the_others(archives, tmp_path):
    # Rank 2 sleeps inside a step: its process lives but its heartbeat stops after
    # timeout/2; the learners waiting for it (gossip partner, epoch end) name it.
    mark = tmp_path / "hung"
    with pytest.raises(AsrtrainError, match=r"learner rank 2 stopped responding"):
        run(tiny_config(archives[0], tmp_path / "exp", batch=4, block_chunks=4),
            DistConfig("adpsgd", nproc=4, timeout_s=4.0),
            hooks=Recorder(step_sleep_s=0.01, die_rank=2, die_step=1, hang=True, death_mark=str(mark)))
    assert _since(mark) < 4.0 + MARGIN

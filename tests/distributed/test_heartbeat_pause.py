"""Heartbeats (a dead or hung learner named, a busy one never) and the checkpoint meeting
(pause), run directly by two learners in threads on a real TCPStore.

The beat runs every 0.1 s here (1 s in a job) and the timeout is 1 s, so each case takes
about a second. The store guard, which ends a learner's process when the store stops
answering, is left out: on two shared cores a starved thread would end the test process.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from two_learners import job_store, run_both  # noqa: E402

from asrtrain.distributed import heartbeat as hb_module  # noqa: E402
from asrtrain.distributed.groups import Layout  # noqa: E402
from asrtrain.distributed.heartbeat import Heartbeat, Silent  # noqa: E402
from asrtrain.distributed.membership import Membership  # noqa: E402
from asrtrain.distributed.pause import PauseAgreement  # noqa: E402

TIMEOUT_S = 1.0


@pytest.fixture()
def learners(monkeypatch: pytest.MonkeyPatch):
    """Two learners' (store client, heartbeat, membership); heartbeats closed at the end."""
    monkeypatch.setattr(hb_module, "HEARTBEAT_S", 0.1)
    monkeypatch.setattr(Heartbeat, "_guard", lambda self: None)
    with job_store() as client:
        made = []
        for rank in range(2):
            store = client()
            made.append((store, Heartbeat(store, rank, 2, TIMEOUT_S),
                         Membership(store, Layout(rank, 2, 1), False, None)))
        try:
            yield made
        finally:
            for _, beat, _ in made:
                beat.close()


def until(condition: Callable[[], bool], limit_s: float = 20.0) -> float:
    """Poll ``condition``; the seconds it took (failing after ``limit_s``)."""
    t0 = time.monotonic()
    while not condition():
        assert time.monotonic() - t0 < limit_s, "never happened"
        time.sleep(0.02)
    return time.monotonic() - t0


def silent_rank(beat: Heartbeat) -> int | None:
    try:
        beat.check()
    except Silent as silent:
        return silent.rank
    return None


def test_a_dead_learner_is_named_after_the_timeout_not_before(learners) -> None:
    (_, beat0, _), (_, beat1, _) = learners
    assert silent_rank(beat0) is None
    beat1.close()  # its process died: no more beats
    took = until(lambda: silent_rank(beat0) == 1)
    assert took >= TIMEOUT_S * 0.9  # a late beat is not a death


def test_a_hung_learner_stops_beating_though_its_process_lives(learners) -> None:
    (_, beat0, _), (_, beat1, _) = learners
    beat1.free = False  # an epoch runs, and its compute thread never comes back from a step
    until(lambda: silent_rank(beat0) == 1)
    assert beat1._thread.is_alive()


def test_a_learner_that_makes_progress_is_never_named(learners) -> None:
    (_, beat0, _), (_, beat1, _) = learners
    beat1.free = False
    end = time.monotonic() + 1.5 * TIMEOUT_S  # past the timeout: a stopped beat would be named
    while time.monotonic() < end:
        beat1.touch()  # a step done
        assert silent_rank(beat0) is None
        time.sleep(0.05)


def agreements(learners) -> list[PauseAgreement]:
    return [PauseAgreement(store, rank, members, beat)
            for rank, (store, beat, members) in enumerate(learners)]


def test_a_preemption_pauses_both_at_the_main_learners_step_and_stops(learners) -> None:
    p = agreements(learners)
    p[1].request(stop=True)  # SIGTERM on the second learner
    until(lambda: p[0].pending() is not None and p[1].pending() is not None)  # seen within a beat
    ident = p[0].pending()
    assert ident is not None and p[1].pending() == ident
    assert run_both(lambda: p[0].join(ident, 7), lambda: p[1].join(ident, 9)) == [7, 7]
    assert p[0].decide("e1-s7") is True
    assert p[0].decision("e1-s7") and p[1].decision("e1-s7")
    p[0].request(stop=False)  # the next meeting is a new one
    until(lambda: p[1].pending() not in (None, ident))


def test_a_learner_at_the_epochs_end_calls_an_open_checkpoint_off(learners) -> None:
    p = agreements(learners)
    p[0].request(stop=False)  # the main learner's clock
    until(lambda: p[0].pending() is not None and p[1].pending() is not None)
    ident = p[0].pending()

    def out_of_work() -> None:
        time.sleep(0.2)  # the other is waiting in the meeting by now
        p[1].cancel_open()

    assert run_both(lambda: p[0].join(ident, 3), out_of_work)[0] is None
    assert p[1].pending() is None and p[0].decide("e1") is False

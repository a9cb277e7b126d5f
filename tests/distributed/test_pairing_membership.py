"""The gossip handshake (pairing) and the view of who is alive (membership), run directly on
a real TCPStore by two or four learners in threads: every outcome of a pair's meeting, and
how a departure moves every learner to the same view."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from two_learners import job_store, run_both  # noqa: E402

from asrtrain.core.errors import AsrtrainError  # noqa: E402
from asrtrain.distributed.groups import Layout  # noqa: E402
from asrtrain.distributed.membership import Membership, TooFewLearners, announce_gone  # noqa: E402
from asrtrain.distributed.pairing import ABORT, meet, pair_key, read_key, wait_read  # noqa: E402


def never() -> bool:
    return False


def test_a_pair_meets_on_one_key_whoever_comes_first() -> None:
    assert pair_key(3, 7, 5, 2) == pair_key(3, 7, 2, 5) == "gp/3/7/2-5"
    with job_store() as client:
        a, b = client(), client()
        key = pair_key(0, 1, 0, 1)

        def late() -> bool:
            time.sleep(0.05)
            return meet(b, key, never, never)

        assert run_both(lambda: meet(a, key, never, never), late) == [True, True]
        assert not a.check([key])  # the one that waited removed it


def test_a_partner_that_never_comes_calls_the_round_off_for_both() -> None:
    with job_store() as client:
        a, b = client(), client()
        key = pair_key(0, 2, 0, 1)
        polls: list[int] = []

        def give_up() -> bool:  # (the partner's heartbeat stopped, or the ring was re-formed)
            polls.append(1)
            return len(polls) >= 3

        assert meet(a, key, give_up, never) is False
        assert int(a.add(key, 0)) == ABORT + 1
        assert meet(b, key, never, never) is False  # it comes after all: sees the flag, no exchange
        assert not a.check([key])


def test_a_partner_arriving_as_the_other_gives_up_still_exchanges() -> None:
    with job_store() as client:
        a, b = client(), client()
        key = pair_key(0, 3, 0, 1)
        seen: list[int] = []

        def partner_arrives_then_give_up() -> bool:
            seen.append(int(b.add(key, 1)))  # the partner's arrival: it saw 2, so it exchanges
            return True

        assert meet(a, key, partner_arrives_then_give_up, never) is True  # then so must this side
        assert seen == [2]


def test_a_closing_thread_stops_waiting() -> None:
    with job_store() as client:
        a = client()
        with pytest.raises(RuntimeError, match="gossip thread is closing"):
            meet(a, pair_key(0, 4, 0, 1), never, lambda: True)
        with pytest.raises(RuntimeError, match="gossip thread is closing"):
            wait_read(a, read_key(0, 4, 1), never, lambda: True)


def test_the_read_key_is_waited_for_and_removed() -> None:
    with job_store() as client:
        a, b = client(), client()
        key = read_key(1, 5, 1)
        assert key == "gr/1/5/1"
        b.set(key, "1")
        assert wait_read(a, key, never, never) is True and not a.check([key])
        assert wait_read(a, key, lambda: True, never) is False  # the partner left before reading


def views(client, elastic: bool, world: int, group: int) -> list[Membership]:
    return [Membership(client(), Layout(r, world, group), elastic, None) for r in range(world)]


def test_a_lost_member_takes_its_super_learner_out_of_every_view() -> None:
    with job_store(4) as client:
        m = views(client, True, 4, 2)  # two super-learners of two
        m[0].declare_gone(3, "stopped responding")
        assert m[1].refresh() and m[1].live == [0, 1]
        assert m[1].gone[3]["why"] == "stopped responding"
        assert m[0].live == [0, 1] and m[0].live_supers() == [0] and m[0].counts() == 2
        assert not m[1].refresh()  # nothing new since
        with pytest.raises(AsrtrainError, match=r"rank 2 leaves the job: its super-learner lost rank\(s\) \[3\]"):
            m[2].refresh()


def test_the_first_to_notice_announces_once() -> None:
    with job_store() as client:
        s = client()
        assert announce_gone(s, 1, "its process exited") is True
        assert announce_gone(s, 1, "stopped responding") is False
        assert int(s.add("members/version", 0)) == 1


def test_the_lowest_rank_alive_is_main_and_too_few_stop_the_job() -> None:
    with job_store(4) as client:
        m = views(client, True, 4, 1)  # --min-learners defaults to half: 2
        m[1].declare_gone(0, "its process exited")
        assert m[2].refresh() and m[1].is_main and not m[2].is_main
        m[1].declare_gone(3, "stopped responding")
        with pytest.raises(TooFewLearners, match=r"only 1 learner\(s\) left \(\[1\]\), fewer than --min-learners 2"):
            m[1].declare_gone(2, "stopped responding")


def test_without_elastic_a_departure_is_an_error_naming_it() -> None:
    with job_store() as client:
        m = views(client, False, 2, 1)
        with pytest.raises(AsrtrainError, match="^learner rank 1 stopped responding"):
            m[0].declare_gone(1, "stopped responding")
        assert not m[0].refresh() and m[0].live == [0, 1]

"""The members of a super-learner in lockstep: the agreement before each step, pieces claimed
by member 0 for all, the batch shape for a member that has none; two members in threads,
each with a real gloo group and store client."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from two_learners import gloo_group, job_store, run_both  # noqa: E402

from asrtrain.data.loader import Piece  # noqa: E402
from asrtrain.distributed.lockstep import Agreement, Lockstep  # noqa: E402
from asrtrain.distributed.worksharing import EpochWork  # noqa: E402

ORDER = [5, 3, 8]  # the epoch's block order: three blocks for two members


def members(client) -> list[tuple[Lockstep, EpochWork]]:
    """Both members' lockstep and work; their groups made together (each waits for the other)."""
    stores = [client(), client()]

    def member(m: int) -> tuple[Lockstep, EpochWork]:
        return Lockstep(gloo_group(stores[m], m, 2), 2, m, 0, "cpu"), EpochWork(stores[m], 1, ORDER)

    return run_both(lambda: member(0), lambda: member(1))


def test_the_members_agree_on_batches_frames_gossip_the_newest_pause_and_membership_version() -> None:
    with job_store() as client:
        (a, _), (b, _) = members(client)
        got = run_both(lambda: a.agree(True, 120, True, 0, 2), lambda: b.agree(False, 0, True, 4, 1))
        assert got == [Agreement(have=1, frames=120, ready=2, pause=4, version=2)] * 2


def test_member_0_claims_for_both_until_the_epoch_runs_out() -> None:
    with job_store() as client:
        (a, work_a), (b, work_b) = members(client)
        rounds = [run_both(lambda: a.claim(work_a), lambda: b.claim(work_b)) for _ in range(3)]
    assert rounds[0] == [(Piece(0, 5), True), (Piece(1, 3), True)]
    assert rounds[1] == [(Piece(2, 8), True), (None, True)]  # one left: the other takes an empty step
    assert rounds[2] == [(None, False), (None, False)]      # none: both stop together


def test_a_member_without_a_batch_learns_the_shape() -> None:
    with job_store() as client:
        (a, _), (b, _) = members(client)
        assert run_both(lambda: a.shape((21, 40)), lambda: b.shape(None)) == [(21, 40), (21, 40)]

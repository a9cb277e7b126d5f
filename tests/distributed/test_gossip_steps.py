"""The compute thread's side of gossip: no work at a step where no round is ready."""

from __future__ import annotations

from dataclasses import dataclass, field

from asrtrain.distributed.config import DistConfig
from asrtrain.distributed.gossip import Gossip
from asrtrain.distributed.gossip_driver import GossipDriver
from asrtrain.distributed.groups import Layout
from asrtrain.distributed.straggler import Straggler
from asrtrain.distributed.strategy import DistributedStrategy


@dataclass
class CountingGossip:
    """Stands in for :class:`Gossip`: counts snapshots (begin_round) and applied deltas."""

    started: int = 0
    finished: int = 0
    ready_now: bool = False
    calls: list[str] = field(default_factory=list)

    @property
    def busy(self) -> bool:
        return self.started > self.finished

    def ready(self) -> bool:
        return self.ready_now

    def take_delta(self) -> None:
        self.finished += 1
        self.ready_now = False
        self.calls.append("apply")

    def begin_round(self) -> int:
        self.started += 1
        self.calls.append("snapshot")
        return self.started - 1


class _Heartbeat:
    def touch(self) -> None:
        pass


def _strategy(gossip: CountingGossip) -> DistributedStrategy:
    s = DistributedStrategy.__new__(DistributedStrategy)  # no process group: after_step alone
    cfg, layout, heartbeat = DistConfig("adpsgd"), Layout(0, 4, 1), _Heartbeat()
    s.cfg, s.layout, s.rank, s.heartbeat = cfg, layout, 0, heartbeat  # type: ignore[assignment]
    s.gossiping = GossipDriver(cfg, layout, None, None, heartbeat, None, 0)  # type: ignore[arg-type]
    s.gossiping.gossip = gossip  # type: ignore[assignment]
    s.straggler = Straggler(cfg, 0)
    s.steps = s.epoch_steps = 0
    s.hand = None
    return s


def test_steps_without_a_finished_round_copy_nothing() -> None:
    gossip = CountingGossip()
    strategy = _strategy(gossip)
    strategy.after_step(None, 1)  # type: ignore[arg-type]
    assert gossip.calls == ["snapshot"]  # the first round begins at once
    for step in range(2, 6):
        strategy.after_step(None, step)  # type: ignore[arg-type]
    assert gossip.calls == ["snapshot"]  # round in flight, not ready: no copy, no apply
    gossip.ready_now = True
    strategy.after_step(None, 6)  # type: ignore[arg-type]
    assert gossip.calls == ["snapshot", "apply", "snapshot"]  # apply, then the next round's snapshot
    assert strategy.steps == 6


def _numbering(group_size: int) -> Gossip:
    """A gossip's round numbering alone (no thread, no group): three rounds begun in version 0."""
    g = Gossip.__new__(Gossip)
    g.layout = Layout(0, 4, group_size)
    g.latest_version = g.agreed_version = 0
    g._v, g._k = 0, 3
    return g


def test_a_super_learner_member_moves_to_a_new_version_only_when_its_members_agreed() -> None:
    # Each member's threads see a departure at their own moment; a member that numbered its next round
    # in the new version alone would be a round ahead of its sibling there, and at the epoch's last
    # round wait in the super-learner's collective for a round the sibling never begins (the cause of
    # test_elastic's H-ADPSGD failures under load: "Timed out waiting 20000ms for recv").
    member = _numbering(group_size=2)
    member.note_version(1)  # seen by its gossip thread
    assert member.position() == (0, 3)
    member.agree_version(2)  # agreed by the members before a step
    assert member.position() == (2, 0)
    alone = _numbering(group_size=1)
    alone.note_version(1)  # a learner alone: at once
    assert alone.position() == (1, 0)

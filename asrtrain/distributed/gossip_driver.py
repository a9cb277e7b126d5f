"""Driving gossip from the compute thread: the ring started, rounds fed and applied, ends agreed.

The gossip thread (:mod:`asrtrain.distributed.gossip`) exchanges weights in the
background; the compute thread begins a round after a step when none is in flight
(the thread snapshots the weights), applies a finished round's delta at a step
boundary (members of a super-learner at the step they agreed on, so they stay
identical), and, at a checkpoint or an epoch's end, meets every learner alive on
the round that gossip ends with.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from asrtrain.distributed.config import DistConfig
from asrtrain.distributed.gossip import Gossip
from asrtrain.distributed.groups import Groups, Layout
from asrtrain.distributed.heartbeat import Heartbeat
from asrtrain.distributed.membership import Membership, wait_for_all


class GossipDriver:
    """The compute thread's side of gossip (no gossip with one super-learner: every call is a no-op)."""

    def __init__(self, cfg: DistConfig, layout: Layout, groups: Groups, store: Any, heartbeat: Heartbeat,
                 members: Membership, rank: int) -> None:
        self.cfg, self.layout, self.groups, self.store = cfg, layout, groups, store
        self.heartbeat, self.members, self.rank = heartbeat, members, rank
        self.gossip: Gossip | None = None
        self.apply_now = False  # members of a super-learner: all hold the delta, apply it at this step
        self._resume_rounds: int | None = None

    def start(self, model: nn.Module, device: str, backend: str) -> None:
        """Start the gossip thread on the model's parameters (more than one super-learner only)."""
        import torch.distributed as dist

        if self.layout.num_super == 1:
            return
        if backend == "nccl":
            # NCCL connects lazily, and a first point-to-point op on a group that not
            # all its ranks join can hang: connect the gossip groups with one collective.
            for grp in (self.groups.gossip, self.groups.super_gossip):
                if grp is not None:
                    dist.all_reduce(torch.zeros(1, device=device), group=grp)
        cfg = self.cfg
        self.gossip = Gossip([p for p in model.parameters()], self.groups, self.store, self.heartbeat,
                             cfg.topology, cfg.gossip_seed, cfg.reshuffle_every, cfg.gossip_transport,
                             cfg.elastic, cfg.min_learners)
        if self._resume_rounds is not None:
            self._set_rounds(self._resume_rounds)

    def ready(self) -> bool:
        """Whether a round is in flight and its delta is in hand."""
        return self.gossip is not None and self.gossip.busy and self.gossip.ready()

    def seen_version(self) -> int:
        """The newest membership version this learner's threads have seen (what its members agree on)."""
        return 0 if self.gossip is None else self.gossip.latest_version

    def agree_version(self, version: int) -> None:
        """The version the members agreed on before a step: the next round begins in it."""
        if self.gossip is not None:
            self.gossip.agree_version(version)

    def after_step(self) -> None:
        """Apply a finished round (a super-learner: only when all members agreed), then begin the next."""
        gossip = self.gossip
        if gossip is None:
            return
        if gossip.busy:
            if self.layout.group_size == 1 and gossip.ready():
                gossip.take_delta()
            elif self.layout.group_size > 1 and self.apply_now:
                gossip.take_delta()
        self.apply_now = False
        if not gossip.busy:
            gossip.begin_round()

    def keep_gossiping(self) -> None:
        """While waiting for the others: serve partners' rounds (a super-learner of one only)."""
        gossip = self.gossip
        if gossip is None:
            return
        gossip.raise_error()
        if gossip.busy and gossip.ready() and self.layout.group_size == 1:
            gossip.take_delta()

    def meet(self, key: str, meanwhile: Any = None) -> None:
        """Agree with every learner alive on the round gossip ends with, and run to it.

        Each posts how many rounds it began in the current membership version (a store
        wait, not a collective: a learner still computing keeps gossiping with those
        already here), then begins rounds up to the most any began and applies them
        all. A learner leaving meanwhile changes the version: they meet again.
        """
        gossip = self.gossip
        if gossip is None:
            return
        while True:
            self.members.refresh()
            gossip.agree_version(self.members.version)  # every learner alive posts and waits in it
            version, begun = gossip.position()
            self.store.set(f"{key}/{version}/{self.rank}", str(begun))
            live = wait_for_all(self.store, f"{key}/{version}", self.members, self.heartbeat,
                                meanwhile=meanwhile or self.keep_gossiping)
            if self.members.version != version:
                continue
            target = max(int(v) for v in self.store.multi_get([f"{key}/{version}/{r}" for r in live]))
            while gossip.position()[0] == version and gossip.position()[1] < target:
                gossip.drain()
                gossip.begin_round()
            gossip.drain()
            if gossip.position()[0] == version and self.members.version == version:
                return

    def end_epoch(self, epoch: int, meanwhile: Any) -> dict[str, Any]:
        """Run to the epoch's last round, agreed with all; what gossip did, for the epoch's stats."""
        gossip = self.gossip
        if gossip is None:
            return {}
        self.meet(f"ep/{epoch}/gossip", meanwhile)
        return {"rounds": gossip.started, "exchanged": gossip.exchanged, "shared_memory": gossip.shared_rounds,
                "gossip_s": round(gossip.comm_s, 3)}

    def rounds(self) -> int:
        """Rounds begun in this job (a checkpoint's ``rounds``)."""
        return 0 if self.gossip is None else self.gossip.position()[1]

    def resume_at(self, rounds: int) -> None:
        """A checkpoint's rounds: applied now, or when the thread starts (:meth:`start`)."""
        if self.gossip is None:
            self._resume_rounds = rounds
        else:
            self._set_rounds(rounds)

    def _set_rounds(self, rounds: int) -> None:
        """Resume the ring where it was: the next round is number ``rounds`` (of a fresh store's version 0)."""
        assert self.gossip is not None and not self.gossip.busy
        self.gossip.resume_at(rounds)

    def close(self) -> None:
        if self.gossip is not None:
            self.gossip.close()

"""SSGD, ADPSGD and H-ADPSGD: one mechanism with one parameter, the super-learner size.

The strategy the trainer sees is a composition of parts, each doing one job:

- :mod:`~asrtrain.distributed.combine`: members of a super-learner allreduce
  gradients every step (DDP on its group); weights are one copy at the start and
  averaged at an epoch's end;
- :mod:`~asrtrain.distributed.gossip_driver`: super-learners gossip with one ring
  neighbour per round in a background thread (:mod:`~asrtrain.distributed.gossip`);
- :mod:`~asrtrain.distributed.feed`: blocks come from a shared counter, members of a
  super-learner in lockstep (:mod:`~asrtrain.distributed.lockstep`);
- :mod:`~asrtrain.distributed.coordination`: membership, checkpoint pauses (a meeting
  of all learners at their own step boundaries), barriers;
- :mod:`~asrtrain.distributed.straggler`: a test knob.

A new strategy is a new composition of these; this class wires them to the
interface of :class:`~asrtrain.distributed.base.Strategy`.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from asrtrain.core.errors import ConfigError
from asrtrain.distributed.base import Batches, Strategy
from asrtrain.distributed.combine import (
    GradientCombiner,
    average_weights,
    broadcast_weights,
    sum_gradients,
)
from asrtrain.distributed.config import DistConfig
from asrtrain.distributed.coordination import JobCoordination
from asrtrain.distributed.feed import WorkFeed
from asrtrain.distributed.gossip_driver import GossipDriver
from asrtrain.distributed.groups import Layout, make_groups, resolve_group_size, spanning_hosts
from asrtrain.distributed.heartbeat import Heartbeat
from asrtrain.distributed.launch import Placement
from asrtrain.distributed.lockstep import Agreement, Lockstep
from asrtrain.distributed.membership import Membership
from asrtrain.distributed.shm import gather, host_id
from asrtrain.distributed.straggler import Straggler
from asrtrain.distributed.worksharing import EpochWork

log = logging.getLogger("asrtrain.distributed")


def check_super_learner_hosts(store: Any, layout: Layout, group_size: int | None) -> None:
    """H-ADPSGD's super-learners must each lie on one host (a node by default)."""
    store.set(f"host/{layout.rank}", host_id())
    hosts = [h.decode() if isinstance(h, bytes) else str(h) for h in gather(store, "host", layout.world_size)]
    problem = spanning_hosts(layout, hosts)
    if problem and group_size is None:
        raise ConfigError(f"H-ADPSGD: {problem}: the launcher did not number ranks in blocks per node "
                          "(use srun --distribution=block, mpiexec -ppn N with hosts in order), "
                          "or give --group-size")
    if problem:
        log.warning("H-ADPSGD --group-size %d: %s; its allreduce crosses hosts", layout.group_size, problem)


class DistributedStrategy(Strategy):
    """One learner of a job running ``ssgd``, ``adpsgd`` or ``h-adpsgd``."""

    def __init__(self, cfg: DistConfig, place: Placement, store: Any, seed: int = 0) -> None:
        import torch.distributed as dist

        super().__init__()
        self.cfg, self.place, self.seed = cfg, place, seed
        self.name = cfg.strategy
        self.rank, self.world_size = place.rank, place.world_size
        size = resolve_group_size(cfg.strategy, place.world_size, place.local_world_size, cfg.group_size)
        self.layout = lay = Layout(place.rank, place.world_size, size)
        self.store = store
        if self.name == "h-adpsgd":
            check_super_learner_hosts(store, lay, cfg.group_size)
        self.groups = make_groups(lay, cfg.timeout_s)
        self.backend = dist.get_backend()
        self.heartbeat = Heartbeat(store, self.rank, self.world_size, cfg.timeout_s)
        self.members = Membership(store, lay, cfg.elastic, cfg.min_learners)  # the compute thread's view
        lockstep = Lockstep(self.groups.super, lay.group_size, lay.member, lay.ranks_of(lay.super_id)[0],
                            self.control_device)
        self.feed = WorkFeed(store, lay, cfg, self.rank, self.heartbeat, lockstep)
        self.job = JobCoordination(store, self.rank, self.world_size, cfg.timeout_s, self.members, self.heartbeat,
                                   in_lockstep=lay.group_size > 1)
        self.gradients = GradientCombiner(lay, self.groups.super, self.device)
        self.gossiping = GossipDriver(cfg, lay, self.groups, store, self.heartbeat, self.members, self.rank)
        self.straggler = Straggler(cfg, self.rank)
        self.steps = 0
        self.epoch_steps = 0
        self._own_weights = False  # resumed with each learner's own weights

    # ----- what the loop asks ----------------------------------------------------------------
    @property
    def is_main(self) -> bool:
        """The lowest rank alive (rank 0 unless it left an ``--elastic`` job)."""
        return self.job.is_main

    @property
    def device(self) -> str:
        """This learner's GPU when the node has any (shared by several learners under gloo), else the CPU."""
        return f"cuda:{self.place.local_rank % torch.cuda.device_count()}" if torch.cuda.is_available() else "cpu"

    @property
    def control_device(self) -> str:
        """Where the small agreement tensors live: the GPU for NCCL, the host for gloo (no staging)."""
        return self.device if self.backend == "nccl" else "cpu"

    def wrap(self, model: nn.Module) -> nn.Module:
        """Same initial weights everywhere; DDP on the super-learner; start the gossip thread."""
        broadcast_weights(model, self._own_weights)
        net = self.gradients.wrap(model)
        self.gossiping.start(model, self.device, self.backend)
        return net

    def work_store(self) -> Any:
        """The job's store (its own client: claims happen in the loader's prefetch thread)."""
        return self.feed.store

    def batches(self, loader: Any, epoch: int) -> Batches:
        """The epoch's batches for this learner, with work sharing and lockstep members."""
        if self.hand is None or self.hand.work.epoch != epoch:
            self._begin_epoch()
        hand = self.hand_for(loader, epoch)
        if self.layout.group_size == 1:
            yield from self.feed.alone(loader, epoch, hand)
        else:
            yield from self.feed.in_lockstep(loader, epoch, hand, self.gossiping.ready, self.job.pauses.pending,
                                             self._agreed, self.gossiping.seen_version)

    def _agreed(self, agreement: Agreement) -> None:
        """What the members agreed before a step, to the parts that act on it."""
        self.gradients.agreed(agreement.frames)
        self.gossiping.apply_now = agreement.ready == self.layout.group_size
        self.gossiping.agree_version(agreement.version)
        self.job.pause_after_step = agreement.pause

    def _owner(self) -> int | None:
        return self.feed.owner()

    def _wait_more(self, work: EpochWork) -> Any:
        return self.feed.wait_more(work)

    def learner_ranks(self) -> list[int]:
        return self.job.learner_ranks()

    def events(self) -> list[dict[str, Any]]:
        """Departures and re-handed blocks since the last call, for the main learner's metrics."""
        return self.job.departures() + self.feed.rehanded_events()

    def blocks_handed_out(self) -> int | None:
        """Blocks of this epoch claimed by all super-learners, as of this learner's last claim.

        Known from the claims themselves: no store round trip on the step's path.
        """
        return 0 if self.hand is None else self.hand.work.handed_out

    def loss_denominator(self, local_frames: int) -> float:
        return self.gradients.loss_denominator(local_frames)

    def after_step(self, model: nn.Module, step: int) -> None:
        """The hand moves on, straggler emulation, then hand the gossip thread the new weights."""
        super().after_step(model, step)
        self.straggler.after_step()
        self.steps += 1
        self.epoch_steps += 1
        self.heartbeat.touch()
        self.gossiping.after_step()

    def pause_wanted(self, want: bool) -> bool:
        return self.job.pause_wanted(want)

    def pause(self, model: nn.Module, step: int) -> int | None:
        """Join the open checkpoint: wait for all, end gossip on the same round.

        Returns the main learner's step, or ``None`` if the checkpoint was called off.
        """
        ident = self.job.take_pause()
        if self.hand is not None:
            self.hand.pause()
        if not ident:
            return None
        main_step = self.job.join(ident, step, meanwhile=self.gossiping.keep_gossiping)
        if main_step is not None:
            self.gossiping.meet(f"ck/{ident}/gossip")
        return main_step

    def decide_stop(self, name: str) -> bool:
        return self.job.decide_stop(name)

    def stops(self, name: str) -> bool:
        return self.job.stops(name)

    def end_epoch(self, model: nn.Module, epoch: int) -> None:
        """Agree on the last gossip round, run exactly to it, then average all weights."""
        super().end_epoch(model, epoch)
        self.straggler.new_epoch()

        def meanwhile() -> None:
            self.gossiping.keep_gossiping()
            self.job.pauses.cancel_open()  # an open checkpoint: this learner will not join it

        self.stats.update(self.gossiping.end_epoch(epoch, meanwhile))
        if self.cfg.global_average and self.layout.num_super > 1:
            self.average(model)
        self.stats.update(epoch=epoch, steps=self.epoch_steps, empty_steps=self.feed.empty_steps)
        if self.members.gone:
            self.stats["gone"] = sorted(self.members.gone)
        self.heartbeat.free = True
        log.info("rank %d epoch %d: %s", self.rank, epoch, self.stats)

    def average(self, model: nn.Module) -> None:
        """Replace every learner's weights by the mean over all learners."""
        average_weights(model, *self.job.alive_group())

    def _begin_epoch(self) -> None:
        self.epoch_steps = 0
        self.feed.empty_steps = 0
        self.stats = {}
        self.heartbeat.free = False
        self.heartbeat.touch()

    # ----- everything else ------------------------------------------------------------------
    def all_sum(self, values: list[float]) -> list[float]:
        return self.job.all_sum(values, self.control_device)

    def barrier(self) -> None:
        self.job.barrier()

    def sum_gradients(self, model: nn.Module) -> None:
        """One allreduce of every gradient over the learners alive."""
        sum_gradients(model, self.job.alive_group()[0])

    @property
    def weights_agree(self) -> bool:
        """Whether every learner holds the same weights at an epoch's end (else each saves its own)."""
        return self.layout.num_super == 1 or self.cfg.global_average

    def state_dict(self, mid_epoch: bool = False) -> dict[str, Any]:
        """Steps, gossip rounds begun, whether learners' weights differ (mid-epoch: whenever there is
        gossip), and who left the job (``--elastic``)."""
        differ = not self.weights_agree or (mid_epoch and self.layout.num_super > 1)
        return {"strategy": self.name, "world_size": self.world_size, "group_size": self.layout.group_size,
                "steps": self.steps, "rounds": self.gossiping.rounds(), "own_weights": differ,
                "gone": sorted(self.members.gone)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Steps and gossip rounds of a checkpoint of the same job shape (checked by the restore)."""
        self.steps = int(state.get("steps", 0))
        self._own_weights = bool(state.get("own_weights", False))
        self.gossiping.resume_at(int(state.get("rounds", 0)))

    def close(self) -> None:
        self.gossiping.close()
        self.heartbeat.close()

    def describe(self) -> dict[str, Any]:
        lay = self.layout
        return {"strategy": self.name, "world_size": self.world_size, "group_size": lay.group_size,
                "super_learners": lay.num_super, "backend": self.backend, "topology": self.cfg.topology}

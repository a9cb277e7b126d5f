"""SSGD, ADPSGD and H-ADPSGD: one mechanism with one parameter, the super-learner size.

Members of a super-learner allreduce gradients every step (DistributedDataParallel
on the super-learner's group); super-learners gossip with one ring neighbour per
round in a background thread (:mod:`asrtrain.distributed.gossip`); blocks come from
a shared counter (:mod:`asrtrain.distributed.worksharing`).

The members of a super-learner step in lockstep (:mod:`asrtrain.distributed.lockstep`).
Mid-epoch checkpoints are a meeting of all learners at their own step boundaries
(:mod:`asrtrain.distributed.pause`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch
from torch import nn

from asrtrain.data.loader import IGNORE_INDEX, real_frames
from asrtrain.distributed import signals
from asrtrain.distributed.base import Batches, Strategy
from asrtrain.distributed.config import DistConfig
from asrtrain.distributed.gossip import Gossip
from asrtrain.distributed.groups import Layout, make_groups, resolve_group_size
from asrtrain.distributed.heartbeat import Heartbeat, own_client, wait_for_count
from asrtrain.distributed.launch import Placement
from asrtrain.distributed.lockstep import Lockstep
from asrtrain.distributed.pause import PauseAgreement
from asrtrain.distributed.worksharing import Hand

log = logging.getLogger("asrtrain.distributed")


def _no_buffer_sync() -> dict[str, Any]:
    """DDP's switch for not broadcasting buffers every forward (renamed in torch 2.13)."""
    import inspect

    from torch.nn.parallel import DistributedDataParallel as DDP

    params = inspect.signature(DDP.__init__).parameters
    return {"forward_sync_buffers": False} if "forward_sync_buffers" in params else {"broadcast_buffers": False}


class DistributedStrategy(Strategy):
    """One learner of a job running ``ssgd``, ``adpsgd`` or ``h-adpsgd``."""

    def __init__(self, cfg: DistConfig, place: Placement, store: Any, seed: int = 0) -> None:
        import torch.distributed as dist

        super().__init__()
        self.cfg, self.place, self.seed = cfg, place, seed
        self.name = cfg.strategy
        self.rank, self.world_size = place.rank, place.world_size
        size = resolve_group_size(cfg.strategy, place.world_size, place.local_world_size, cfg.group_size)
        self.layout = Layout(place.rank, place.world_size, size)
        self.store = store
        self.groups = make_groups(self.layout, cfg.timeout_s)
        self.backend = dist.get_backend()
        self.heartbeat = Heartbeat(store, self.rank, self.world_size, cfg.timeout_s)
        self.gossip: Gossip | None = None
        self.ddp: nn.Module | None = None
        self.steps = 0
        self.epoch_steps = 0
        self.empty_steps = 0
        self._denominator: float | None = None
        self._apply_now = False
        self._last_t: float | None = None
        self._resume_rounds: int | None = None
        self._own_weights = False  # resumed with each learner's own weights
        self._barriers = 0
        self._work_store = own_client(store)  # claims happen in the loader's prefetch thread
        self.pauses = PauseAgreement(store, self.rank, self.world_size, self.heartbeat)
        self._pause_after_step = 0  # members of a super-learner: the checkpoint agreed before this step
        lay = self.layout
        self.lockstep = Lockstep(self.groups.super, lay.group_size, lay.member, lay.ranks_of(lay.super_id)[0],
                                 self.control_device)

    # ----- what the loop asks ----------------------------------------------------------------
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
        import torch.distributed as dist

        with torch.no_grad():
            # Resumed learners whose weights differ (no global average) keep their own.
            tensors = list(model.buffers()) if self._own_weights else list(model.parameters()) + list(model.buffers())
            for t in tensors:
                dist.broadcast(t.data, src=0)
        net: nn.Module = model
        if self.layout.group_size > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP

            ids = [torch.device(self.device)] if self.device != "cpu" else None
            # Buffers (input normalisation) are equal already: broadcast above.
            # find_unused_parameters keeps DDP from rebuilding its buckets in the order the
            # first step's gradients became ready: a job resumed in the middle of an epoch
            # then sums each gradient element in the same order as the job it continues
            # (with more than 2 learners the order changes the float sum), so SSGD resumes bit for bit.
            net = DDP(model, device_ids=ids, process_group=self.groups.super, find_unused_parameters=True,
                      **_no_buffer_sync())
            self.ddp = net
        if self.layout.num_super > 1:
            if self.backend == "nccl":
                # NCCL connects lazily, and a first point-to-point op on a group that not
                # all its ranks join can hang: connect the gossip groups with one collective.
                for grp in (self.groups.gossip, self.groups.super_gossip):
                    if grp is not None:
                        dist.all_reduce(torch.zeros(1, device=self.device), group=grp)
            self.gossip = Gossip([p for p in model.parameters()], self.groups, self.store, self.heartbeat,
                                 self.cfg.topology, self.cfg.gossip_seed, self.cfg.reshuffle_every,
                                 self.cfg.gossip_transport)
            if self._resume_rounds is not None:
                self._set_rounds(self._resume_rounds)
        return net

    def work_store(self) -> Any:
        """The job's store (its own client: claims happen in the loader's prefetch thread)."""
        return self._work_store

    def batches(self, loader: Any, epoch: int) -> Batches:
        """The epoch's batches for this learner, with work sharing and lockstep members."""
        if self.hand is None or self.hand.work.epoch != epoch:
            self._begin_epoch()
        hand = self.hand_for(loader, epoch)
        if self.layout.group_size > 1:
            yield from self._lockstep(loader, epoch, hand)
            return
        for x, y, piece, end in loader.tagged(epoch, hand.feed(), claim_late=True):
            self.heartbeat.touch()
            hand.served(piece, end)
            yield x, y

    def blocks_handed_out(self) -> int | None:
        """Blocks of this epoch claimed by all super-learners, as of this learner's last claim.

        Known from the claims themselves: no store round trip on the step's path.
        """
        return 0 if self.hand is None else self.hand.work.handed_out

    def _lockstep(self, loader: Any, epoch: int, hand: Hand) -> Batches:
        """Batches of the members in step: an empty one for a member out of work, all stop together."""
        it: Any = iter(loader.tagged(epoch, list(hand.pieces))) if hand.pieces else None
        shape: tuple[int, int] | None = None
        while True:
            self.heartbeat.touch()
            item = next(it, None) if it is not None else None
            if item is not None:
                shape = (int(item[0].shape[1]), int(item[0].shape[2]))
            ready = self.gossip is not None and self.gossip.busy and self.gossip.ready()
            agreed = self.lockstep.agree(item is not None, 0 if item is None else real_frames(item[1]), ready,
                                         self.pauses.pending() or 0)
            if agreed.have == 0:
                piece, any_piece = self.lockstep.claim(hand.work)
                if not any_piece:
                    return
                if piece is not None:
                    hand.take(piece)
                it = iter(loader.tagged(epoch, [piece])) if piece is not None else None
                continue
            if agreed.have < self.layout.group_size:
                shape = self.lockstep.shape(shape)
            self._denominator = max(agreed.frames, 1) / self.layout.group_size
            self._apply_now = agreed.ready == self.layout.group_size
            self._pause_after_step = agreed.pause
            if item is None:
                assert shape is not None
                self.empty_steps += 1
                hand.served(None)
                yield (torch.zeros((1, *shape), dtype=torch.float16),
                       torch.full((1, shape[0]), IGNORE_INDEX, dtype=torch.int64))
            else:
                hand.served(item[2], item[3])
                yield item[0], item[1]

    def loss_denominator(self, local_frames: int) -> float:
        """The super-learner's real frames over the group size that DDP's mean divides by.

        DDP averages the members' gradients; dividing each member's summed loss by
        ``total / group_size`` makes the average equal the gradient of the summed
        loss of the union of the batches over its total frames (one big learner).
        The total was agreed on before the step (:meth:`_lockstep`); a super-learner
        of one divides by its own frames.
        """
        if self.layout.group_size == 1:
            return float(max(local_frames, 1))
        assert self._denominator is not None, "a super-learner's batches come from batches()"
        value, self._denominator = self._denominator, None
        return value

    def after_step(self, model: nn.Module, step: int) -> None:
        """The hand moves on, straggler emulation, then hand the gossip thread the new weights."""
        super().after_step(model, step)
        self._straggle()
        self.steps += 1
        self.epoch_steps += 1
        self.heartbeat.touch()
        gossip = self.gossip
        if gossip is None:
            return
        if gossip.busy:
            if self.layout.group_size == 1 and gossip.ready():
                gossip.take_delta()
            elif self.layout.group_size > 1 and self._apply_now:
                gossip.take_delta()
        self._apply_now = False
        if not gossip.busy:
            gossip.begin_round()

    def _straggle(self) -> None:
        """Test option: the straggler sleeps ``factor - 1`` times its compute time."""
        now = time.perf_counter()
        if self.cfg.straggler_rank == self.rank and self._last_t is not None and self.cfg.straggler_factor > 1:
            time.sleep((self.cfg.straggler_factor - 1.0) * (now - self._last_t))
        self._last_t = time.perf_counter()

    def pause_wanted(self, want: bool) -> bool:
        """Ask for a checkpoint if wanted (or on a signal); whether this learner pauses now.

        Members of a super-learner pause at the step they agreed on before it.
        """
        stop = signals.requested() is not None
        if want or stop:
            self.pauses.request(stop)
        if self.layout.group_size > 1:
            return self._pause_after_step > 0
        return self.pauses.pending() is not None

    def pause(self, model: nn.Module, step: int) -> int | None:
        """Join the open checkpoint: wait for all, drain gossip to the agreed round.

        Returns the main learner's step, or ``None`` if the checkpoint was called off.
        """
        ident = self.pauses.pending() if self.layout.group_size == 1 else self._pause_after_step
        self._pause_after_step = 0
        if self.hand is not None:
            self.hand.pause()
        if not ident:
            return None
        rounds = 0 if self.gossip is None else self.gossip.started
        joined = self.pauses.join(ident, rounds, step, meanwhile=self._keep_gossiping)
        if joined is None:
            log.info("rank %d: checkpoint %d called off (a learner reached the end of the epoch)", self.rank, ident)
            return None
        last, main_step = joined
        self._run_gossip_to(last)
        return main_step

    def decide_stop(self, name: str) -> bool:
        return self.pauses.decide(name)

    def stops(self, name: str) -> bool:
        return self.pauses.decision(name)

    def _keep_gossiping(self) -> None:
        """While waiting for the others: serve partners' rounds (a super-learner of one only)."""
        gossip = self.gossip
        if gossip is None:
            return
        gossip.raise_error()
        if gossip.busy and gossip.ready() and self.layout.group_size == 1:
            gossip.take_delta()

    def _run_gossip_to(self, last: int) -> None:
        """Begin rounds up to ``last`` (the most any learner began) and apply every one."""
        if self.gossip is None:
            return
        while self.gossip.started < last:
            self.gossip.drain()
            self.gossip.begin_round()
        self.gossip.drain()

    def end_epoch(self, model: nn.Module, epoch: int) -> None:
        """Agree on the last gossip round, run exactly to it, then average all weights."""
        super().end_epoch(model, epoch)
        self._last_t = None
        if self.gossip is not None:
            self._run_gossip_to(self._agree_last_round(epoch))
            self.stats.update(rounds=self.gossip.started, exchanged=self.gossip.exchanged,
                              shared_memory=self.gossip.shared_rounds, gossip_s=round(self.gossip.comm_s, 3))
        if self.cfg.global_average and self.layout.num_super > 1:
            self.average(model)
        self.stats.update(epoch=epoch, steps=self.epoch_steps, empty_steps=self.empty_steps)
        self.heartbeat.free = True
        log.info("rank %d epoch %d: %s", self.rank, epoch, self.stats)

    def _agree_last_round(self, epoch: int) -> int:
        """Publish this learner's round count, wait for all, return the maximum.

        A store-based wait (not a blocking collective), so that a learner still
        computing can keep gossiping with those already done, and a peer that dies
        meanwhile is named by the heartbeat check.
        """
        gossip = self.gossip
        assert gossip is not None

        def meanwhile() -> None:
            self._keep_gossiping()
            self.pauses.cancel_open()  # an open checkpoint: this learner will not join it

        self.store.set(f"ep/{epoch}/rounds/{self.rank}", str(gossip.started))
        done_key = f"ep/{epoch}/done"
        self.store.add(done_key, 1)
        wait_for_count(self.store, done_key, self.world_size, self.heartbeat, meanwhile=meanwhile)
        keys = [f"ep/{epoch}/rounds/{r}" for r in range(self.world_size)]
        return max(int(v) for v in self.store.multi_get(keys))

    def average(self, model: nn.Module) -> None:
        """Replace every learner's weights by the mean over all learners."""
        import torch.distributed as dist

        with torch.no_grad():
            flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            dist.all_reduce(flat)
            flat /= self.world_size
            offset = 0
            for p in model.parameters():
                p.copy_(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()

    def _begin_epoch(self) -> None:
        self.epoch_steps = 0
        self.empty_steps = 0
        self.stats = {}
        self.heartbeat.free = False
        self.heartbeat.touch()

    # ----- everything else ------------------------------------------------------------------
    def all_sum(self, values: list[float]) -> list[float]:
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.float64, device=self.control_device)
        dist.all_reduce(t)
        return [float(v) for v in t.cpu()]

    def barrier(self) -> None:
        """Wait for every learner, as long as they are alive (the main one may be validating).

        A store counter rather than ``dist.barrier``: a long validation on the main
        learner must not trip the collectives' timeout, a dead learner still must.
        """
        self._barriers += 1
        key = f"barrier/{self._barriers}"
        self.store.add(key, 1)
        wait_for_count(self.store, key, self.world_size, self.heartbeat)

    @property
    def weights_agree(self) -> bool:
        """Whether every learner holds the same weights at an epoch's end (else each saves its own)."""
        return self.layout.num_super == 1 or self.cfg.global_average

    def state_dict(self, mid_epoch: bool = False) -> dict[str, Any]:
        """Steps, gossip rounds, and whether learners' weights differ (mid-epoch: whenever there is gossip)."""
        differ = not self.weights_agree or (mid_epoch and self.layout.num_super > 1)
        return {"strategy": self.name, "world_size": self.world_size, "group_size": self.layout.group_size,
                "steps": self.steps, "rounds": 0 if self.gossip is None else self.gossip.started,
                "own_weights": differ}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Steps and gossip rounds of a checkpoint of the same job shape (checked by the restore)."""
        self.steps = int(state.get("steps", 0))
        self._own_weights = bool(state.get("own_weights", False))
        rounds = int(state.get("rounds", 0))
        if self.gossip is None:
            self._resume_rounds = rounds
        else:
            self._set_rounds(rounds)

    def _set_rounds(self, rounds: int) -> None:
        assert self.gossip is not None and not self.gossip.busy
        self.gossip.started = self.gossip.finished = rounds

    def close(self) -> None:
        if self.gossip is not None:
            self.gossip.close()
        self.heartbeat.close()

    def describe(self) -> dict[str, Any]:
        lay = self.layout
        return {"strategy": self.name, "world_size": self.world_size, "group_size": lay.group_size,
                "super_learners": lay.num_super, "backend": self.backend, "topology": self.cfg.topology}

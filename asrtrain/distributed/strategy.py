"""SSGD, ADPSGD and H-ADPSGD: one mechanism with one parameter, the super-learner size.

Members of a super-learner allreduce gradients every step (DistributedDataParallel
on the super-learner's group); super-learners gossip with one ring neighbour per
round in a background thread (:mod:`asrtrain.distributed.gossip`); blocks come from
a shared counter (:mod:`asrtrain.distributed.worksharing`).

The members of a super-learner step in lockstep. :meth:`DistributedStrategy.batches`
keeps them there: before each step they agree (one small allreduce) on whether each
has a batch, their total of real frames (the loss denominator) and whether each has
the gossip delta in hand (applied by all at this step, so they stay identical). A
member whose block ran out while the others' have not takes an empty step (all
frames ignored: zero gradient), so no data is dropped; when all are out they claim
the next blocks together, and stop together when none is left.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from asrtrain.data.loader import IGNORE_INDEX, real_frames
from asrtrain.distributed.base import Batches, Strategy
from asrtrain.distributed.config import DistConfig
from asrtrain.distributed.gossip import Gossip
from asrtrain.distributed.groups import Layout, make_groups, resolve_group_size
from asrtrain.distributed.heartbeat import Heartbeat, own_client, wait_for_count
from asrtrain.distributed.launch import Placement
from asrtrain.distributed.worksharing import WorkQueue

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
        self._queue: WorkQueue | None = None

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
            net = DDP(model, device_ids=ids, process_group=self.groups.super, **_no_buffer_sync())
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

    def batches(self, loader: Any, epoch: int) -> Batches:
        """The epoch's batches for this learner, with work sharing and lockstep members."""
        self._begin_epoch()
        queue = self._queue = WorkQueue(self._work_store, self.layout, self.groups.super,
                                        loader.block_order(epoch), epoch, self.control_device)
        if self.layout.group_size == 1:
            for x, y in loader.epoch(epoch, blocks=queue.iter_blocks(), claim_late=True):
                self.heartbeat.touch()
                yield x, y
            self.stats["blocks"] = len(queue.claimed)
            return
        yield from self._lockstep(loader, epoch, queue)
        self.stats["blocks"] = len(queue.claimed)

    def blocks_handed_out(self) -> int | None:
        """Blocks of this epoch claimed by all super-learners, as of this learner's last claim.

        Known from the claims themselves: no store round trip on the step's path.
        """
        return 0 if self._queue is None else self._queue.handed_out

    def _lockstep(self, loader: Any, epoch: int, queue: WorkQueue) -> Batches:
        import torch.distributed as dist

        g = self.layout.group_size
        it: Iterator[Any] | None = None
        shape: tuple[int, int] | None = None
        while True:
            self.heartbeat.touch()
            item = next(it, None) if it is not None else None
            if item is not None:
                shape = (int(item[0].shape[1]), int(item[0].shape[2]))
            ready = self.gossip is not None and self.gossip.busy and self.gossip.ready()
            agree = self._ints([item is not None, 0 if item is None else real_frames(item[1]), ready])
            dist.all_reduce(agree, group=self.groups.super)
            have, frames, n_ready = (int(v) for v in agree.cpu())
            if have == 0:
                block = queue.claim()
                any_block = self._ints([block is not None])
                dist.all_reduce(any_block, group=self.groups.super)
                if int(any_block[0]) == 0:
                    return
                it = iter(loader.epoch(epoch, blocks=[block])) if block is not None else None
                continue
            if have < g:
                shape = self._agree_shape(shape)
            if item is None:
                assert shape is not None
                item = (torch.zeros((1, *shape), dtype=torch.float32),
                        torch.full((1, shape[0]), IGNORE_INDEX, dtype=torch.int64))
                self.empty_steps += 1
            self._denominator = max(frames, 1) / g
            self._apply_now = n_ready == g
            yield item

    def _ints(self, values: list[Any]) -> torch.Tensor:
        """A small int64 tensor where this backend's collectives want it (NCCL: the GPU)."""
        return torch.tensor([int(v) for v in values], dtype=torch.int64, device=self.control_device)

    def _agree_shape(self, shape: tuple[int, int] | None) -> tuple[int, int]:
        """The (chunk, feature dim) of the batches, for a member that has seen none yet."""
        import torch.distributed as dist

        t = self._ints(list(shape or (0, 0)))
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.groups.super)
        return int(t[0]), int(t[1])

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
        """Straggler emulation, then hand the gossip thread the new weights."""
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

    def end_epoch(self, model: nn.Module, epoch: int) -> None:
        """Agree on the last gossip round, run exactly to it, then average all weights."""
        self._last_t = None
        if self.gossip is not None:
            last = self._agree_last_round(epoch)
            while self.gossip.started < last:
                self.gossip.drain()
                self.gossip.begin_round()
            self.gossip.drain()
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

        def keep_gossiping() -> None:
            gossip.raise_error()
            if gossip.busy and gossip.ready() and self.layout.group_size == 1:
                gossip.take_delta()

        self.store.set(f"ep/{epoch}/rounds/{self.rank}", str(gossip.started))
        done_key = f"ep/{epoch}/done"
        self.store.add(done_key, 1)
        wait_for_count(self.store, done_key, self.world_size, self.heartbeat, meanwhile=keep_gossiping)
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

    def state_dict(self) -> dict[str, Any]:
        return {"strategy": self.name, "world_size": self.world_size, "group_size": self.layout.group_size,
                "steps": self.steps, "rounds": 0 if self.gossip is None else self.gossip.started,
                "own_weights": not self.weights_agree}

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

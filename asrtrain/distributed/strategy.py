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
from datetime import timedelta
from typing import Any

import torch
from torch import nn

from asrtrain.core.errors import ConfigError
from asrtrain.data.loader import IGNORE_INDEX, real_frames
from asrtrain.distributed import signals
from asrtrain.distributed.base import Batches, Strategy
from asrtrain.distributed.config import DistConfig
from asrtrain.distributed.gossip import Gossip
from asrtrain.distributed.groups import Layout, make_groups, resolve_group_size, spanning_hosts
from asrtrain.distributed.heartbeat import CHECK_S, POLL_S, Heartbeat, own_client
from asrtrain.distributed.launch import Placement
from asrtrain.distributed.lockstep import Lockstep
from asrtrain.distributed.membership import Membership, check_alive, wait_for_all
from asrtrain.distributed.pause import PauseAgreement
from asrtrain.distributed.shm import gather, host_id
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
        if self.name == "h-adpsgd":
            self._check_super_learner_hosts(store)
        self.groups = make_groups(self.layout, cfg.timeout_s)
        self.backend = dist.get_backend()
        self.heartbeat = Heartbeat(store, self.rank, self.world_size, cfg.timeout_s)
        self.members = Membership(store, self.layout, cfg.elastic, cfg.min_learners)  # the compute thread's view
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
        self._work_members = Membership(self._work_store, self.layout, cfg.elastic, cfg.min_learners)
        self._rehanded: list[dict[str, Any]] = []  # pieces this (main) learner handed out again
        self._reported: set[int] = set()  # departures already in the metrics
        self.pauses = PauseAgreement(store, self.rank, self.members, self.heartbeat)
        self._world: tuple[int, Any] = (0, None)  # (membership version, group of the learners alive)
        self._pause_after_step = 0  # members of a super-learner: the checkpoint agreed before this step
        lay = self.layout
        self.lockstep = Lockstep(self.groups.super, lay.group_size, lay.member, lay.ranks_of(lay.super_id)[0],
                                 self.control_device)

    def _check_super_learner_hosts(self, store: Any) -> None:
        """H-ADPSGD's super-learners must each lie on one host (a node by default)."""
        store.set(f"host/{self.rank}", host_id())
        hosts = [h.decode() if isinstance(h, bytes) else str(h) for h in gather(store, "host", self.world_size)]
        problem = spanning_hosts(self.layout, hosts)
        if problem and self.cfg.group_size is None:
            raise ConfigError(f"H-ADPSGD: {problem}: the launcher did not number ranks in blocks per node "
                              "(use srun --distribution=block, mpiexec -ppn N with hosts in order), "
                              "or give --group-size")
        if problem:
            log.warning("H-ADPSGD --group-size %d: %s; its allreduce crosses hosts", self.layout.group_size, problem)

    # ----- what the loop asks ----------------------------------------------------------------
    @property
    def is_main(self) -> bool:
        """The lowest rank alive (rank 0 unless it left an ``--elastic`` job)."""
        return self.members.is_main

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
                                 self.cfg.gossip_transport, self.cfg.elastic, self.cfg.min_learners)
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

    def _owner(self) -> int | None:
        return self.rank if self.cfg.elastic else None

    def _wait_more(self) -> Any:
        return self._wait_for_more if self.cfg.elastic else None

    def _wait_for_more(self) -> bool:
        """Out of work under ``--elastic``: until pieces are handed out again (True) or the epoch is
        complete (False). The main learner sweeps what learners that left were holding."""
        assert self.hand is not None
        work, members = self.hand.work, self._work_members
        mine = self.layout.ranks_of(self.layout.super_id)  # a super-learner is out of work as one
        last_check = time.monotonic()
        while work.done() < work.num_blocks:
            self.heartbeat.touch()
            if work.new_again():
                work.set_idle(mine, False)
                if not work.sweeping():
                    return True
            work.set_idle(mine, True)
            members.refresh()
            if members.is_main:
                swept = work.sweep(members.live)
                if swept:
                    log.warning("rank %d: epoch %d: blocks handed out again (their learners left): %s",
                                self.rank, work.epoch, [p.block for p in swept])
                    self._rehanded.append({"epoch": work.epoch, "time": time.time(), "blocks": [p.block for p in swept]})
            if time.monotonic() - last_check > CHECK_S:
                check_alive(members, self.heartbeat)
                last_check = time.monotonic()
                if work.settled(members.live):  # the rest is in the hands of learners out of work
                    return False
            time.sleep(POLL_S * 10)
        return False

    def learner_ranks(self) -> list[int]:
        return list(self.members.live)

    def events(self) -> list[dict[str, Any]]:
        """Departures and re-handed blocks since the last call, for the main learner's metrics."""
        self.members.refresh()
        out = [{"event": "learner left", "rank": r, **self.members.gone[r]}
               for r in sorted(self.members.gone) if r not in self._reported]
        self._reported.update(self.members.gone)
        out += [{"event": "blocks handed out again", **item} for item in self._rehanded]
        self._rehanded = []
        return out

    def blocks_handed_out(self) -> int | None:
        """Blocks of this epoch claimed by all super-learners, as of this learner's last claim.

        Known from the claims themselves: no store round trip on the step's path.
        """
        return 0 if self.hand is None else self.hand.work.handed_out

    def _lockstep(self, loader: Any, epoch: int, hand: Hand) -> Batches:
        """Batches of the members in step: an empty one for a member out of work, all stop together.

        A member's short last batch of its pieces is held back (``carry``) and filled up
        by the next piece it is given, so its batches hold ``--batch``'s share whatever
        the block size; when no piece is left the held batches are the epoch's last step.
        """
        it: Any = iter(loader.tagged(epoch, list(hand.pieces))) if hand.pieces else None
        shape: tuple[int, int] | None = None
        carry: Any = None
        last = False  # no piece left for anyone: the held batches are stepped, then the epoch ends
        while True:
            self.heartbeat.touch()
            item = next(it, None) if it is not None else None
            if item is not None and not last and len(item[1]) < loader.batch_size:
                carry, item = item, None  # only the iterator's last batch is short
            if item is not None:
                shape = (int(item[0].shape[1]), int(item[0].shape[2]))
            ready = self.gossip is not None and self.gossip.busy and self.gossip.ready()
            agreed = self.lockstep.agree(item is not None, 0 if item is None else real_frames(item[1]), ready,
                                         self.pauses.pending() or 0)
            if agreed.have == 0:
                if last:
                    return
                piece, any_piece = self.lockstep.claim(hand.work, hand.wait_more)
                if piece is not None:
                    hand.take(piece)
                    it, carry = iter(loader.tagged(epoch, [piece], carry=carry)), None
                elif not any_piece:  # the held batches are the last step
                    it, carry, last = (iter([carry]) if carry is not None else None), None, True
                else:  # pieces for the others only: this member keeps its held batch for its next piece
                    it = None
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
        """Join the open checkpoint: wait for all, end gossip on the same round.

        Returns the main learner's step, or ``None`` if the checkpoint was called off.
        """
        ident = self.pauses.pending() if self.layout.group_size == 1 else self._pause_after_step
        self._pause_after_step = 0
        if self.hand is not None:
            self.hand.pause()
        if not ident:
            return None
        main_step = self.pauses.join(ident, step, meanwhile=self._keep_gossiping)
        if main_step is None:
            log.info("rank %d: checkpoint %d called off (a learner reached the end of the epoch)", self.rank, ident)
            return None
        self._gossip_meet(f"ck/{ident}/gossip")
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

    def _gossip_meet(self, key: str, meanwhile: Any = None) -> None:
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
            gossip.note_version(self.members.version)
            version, begun = gossip.position()
            self.store.set(f"{key}/{version}/{self.rank}", str(begun))
            live = wait_for_all(self.store, f"{key}/{version}", self.members, self.heartbeat,
                                meanwhile=meanwhile or self._keep_gossiping)
            if self.members.version != version:
                continue
            target = max(int(v) for v in self.store.multi_get([f"{key}/{version}/{r}" for r in live]))
            while gossip.position()[0] == version and gossip.position()[1] < target:
                gossip.drain()
                gossip.begin_round()
            gossip.drain()
            if gossip.position()[0] == version and self.members.version == version:
                return

    def end_epoch(self, model: nn.Module, epoch: int) -> None:
        """Agree on the last gossip round, run exactly to it, then average all weights."""
        super().end_epoch(model, epoch)
        self._last_t = None

        def meanwhile() -> None:
            self._keep_gossiping()
            self.pauses.cancel_open()  # an open checkpoint: this learner will not join it

        if self.gossip is not None:
            self._gossip_meet(f"ep/{epoch}/gossip", meanwhile)
            self.stats.update(rounds=self.gossip.started, exchanged=self.gossip.exchanged,
                              shared_memory=self.gossip.shared_rounds, gossip_s=round(self.gossip.comm_s, 3))
        if self.cfg.global_average and self.layout.num_super > 1:
            self.average(model)
        self.stats.update(epoch=epoch, steps=self.epoch_steps, empty_steps=self.empty_steps)
        if self.members.gone:
            self.stats["gone"] = sorted(self.members.gone)
        self.heartbeat.free = True
        log.info("rank %d epoch %d: %s", self.rank, epoch, self.stats)

    def average(self, model: nn.Module) -> None:
        """Replace every learner's weights by the mean over all learners."""
        import torch.distributed as dist

        group, count = self._alive_group()
        with torch.no_grad():
            flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
            dist.all_reduce(flat, group=group)
            flat /= count
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

        group, _ = self._alive_group()
        t = torch.tensor(values, dtype=torch.float64, device=self.control_device)
        dist.all_reduce(t, group=group)
        return [float(v) for v in t.cpu()]

    def _alive_group(self) -> tuple[Any, int]:
        """The group of every learner alive (the default group until one leaves) and its size.

        A group of the survivors is made by them alone (``use_local_synchronization``):
        the learner that left cannot take part. Called by all survivors at the same
        points (the epoch's end), in the same membership version.
        """
        import torch.distributed as dist

        if not self.members.gone:
            return None, self.world_size
        version, group = self._world
        if version != self.members.version:
            group = dist.new_group(self.members.live, timeout=timedelta(seconds=self.cfg.timeout_s),
                                   use_local_synchronization=True)
            self._world = (self.members.version, group)
        return group, len(self.members.live)

    def barrier(self) -> None:
        """Wait for every learner, as long as they are alive (the main one may be validating).

        A store counter rather than ``dist.barrier``: a long validation on the main
        learner must not trip the collectives' timeout, a dead learner still must.
        """
        self._barriers += 1
        key = f"barrier/{self._barriers}"
        self.store.set(f"{key}/{self.rank}", "1")
        wait_for_all(self.store, key, self.members, self.heartbeat)

    @property
    def weights_agree(self) -> bool:
        """Whether every learner holds the same weights at an epoch's end (else each saves its own)."""
        return self.layout.num_super == 1 or self.cfg.global_average

    def state_dict(self, mid_epoch: bool = False) -> dict[str, Any]:
        """Steps, gossip rounds begun, whether learners' weights differ (mid-epoch: whenever there is
        gossip), and who left the job (``--elastic``)."""
        differ = not self.weights_agree or (mid_epoch and self.layout.num_super > 1)
        rounds = 0 if self.gossip is None else self.gossip.position()[1]
        return {"strategy": self.name, "world_size": self.world_size, "group_size": self.layout.group_size,
                "steps": self.steps, "rounds": rounds, "own_weights": differ, "gone": sorted(self.members.gone)}

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
        """Resume the ring where it was: the next round is number ``rounds`` (of a fresh store's version 0)."""
        assert self.gossip is not None and not self.gossip.busy
        self.gossip.resume_at(rounds)

    def close(self) -> None:
        if self.gossip is not None:
            self.gossip.close()
        self.heartbeat.close()

    def describe(self) -> dict[str, Any]:
        lay = self.layout
        return {"strategy": self.name, "world_size": self.world_size, "group_size": lay.group_size,
                "super_learners": lay.num_super, "backend": self.backend, "topology": self.cfg.topology}

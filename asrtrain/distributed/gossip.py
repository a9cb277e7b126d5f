"""The gossip communication thread: one exchange with one partner per round, overlapped with compute.

The compute thread hands the thread a snapshot of the weights after a step
(:meth:`Gossip.begin_round`: one fused copy into a flat buffer allocated once, and
nothing else: no store round trip, no topology) and keeps computing. The thread
meets the round's partner (:mod:`asrtrain.distributed.pairing`: both exchange or
neither does; a slow partner is waited for as long as it is alive), exchanges the
snapshot with it (one symmetric send/receive on the gossip group; or, for a partner
on the same host, reads its snapshot in shared memory or through CUDA IPC), and
prepares ``partner − snapshot`` in place. The
compute thread adds half of it between two steps (:meth:`Gossip.take_delta`, one
fused pass), which keeps every local update made meanwhile:
``x ← x + 0.5 (partner − snapshot)``. Between rounds it does no work at all. Each
pair's deltas cancel exactly (the halving is exact), so the mean of the weights is
kept (a doubly stochastic mixing matrix).

H-ADPSGD: member ``j`` of a super-learner exchanges shard ``j`` of the flat weights
with member ``j`` of the partner, then one ``all_gather`` on the super-learner's
gossip group gives every member the whole delta; the members apply it at a step
they agree on (see :mod:`asrtrain.distributed.strategy`), so they stay identical.

Rounds are numbered ``(v, k)``: ``k`` counts the rounds begun under membership
version ``v`` (:mod:`asrtrain.distributed.membership`). When a learner leaves, the
version changes and the ring is re-formed over the super-learners alive from each
learner's next round, whose ``k`` starts again at 0, so partners always agree; a
round of an old version, or whose partner left, ends with no delta. The members of a
super-learner move to a new version at a round they agree on (the lockstep's
``version``), not when each happens to see it: every round of theirs ends in one
collective of theirs, so a member one round ahead in the new version would wait in
it for a partner that never comes.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import torch

from asrtrain.core.errors import AsrtrainError
from asrtrain.distributed.cuda_ipc import CudaSnapshots
from asrtrain.distributed.groups import Groups
from asrtrain.distributed.heartbeat import CHECK_S, POLL_S, Heartbeat, Silent, own_client
from asrtrain.distributed.membership import Membership
from asrtrain.distributed.pairing import meet, pair_key, read_key, wait_read
from asrtrain.distributed.shm import SharedSnapshots
from asrtrain.distributed.streams import DeviceOrder
from asrtrain.distributed.topology import GOSSIP_WEIGHT, partner_among

Done = tuple[torch.Tensor | None, Any]  # (the delta, or None for a round sat out; its CUDA event)
Round = tuple[int, int, torch.Tensor, Any]  # (version, k, snapshot, its CUDA event)


class Gossip:
    """The background thread exchanging weights with one partner per round."""

    def __init__(self, params: list[torch.Tensor], groups: Groups, store: Any, heartbeat: Heartbeat,
                 topology: str = "ring", seed: int = 0, reshuffle_every: int = 4,
                 transport: str = "auto", elastic: bool = False, min_learners: int | None = None) -> None:
        self.params = params
        self.groups = groups
        self.layout = groups.layout
        self.store = own_client(store)  # the thread's client
        self.heartbeat = heartbeat
        self.members = Membership(self.store, self.layout, elastic, min_learners)  # the thread's view
        self.latest_version = 0  # the newest membership version either thread has seen
        self.agreed_version = 0  # H-ADPSGD: the newest version the super-learner's members agreed on
        self._v = self._k = 0  # the version and number of the next round begun
        self.topology, self.seed, self.reshuffle_every = topology, seed, reshuffle_every
        self.started = 0  # rounds begun by the compute thread
        self.finished = 0  # rounds whose delta was taken
        self.exchanged = 0  # rounds that talked to a partner (not sat out)
        self.shared_rounds = 0  # of which through shared memory
        self.comm_s = 0.0
        self.error: BaseException | None = None
        self._todo: queue.Queue[Round | None] = queue.Queue()
        self._done: queue.Queue[Done] = queue.Queue()
        self._ready: Done | None = None
        self._stop = threading.Event()
        self._nccl = torch.distributed.get_backend() == "nccl"
        self._order = DeviceOrder(params[0].device)
        self._buffers(transport)
        self._thread = threading.Thread(target=self._run, name=f"gossip-{self.layout.rank}", daemon=True)
        self._thread.start()

    def _buffers(self, transport: str) -> None:
        """Flat buffers allocated once: fresh 100 MB allocations cost page faults every round.

        One round is in flight at a time and the compute thread applies a delta before
        it begins the next round, so each buffer has one user at a time. With
        ``transport="auto"`` the snapshot is readable by the learners of this host: in
        shared memory on CPUs, through CUDA IPC on GPUs under gloo (learners sharing
        GPUs). Under NCCL partners exchange device to device through the group.
        """
        g = self.layout.group_size
        total = sum(p.numel() for p in self.params)
        self.shard = -(-total // g)  # H-ADPSGD: member j owns [j*shard, (j+1)*shard)
        like, lay = self.params[0], self.layout
        self.shm: SharedSnapshots | CudaSnapshots | None = None
        if transport == "auto" and not self._nccl:
            if like.device.type == "cpu":
                self.shm = SharedSnapshots(self.store, lay.rank, lay.world_size, self.shard * g, like.dtype)
            else:
                self.shm = CudaSnapshots(self.store, lay.rank, lay.world_size, self.shard * g, like.dtype,
                                         like.device)
            self._snap = self.shm.own
        else:
            self._snap = torch.zeros(self.shard * g, dtype=like.dtype, device=like.device)
        self._delta = torch.zeros(self.shard * g, dtype=like.dtype, device=like.device)
        self._recv = torch.empty(self.shard, dtype=like.dtype, device=like.device) if g > 1 else self._delta
        self._snap_views = self._views(self._snap)
        self._delta_views = self._views(self._delta)

    def _views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        out, offset = [], 0
        for p in self.params:
            out.append(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        return out

    # ----- compute-thread side -------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """A round was begun and its delta not yet taken."""
        return self.started > self.finished

    def flat(self) -> torch.Tensor:
        """A copy of the weights as one flat vector."""
        return torch.cat([p.detach().reshape(-1) for p in self.params])

    def begin_round(self) -> int:
        """Snapshot the weights and hand round ``started`` to the thread; returns its number.

        On the compute thread's critical path: one fused copy (on the compute stream, before
        the next step changes the weights), nothing that waits.
        """
        self.raise_error()
        rnd = self.started
        self.started += 1
        version = self._next_version()
        if version != self._v:  # the ring was re-formed: its rounds count from 0
            self._v, self._k = version, 0
        self._k += 1
        with torch.no_grad():
            torch._foreach_copy_(self._snap_views, self.params)
        self._todo.put((self._v, self._k - 1, self._snap, self._order.mark()))
        return rnd

    def position(self) -> tuple[int, int]:
        """(version, rounds begun in it) as the compute thread knows them (what learners agree on)."""
        version = self._next_version()
        return (version, 0) if version != self._v else (self._v, self._k)

    def resume_at(self, rounds: int) -> None:
        """A resumed job's ring goes on at round ``rounds`` (nothing in flight)."""
        self._v, self._k = self._next_version(), rounds

    def note_version(self, version: int) -> None:
        """A newer membership version seen by either thread: a learner alone begins its next round in it."""
        self.latest_version = max(self.latest_version, version)

    def agree_version(self, version: int) -> None:
        """A version every member of the super-learner has agreed to (compute thread): the next round
        begins in it, the same round on every member."""
        self.note_version(version)
        self.agreed_version = max(self.agreed_version, version)

    def _next_version(self) -> int:
        """The version the next round begins in: the newest seen by a learner alone; for the members of
        a super-learner, the newest they agreed on (each thread sees a departure at its own moment)."""
        return self.latest_version if self.layout.group_size == 1 else self.agreed_version

    def ready(self) -> bool:
        """Whether the delta of the round in flight is available, on the device too (never blocks)."""
        self.raise_error()
        if self._ready is None and not self._done.empty():
            self._ready = self._done.get_nowait()
        return self._ready is not None and self._order.finished(self._ready[1])

    def take_delta(self, wait: bool = False) -> None:
        """Add the finished round's delta to the weights (between two steps)."""
        if wait:  # the thread ends every round, with or without a partner (pairing.meet)
            while not self.ready():
                self.heartbeat.touch()
                time.sleep(POLL_S)
        if not self.ready():
            raise RuntimeError("take_delta called with no finished round")
        assert self._ready is not None
        (delta, event), self._ready = self._ready, None
        self.finished += 1
        if delta is not None:  # delta holds partner − snapshot: add half of it, in one fused pass
            self._order.before_use(event)
            with torch.no_grad():
                torch._foreach_add_(self.params, self._delta_views, alpha=GOSSIP_WEIGHT)

    def drain(self) -> None:
        """Wait for the round in flight, if any, and apply it."""
        if self.busy:
            self.take_delta(wait=True)

    def raise_error(self) -> None:
        if self.error is not None:
            err, self.error = self.error, None
            if isinstance(err, AsrtrainError):
                raise err
            raise AsrtrainError(f"gossip thread of learner rank {self.layout.rank} failed: {err}") from err

    def close(self) -> None:
        """Stop the thread (after the round in flight)."""
        self._stop.set()
        self._todo.put(None)
        self._thread.join(timeout=30)
        if self.shm is not None and not self._thread.is_alive():
            self.shm.close()

    # ----- thread side -------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._todo.get()
            if item is None:
                return
            version, k, snap, taken = item
            try:
                with self._order.after(taken):
                    delta = self._round(version, k, snap, taken)
                    self._done.put((delta, self._order.mark()))
            except BaseException as exc:  # noqa: BLE001 - handed to the compute thread
                self.error = exc
                self._done.put((None, None))
                return

    def _round(self, version: int, k: int, snap: torch.Tensor, taken: Any) -> torch.Tensor | None:
        """Partner − snapshot for round ``(version, k)`` (device work on the gossip stream, after ``taken``).

        Members of a super-learner all reach the collective at the end, with or without
        a delta: the delta exists only if every member exchanged its shard.
        """
        t0 = time.perf_counter()
        got = self._exchange_shard(version, k, snap, taken)
        g = self.layout.group_size
        if g > 1:
            import torch.distributed as dist

            ok = torch.tensor([int(got)], device=self._delta.device)
            dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=self.groups.super_gossip)
            got = bool(int(ok[0]))
            if got:
                dist.all_gather(list(self._delta.split(self.shard)), self._recv, group=self.groups.super_gossip)
        if not got:
            return None
        self.exchanged += 1
        self.comm_s += time.perf_counter() - t0
        return self._delta

    def _exchange_shard(self, version: int, k: int, snap: torch.Tensor, taken: Any) -> bool:
        """This member's shard of partner − snapshot into ``_recv``; False: no partner this round."""
        if self.members.refresh():
            self.note_version(self.members.version)
        if self.members.version != version:
            return False  # a round of a ring that was re-formed since it began
        lay = self.layout
        partner_super = partner_among(self.members.live_supers(), lay.super_id, k, self.topology, self.seed,
                                      self.reshuffle_every)
        if partner_super is None:
            return False
        partner = lay.counterpart(partner_super)
        shared = self.shm is not None and self.shm.shared_with(partner)
        if shared:
            self._order.host_wait(taken)  # the partner reads our snapshot from its own process
        give_up = self._give_up(partner, version)
        if not meet(self.store, pair_key(version, k, lay.rank, partner), give_up, self._stop.is_set):
            return False
        j, size = lay.member, self.shard
        mine = snap if lay.group_size == 1 else snap[j * size:(j + 1) * size]
        # _recv is _delta when g == 1: it ends as partner − snapshot (halved when applied)
        if shared:
            assert self.shm is not None
            theirs = self.shm.peer(partner)
            theirs = theirs if lay.group_size == 1 else theirs[j * size:(j + 1) * size]
            torch.sub(theirs.to(mine.device, non_blocking=True), mine, out=self._recv)
            self._order.host_wait(self._order.mark())  # our read is done before the partner may write
            self.store.set(read_key(version, k, lay.rank), "1")  # the partner may overwrite its snapshot
            if not wait_read(self.store, read_key(version, k, partner), give_up, self._stop.is_set):
                return False  # the partner left before reading ours: it will not apply its half
            self.shared_rounds += 1
            return True
        try:
            self._exchange(mine, self._recv, partner)
        except RuntimeError as exc:
            self.members.declare_gone(partner, f"stopped answering its gossip partner ({str(exc).splitlines()[0]})")
            return False
        self._recv.sub_(mine)
        return True

    def _give_up(self, partner: int, version: int) -> Any:
        """Whether to stop waiting for ``partner``: it left, or the ring is being re-formed."""
        last = [time.monotonic()]

        def check() -> bool:
            if time.monotonic() - last[0] < CHECK_S / 10:
                return False
            last[0] = time.monotonic()
            if self.members.refresh():
                self.note_version(self.members.version)
            if self.members.version != version or not self.members.alive(partner):
                return True
            try:
                self.heartbeat.check([partner])
            except Silent as silent:
                self.members.declare_gone(silent.rank, silent.why)  # without --elastic: raises
                return True
            return False

        return check

    def _exchange(self, tensor: torch.Tensor, out: torch.Tensor, partner: int) -> None:
        """One symmetric send/receive with ``partner`` on the gossip group (into ``out``).

        NCCL sends device memory; gloo sends host memory, so a CUDA tensor under gloo
        (learners sharing GPUs, a partner on another host) goes through a staged copy.
        """
        import torch.distributed as dist

        group = self.groups.gossip
        if self._nccl:  # on the gossip stream: NCCL orders its work after the calling thread's stream
            ops = [dist.P2POp(dist.isend, tensor, partner, group), dist.P2POp(dist.irecv, out, partner, group)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
        elif tensor.is_cuda:  # gloo sends host memory: stage through it (partners on other hosts)
            staged = torch.empty_like(out, device="cpu")
            self._exchange(tensor.cpu(), staged, partner)
            out.copy_(staged)
        else:
            pending = (dist.isend(tensor, partner, group=group), dist.irecv(out, partner, group=group))
            for req in pending:
                if req is not None:  # None only for a rank outside the group
                    req.wait()

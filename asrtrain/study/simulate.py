"""Learners simulated in one process: N replicas stepping by the real strategies' update rules.

For studying the strategies, not for training fast. The real :class:`Trainer`
runs the loop (batches, learning-rate recipe, held-out evaluation, metrics,
checkpoints); :class:`SimTrainer` changes only what a step is: the batch of the
whole job (``--batch`` chunks) is cut into one slice per learner, and each replica
takes the real :meth:`Trainer.train_step` on its slice with its own weights and
momentum (the loader's batches carry over its blocks, so a batch above a block is
still whole) (swapped into the one model, no copy). A super-learner of ``g`` learners
is one replica on the union of its members' slices: its members hold equal weights
and its gradient is one learner's on that union (the property the mechanism tests
prove for real SSGD). So:

* SSGD: one replica on the whole batch (exactly one learner at the total batch);
* ADPSGD over N learners: N replicas;
* H-ADPSGD over N learners in super-learners of g: N/g replicas.

Between steps the replicas gossip as the real ones do: round ``k`` pairs them by
:func:`asrtrain.distributed.topology.matching` (ring or randomized ring), each
takes a snapshot, and ``delay`` steps later adds ``GOSSIP_WEIGHT · (partner's
snapshot − own snapshot)`` to its current weights. ``delay=1`` is what the real
overlap does when the link keeps up (the snapshot of one step is mixed in after the
next); ``delay=0`` is synchronous averaging. A new round starts when the previous one
is applied. At an epoch's end the pending round is applied (the real job runs its
gossip to an agreed last round) and, with ``global_average`` (the real
``--global-average``, on by default there too), every replica is set to the mean; without it
the replicas keep their own weights, so their spread builds up over epochs. The held-out set
is evaluated on the replicas' mean either way (the real job without a global average
evaluates rank 0's own weights: the mean is the model the spread is measured around).

Resume: the replicas' weights and momenta, the round counter, the round in flight and the
stale-gradient weights are the strategy's checkpoint state (:meth:`SimStrategy.state_dict`),
beside the trainer's (the loop's RNG, the epoch's work, the step), so a stopped run continues
bit for bit.

Delay-by-one (ICASSP 2020, only its abstract public): reconstructed in two readings,
both choices here. ``"averaging"``: the averaging lands one step late (``delay=1``).
``"gradient"``: each replica's gradient is taken at its weights of the previous step
and applied to its current ones (the gradient one step stale), with synchronous
averaging. Deterministic from the seed: one thread, no timing enters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from asrtrain.core.errors import ConfigError
from asrtrain.data.loader import real_frames
from asrtrain.distributed.base import Strategy
from asrtrain.distributed.topology import GOSSIP_WEIGHT, matching
from asrtrain.train.config import TrainConfig
from asrtrain.train.device import DeviceBatch
from asrtrain.train.hooks import Hooks
from asrtrain.train.trainer import Trainer

STRATEGIES = ("ssgd", "adpsgd", "h-adpsgd")
DELAY_BY_ONE = ("none", "averaging", "gradient")


@dataclass(frozen=True)
class SimConfig:
    """What is simulated: the strategy, how many learners, and how they gossip."""

    strategy: str = "adpsgd"
    learners: int = 16
    group_size: int = 1            # H-ADPSGD: learners per super-learner
    topology: str = "ring"
    reshuffle_every: int = 1       # randomized ring: rounds between new ring orders
    gossip_seed: int = 0
    delay: int = 1                 # steps between a round's snapshot and its averaging
    delay_by_one: str = "none"     # "gradient": the gradient one step stale
    perturb: float = 0.0           # noise added to each replica's initial weights (consensus studies)
    global_average: bool = True    # every replica set to the mean at each epoch's end

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"simulated strategy must be one of {', '.join(STRATEGIES)}")
        if self.learners < 1 or self.group_size < 1 or self.learners % self.group_size:
            raise ConfigError(f"{self.learners} learners do not split into super-learners of {self.group_size}")
        if self.delay < 0 or self.delay_by_one not in DELAY_BY_ONE:
            raise ConfigError(f"delay must be >= 0 and delay_by_one one of {', '.join(DELAY_BY_ONE)}")

    @property
    def replicas(self) -> int:
        """Models that differ: 1 (SSGD), the learners (ADPSGD), the super-learners (H-ADPSGD)."""
        return {"ssgd": 1, "adpsgd": self.learners, "h-adpsgd": self.learners // self.group_size}[self.strategy]


class SimStrategy(Strategy):
    """The simulated job as the trainer's strategy: one process, replicas that gossip."""

    def __init__(self, sim: SimConfig) -> None:
        super().__init__()
        self.sim = sim
        self.n = sim.replicas
        self.params: list[list[torch.Tensor]] = []
        self.momenta: list[list[torch.Tensor | None]] = []
        self.previous: list[list[torch.Tensor]] | None = None  # delay-by-one (gradient): last step's weights
        self.rounds = 0
        self._in_flight: tuple[int, list[torch.Tensor]] | None = None  # (steps to wait, snapshot deltas)
        self.in_replica = False
        self.spread: list[float] = []  # RMS distance of the replicas to their mean, after every step
        self.epoch_spread = 0.0  # the spread at the last epoch's end, before any global average
        self._saved: dict[str, Any] | None = None  # a checkpoint's replicas, until init_replicas takes them
        self.name = f"sim-{sim.strategy}"  # what a checkpoint is of: a resume must find the same strategy

    # ----- the replicas -------------------------------------------------------------------
    def init_replicas(self, model: nn.Module, seed: int) -> None:
        """N copies of the model's weights (perturbed by ``perturb``, seeded per replica), or a checkpoint's."""
        if self._saved is not None:
            self._take_saved(model)
            return
        base = [p.detach().clone() for p in model.parameters()]
        for r in range(self.n):
            g = torch.Generator().manual_seed(seed * 1000 + r + 1)
            noise = self.sim.perturb
            self.params.append([b.clone() + (noise * torch.randn(b.shape, generator=g, dtype=b.dtype) if noise else 0)
                                for b in base])
            self.momenta.append([None] * len(base))
        if self.sim.delay_by_one == "gradient":
            self.previous = [[t.clone() for t in ps] for ps in self.params]
        self.spread.append(self.rms_spread())

    @contextlib.contextmanager
    def replica(self, model: nn.Module, optimizer: torch.optim.Optimizer, r: int) -> Iterator[None]:
        """Replica ``r``'s weights and momentum in the model and optimizer (pointer swaps)."""
        params = list(model.parameters())
        for p, t in zip(params, self.params[r], strict=True):
            p.data = t
        for p, m in zip(params, self.momenta[r], strict=True):
            optimizer.state[p]["momentum_buffer"] = m
        try:
            yield
        finally:
            self.momenta[r] = [optimizer.state[p].get("momentum_buffer") for p in params]

    @contextlib.contextmanager
    def stale_gradient(self, model: nn.Module, optimizer: torch.optim.Optimizer, r: int) -> Iterator[None]:
        """Delay-by-one (gradient): forward and backward at last step's weights, the update on today's."""
        if self.previous is None:
            yield
            return
        params = list(model.parameters())
        current = self.params[r]
        today = [t.clone() for t in current]
        for p, t in zip(params, self.previous[r], strict=True):
            p.data = t

        def swap(_opt: Any, _args: Any, _kwargs: Any) -> None:
            for p, t in zip(params, current, strict=True):
                p.data = t

        handle = optimizer.register_step_pre_hook(swap)
        try:
            yield
        finally:
            handle.remove()
            self.previous[r] = today

    def mean(self) -> list[torch.Tensor]:
        return [torch.stack(ts).mean(0) for ts in zip(*self.params, strict=True)]

    # ----- checkpoints ----------------------------------------------------------------------
    def state_dict(self, mid_epoch: bool = False) -> dict[str, Any]:
        """Everything that differs between replicas and the gossip's position: an exact resume."""
        flight = None if self._in_flight is None else [self._in_flight[0], self._in_flight[1]]
        return {"strategy": self.name, "world_size": 1, "group_size": self.sim.group_size, "own_weights": False,
                "sim": asdict(self.sim), "params": self.params, "momenta": self.momenta,
                "previous": self.previous, "rounds": self.rounds, "in_flight": flight, "spread": self.spread,
                "epoch_spread": self.epoch_spread}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Keep a checkpoint's replicas for :meth:`init_replicas` (the model is built by then)."""
        if "params" not in state:
            return
        if state.get("sim") != asdict(self.sim):
            raise ConfigError(f"the checkpoint simulates {state.get('sim')}, not {asdict(self.sim)}: "
                              "use a new EXP or --no-resume")
        self._saved = state

    def _take_saved(self, model: nn.Module) -> None:
        state, self._saved = self._saved, None
        assert state is not None
        device = next(model.parameters()).device

        def here(ts: list[Any]) -> list[Any]:
            return [None if t is None else t.to(device) for t in ts]

        self.params = [here(ps) for ps in state["params"]]
        self.momenta = [here(ms) for ms in state["momenta"]]
        self.previous = None if state["previous"] is None else [here(ps) for ps in state["previous"]]
        self.rounds = int(state["rounds"])
        flight = state["in_flight"]
        self._in_flight = None if flight is None else (int(flight[0]), here(flight[1]))
        self.spread = list(state["spread"])
        self.epoch_spread = float(state["epoch_spread"])

    def rms_spread(self) -> float:
        mean = self.mean()
        total = sum(float(((t - m) ** 2).sum()) for ps in self.params for t, m in zip(ps, mean, strict=True))
        return (total / self.n) ** 0.5

    # ----- gossip between steps -------------------------------------------------------------
    def after_step(self, model: nn.Module, step: int) -> None:
        if self.in_replica:  # one replica's step inside the job's step: the job steps once
            return
        super().after_step(model, step)
        if self.n > 1:
            self._gossip()
        self.spread.append(self.rms_spread())

    def _gossip(self) -> None:
        if self._in_flight is not None:
            wait, deltas = self._in_flight
            if wait > 1:
                self._in_flight = (wait - 1, deltas)
                return
            self._apply(deltas)
            self._in_flight = None
        deltas = self._round()
        if self.sim.delay == 0 or self.sim.delay_by_one == "gradient":
            self._apply(deltas)
        else:
            self._in_flight = (self.sim.delay, deltas)

    def _round(self) -> list[torch.Tensor]:
        """Round ``rounds``: each replica's delta ``partner's snapshot − own`` (flat), from snapshots now."""
        partner = matching(self.n, self.rounds, self.sim.topology, self.sim.gossip_seed, self.sim.reshuffle_every)
        self.rounds += 1
        flat = [torch.cat([t.reshape(-1) for t in ps]) for ps in self.params]
        return [flat[p] - flat[r] if p is not None else torch.zeros_like(flat[r]) for r, p in enumerate(partner)]

    def _apply(self, deltas: list[torch.Tensor]) -> None:
        for ps, delta in zip(self.params, deltas, strict=True):
            at = 0
            for t in ps:
                t.add_(delta[at:at + t.numel()].view_as(t), alpha=GOSSIP_WEIGHT)
                at += t.numel()

    def end_epoch(self, model: nn.Module, epoch: int) -> None:
        """Pending averaging applied; every replica set to the mean (``global_average``), and the model
        holds the mean for the held-out set and the checkpoint."""
        super().end_epoch(model, epoch)
        if self._in_flight is not None:
            self._apply(self._in_flight[1])
            self._in_flight = None
        self.epoch_spread = self.rms_spread()
        mean = self.mean()
        if self.sim.global_average:
            for ps in self.params:
                for t, m in zip(ps, mean, strict=True):
                    t.copy_(m)
            mean = self.params[0]
        for p, m in zip(model.parameters(), mean, strict=True):
            p.data = m
        self.stats.update(rounds=self.rounds, replicas=self.n)
        self.spread.append(self.rms_spread())


class SimTrainer(Trainer):
    """The real trainer, whose step is every replica's step on its slice of the job's batch."""

    def __init__(self, cfg: TrainConfig, sim: SimConfig) -> None:
        if cfg.batch % sim.learners:
            raise ConfigError(f"batch {cfg.batch} does not split evenly over {sim.learners} simulated learners")
        self.sim = sim
        self.sim_strategy = SimStrategy(sim)
        super().__init__(cfg, self.sim_strategy)

    def _restore(self) -> None:
        """The trainer's resume, then the replicas: fresh copies of the model, or the checkpoint's."""
        super()._restore()
        self.sim_strategy.init_replicas(self.model, self.cfg.seed)
        for p, t in zip(self.model.parameters(), self.sim_strategy.params[0], strict=True):
            p.data = t

    def end_epoch(self, epoch: int, row: dict[str, Any], stop_after: bool) -> None:
        """The epoch row also says how far the replicas had drifted apart before any global average."""
        if self.sim_strategy.n > 1:
            row["spread"] = self.sim_strategy.epoch_spread
        super().end_epoch(epoch, row, stop_after)

    def slices(self, batch: DeviceBatch) -> list[DeviceBatch | None]:
        """The job's batch cut per replica: each learner ``batch/learners`` chunks, a super-learner its members'.

        The loader's batches carry over its blocks, so each holds ``--batch`` chunks and
        every replica gets its full slice; the epoch's last, shorter batch is cut evenly
        (a replica sits out only when it has fewer chunks than replicas).
        """
        per = -(-len(batch.y) // self.sim_strategy.n)  # = batch/learners · learners per replica on a full batch
        out: list[DeviceBatch | None] = []
        for r in range(self.sim_strategy.n):
            x, y = batch.x[r * per:(r + 1) * per], batch.y[r * per:(r + 1) * per]
            frames = int(real_frames(y)) if len(y) else 0
            out.append(DeviceBatch(x, y, frames) if frames else None)  # a learner with no data sits this step out
        return out

    def train_step(self, net: torch.nn.Module, batch: DeviceBatch, lr: float) -> None:
        step, strategy = self.step, self.sim_strategy
        strategy.in_replica = True
        try:
            for r, part in enumerate(self.slices(batch)):
                if part is None:
                    continue
                with strategy.replica(self.model, self.optimizer, r), \
                        strategy.stale_gradient(self.model, self.optimizer, r):
                    super().train_step(net, part, lr)
                self.step = step
        finally:
            strategy.in_replica = False
        self.step = step + 1
        strategy.after_step(self.model, self.step)


def simulate(cfg: TrainConfig, sim: SimConfig, hooks: Hooks | None = None,
             trainer_class: type[SimTrainer] | None = None) -> tuple[Any, SimStrategy]:
    """Train ``cfg`` with ``sim``'s simulated learners; (the trainer's result, the strategy's record)."""
    trainer = (trainer_class or SimTrainer)(cfg, sim)
    try:
        return trainer.fit(hooks), trainer.sim_strategy
    finally:
        trainer.strategy.close()

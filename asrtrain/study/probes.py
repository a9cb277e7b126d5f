"""What a study measures inside a run, beside the loss: the learners' spread and the sharpness.

The mechanism the IBM follow-up proposes (Zhang et al., arXiv 2112.01433) for decentralized
SGD training at rates where synchronous SGD diverges: the learners' disagreement is a noise
that depends on the loss landscape, and acts as a smaller step in sharp regions. So a run
records, every ``spread_every`` steps, the RMS distance of the replicas to their mean (a
``spread`` row of ``metrics.jsonl``, beside the step rows' loss), and optionally, every
``sharpness_every`` steps, the largest Hessian eigenvalue of the replicas' mean on a fixed
held-out batch (power iteration on Hessian-vector products), beside ``2(1 + momentum)/rate``:
heavy-ball SGD on a quadratic is stable only while ``rate · λ_max < 2(1 + momentum)``.

Rows are written at a step boundary before any checkpoint of that step, so a resumed run's
``metrics.jsonl`` reads as if it had never stopped.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from asrtrain.data.archive import Archive
from asrtrain.data.loader import IGNORE_INDEX
from asrtrain.train.hooks import Hooks
from asrtrain.train.step import frame_loss

if TYPE_CHECKING:
    from asrtrain.study.simulate import SimTrainer
    from asrtrain.train.trainer import Trainer


@dataclass(frozen=True)
class ProbeConfig:
    """How often a run measures its learners' spread and its sharpness (0: never)."""

    spread_every: int = 10
    sharpness_every: int = 0
    sharpness_chunks: int = 64      # the held-out batch of the Hessian
    sharpness_iters: int = 20       # power-iteration steps

    def __post_init__(self) -> None:
        from asrtrain.core.errors import ConfigError

        if min(self.spread_every, self.sharpness_every) < 0 or self.sharpness_chunks < 1 or self.sharpness_iters < 1:
            raise ConfigError("probe intervals must be >= 0, the sharpness batch and iterations >= 1")


def held_batch(archive: Archive, chunks: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """``chunks`` chunks spread evenly over the archive (a fixed batch: the same in every run and session)."""
    take = min(chunks, archive.num_chunks)
    starts = np.unique(np.linspace(0, archive.num_chunks - 1, take).round().astype(int))
    xs, ys = zip(*(archive.read_chunks(int(i), int(i) + 1) for i in starts), strict=True)
    x = torch.as_tensor(np.concatenate(xs)).to(device=device, dtype=torch.float32)
    y = torch.as_tensor(np.concatenate(ys)).to(device=device, dtype=torch.int64)
    y[y < 0] = IGNORE_INDEX
    return x, y


@contextlib.contextmanager
def averaged(trainer: SimTrainer) -> Iterator[torch.nn.Module]:
    """The trainer's model holding the replicas' mean, in eval mode; its own weights back afterwards."""
    model = trainer.model
    params = list(model.parameters())
    own = [p.data for p in params]
    for p, m in zip(params, trainer.sim_strategy.mean(), strict=True):
        p.data = m
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        for p, t in zip(params, own, strict=True):
            p.data = t
        model.train(was_training)


def loss_on(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 256) -> float:
    """Cross-entropy per real frame of ``model`` on a held batch (no gradient)."""
    total, frames = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(y), batch):
            loss_sum, n, _ = frame_loss(model(x[start:start + batch]), y[start:start + batch])
            total, frames = total + float(loss_sum), frames + int(n)
    return total / max(frames, 1)


def top_eigenvalue(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, iters: int, seed: int = 0) -> float:
    """The Hessian's largest eigenvalue (the most positive: the curvature that bounds a stable rate)
    of the loss per frame at ``model``'s weights.

    Power iteration: v ← Hv/|Hv| from a seeded random start (its own generator: the run's
    RNG is not touched), Hv by differentiating the gradient along v (torch.autograd double
    backward); the estimate is the Rayleigh quotient vᵀHv of the last v. Power iteration finds
    the eigenvalue of largest *magnitude*; where that is negative (a saddle's negative curvature
    dominates, as near a blow-up), a second run on H − λI, whose spectrum is then all ≥ 0, finds
    λ_max − λ.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    loss_sum, frames, _ = frame_loss(model(x), y)
    grads = torch.autograd.grad(loss_sum / max(int(frames), 1), params, create_graph=True)

    def hvp(v: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        return torch.autograd.grad(grads, params, grad_outputs=v, retain_graph=True)

    extreme = _power_iteration(hvp, params, iters, seed, shift=0.0)
    if not (math.isfinite(extreme) and extreme < 0):
        return extreme
    return _power_iteration(hvp, params, iters, seed, shift=extreme) + extreme


def _power_iteration(hvp: Callable[[list[torch.Tensor]], Sequence[torch.Tensor]],
                     params: Sequence[torch.Tensor], iters: int, seed: int, shift: float) -> float:
    """The eigenvalue of largest magnitude of H − shift·I (Rayleigh quotient of the last iterate)."""
    g = torch.Generator().manual_seed(seed)
    v = [torch.randn(p.shape, generator=g, dtype=p.dtype).to(p.device) for p in params]
    estimate = 0.0
    for _ in range(iters):
        norm = torch.sqrt(sum((t * t).sum() for t in v))  # type: ignore[arg-type]
        v = [t / norm for t in v]
        hv = [h - shift * t for h, t in zip(hvp(v), v, strict=True)]
        estimate = float(sum((a * b).sum() for a, b in zip(v, hv, strict=True)))
        v = [t.detach() for t in hv]
        if not math.isfinite(estimate):
            break
    return estimate


def stability_limit(lr: float, momentum: float) -> float:
    """The largest curvature heavy-ball SGD at ``lr`` is stable on: 2(1 + momentum)/lr."""
    return 2.0 * (1.0 + momentum) / lr if lr > 0 else math.inf


class Probes(Hooks):
    """``spread`` and ``sharpness`` rows in the run's ``metrics.jsonl`` (simulated runs only)."""

    def __init__(self, cfg: ProbeConfig) -> None:
        self.cfg = cfg
        self._held: tuple[torch.Tensor, torch.Tensor] | None = None

    def after_step(self, trainer: Trainer, x: Any, y: Any, lr: float) -> None:
        sim: SimTrainer = trainer  # type: ignore[assignment]
        if trainer.metrics is None:
            return
        step, epoch = trainer.step, trainer.epochs_done + 1
        every = self.cfg.spread_every
        if every and step % every == 0 and sim.sim_strategy.n > 1:
            trainer.metrics.write("spread", step=step, epoch=epoch, lr=lr, spread=sim.sim_strategy.spread[-1])
        every = self.cfg.sharpness_every
        if every and step % every == 0:
            trainer.metrics.write("sharpness", step=step, epoch=epoch, lr=lr, **self.sharpness(sim, lr))

    def sharpness(self, trainer: SimTrainer, lr: float) -> dict[str, float]:
        """λ_max of the replicas' mean on the held batch, the limit 2(1+μ)/lr, and their ratio."""
        if self._held is None:
            source = trainer.valid if trainer.valid is not None else trainer.archive
            self._held = held_batch(source, self.cfg.sharpness_chunks, trainer.device)
        with averaged(trainer) as model:
            lam = top_eigenvalue(model, *self._held, iters=self.cfg.sharpness_iters, seed=trainer.cfg.seed)
        limit = stability_limit(lr, trainer.cfg.momentum)
        return {"lambda_max": lam, "limit": limit, "ratio": lam / limit if math.isfinite(limit) else 0.0}


class Chain(Hooks):
    """Several observers of one run, called in order."""

    def __init__(self, *hooks: Hooks) -> None:
        self.hooks = hooks

    def start(self, trainer: Trainer) -> None:
        for h in self.hooks:
            h.start(trainer)

    def before_step(self, trainer: Trainer, step: int) -> None:
        for h in self.hooks:
            h.before_step(trainer, step)

    def after_step(self, trainer: Trainer, x: Any, y: Any, lr: float) -> None:
        for h in self.hooks:
            h.after_step(trainer, x, y, lr)

    def end_epoch(self, trainer: Trainer, row: dict[str, Any]) -> None:
        for h in self.hooks:
            h.end_epoch(trainer, row)

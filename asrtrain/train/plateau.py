"""Halve the learning rate when the held-out loss stops improving (``--lr-schedule plateau``).

The paper's schedule anneals by a fixed factor every epoch whatever the held-out set
says; on a small corpus that is either too slow or too fast. This is Kaldi nnet1's
"newbob" idea in the form of a reduce-on-plateau rule:

* the warm-up is the paper's (base rate to the scaled peak over ``warmup_epochs``);
* from the end of the warm-up on (epoch ``max(warmup_epochs, 1)``), each epoch's
  held-out loss is compared with the lowest one before it. An epoch that improves on
  it by more than ``threshold`` (relative: Kaldi's ``start_halving_impr`` is 1%)
  keeps the rate; one that does not halves it for the next epoch;
* with ``stop_after`` = K, a plateau met after K halvings ends training (early
  stopping); ``None`` trains every epoch asked for.

The decisions are a pure function of the held-out losses: :meth:`Plateau.advance`
folds one epoch's loss into a :class:`PlateauState`, :meth:`Plateau.replay` folds a
whole history. The trainer keeps the state in every checkpoint, so a resume goes on
with the decisions already taken; every learner decides on the main learner's
held-out loss, made the same number on all of them
(:func:`asrtrain.train.validate.main_value`), so they all agree on the rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from asrtrain.train.schedule import LRSchedule

if TYPE_CHECKING:
    from asrtrain.train.config import TrainConfig

HALVING = 0.5


@dataclass(frozen=True)
class PlateauState:
    """What the held-out losses so far decided: halvings, the lowest loss, whether to stop.

    ``decision`` is the last epoch's: ``warm-up``, ``first`` (no loss to compare with
    yet), ``keep``, ``halve`` or ``stop``.
    """

    halvings: int = 0
    best: float | None = None
    stop: bool = False
    decision: str = "none"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlateauState:
        return cls(**data)


def relative_improvement(best: float, loss: float) -> float:
    """How much lower ``loss`` is than ``best``, as a fraction of ``best`` (-inf for a non-finite loss)."""
    if not math.isfinite(loss):
        return -math.inf
    return (best - loss) / abs(best) if best else (math.inf if loss < best else 0.0)


@dataclass(frozen=True)
class Plateau:
    """The rate by epoch given the :class:`PlateauState` after the epoch before it."""

    warmup: LRSchedule
    threshold: float
    stop_after: int | None

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> Plateau:
        """The plateau schedule of a training config (its values live in TrainConfig)."""
        return cls(LRSchedule.from_config(cfg), cfg.plateau_threshold, cfg.plateau_stop)

    @property
    def first_decision(self) -> int:
        """The first epoch whose held-out loss can change the rate: the warm-up's last."""
        return max(self.warmup.warmup_epochs, 1)

    def advance(self, state: PlateauState, epoch: int, loss: float | None) -> PlateauState:
        """The state after ``epoch`` ended with held-out ``loss`` (pure: the same inputs, the same state)."""
        value = math.nan if loss is None else float(loss)
        best = value if state.best is None or (math.isfinite(value) and value < state.best) else state.best
        if epoch < self.first_decision:
            return PlateauState(state.halvings, best, False, "warm-up")
        if state.best is None:
            return PlateauState(state.halvings, best, False, "first")
        if relative_improvement(state.best, value) > self.threshold:
            return PlateauState(state.halvings, best, False, "keep")
        if self.stop_after is not None and state.halvings >= self.stop_after:
            return PlateauState(state.halvings, best, True, "stop")
        return PlateauState(state.halvings + 1, best, False, "halve")

    def replay(self, losses: Iterable[float | None]) -> PlateauState:
        """The state after epochs 1, 2, … ended with ``losses``."""
        state = PlateauState()
        for epoch, loss in enumerate(losses, 1):
            state = self.advance(state, epoch, loss)
        return state

    def lr(self, epoch: int, fraction: float, state: PlateauState) -> float:
        """The rate of ``epoch`` (after ``fraction`` of it) given the state after the epoch before it."""
        if epoch <= self.warmup.warmup_epochs:
            return self.warmup.lr(epoch, fraction)
        return self.warmup.peak_lr * HALVING ** state.halvings

    def describe(self) -> str:
        """The rule in one line (dry-run plan)."""
        stop = "never stops early" if self.stop_after is None else \
            f"stops at a plateau after {self.stop_after} halving(s)"
        return (f"peak {self.warmup.peak_lr:.4g} after the warm-up, halved whenever an epoch's held-out loss "
                f"improves on the best by {100 * self.threshold:g}% or less; {stop}")

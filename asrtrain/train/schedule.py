"""The papers' learning-rate recipe, as a pure function of the epoch.

A base rate is given for batch 256 (0.1). The peak rate scales it linearly to
the effective batch (batch 2560: 1.0). Training starts at the base rate and
rises linearly to the peak over the first ``warmup_epochs`` epochs (reaching it
at epoch ``warmup_epochs``), then anneals by ``anneal`` (1/sqrt(2)) per epoch.
The worked example: base 0.1, batch 2560, 10 warm-up epochs gives 0.1, 0.2, …,
1.0 for epochs 1..10, then 0.707, 0.5, … for epochs 11, 12, …

With ``granularity="step"`` the warm-up is interpolated within an epoch (the
rate at epoch e and fraction f lies between the rates of epochs e and e+1);
annealing stays per epoch. An effective batch below the base batch has a peak
below the base rate: it trains at its peak from the start (no warm-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from asrtrain.core.errors import ConfigError
from asrtrain.train.config import WARMUP_GRANULARITIES

if TYPE_CHECKING:
    from asrtrain.train.config import TrainConfig


@dataclass(frozen=True)
class LRSchedule:
    """Learning rate by (1-based) epoch and fraction of the epoch done.

    No defaults here: the paper's values are :class:`~asrtrain.train.config.TrainConfig`'s
    (:meth:`from_config`), so they live in one place.
    """

    base_lr: float
    batch: int
    base_batch: int
    warmup_epochs: int
    anneal: float
    granularity: str = "epoch"

    def __post_init__(self) -> None:
        if self.granularity not in WARMUP_GRANULARITIES:
            raise ConfigError(f"warm-up granularity must be one of {', '.join(WARMUP_GRANULARITIES)}, "
                              f"got {self.granularity!r}")

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> LRSchedule:
        """The schedule of a training config."""
        return cls(base_lr=cfg.lr, batch=cfg.batch, base_batch=cfg.base_batch,
                   warmup_epochs=cfg.warmup_epochs, anneal=cfg.anneal,
                   granularity=cfg.warmup_granularity)

    @property
    def peak_lr(self) -> float:
        """Linear scaling: the base rate times effective batch over base batch."""
        return self.base_lr * self.batch / self.base_batch

    @property
    def start_lr(self) -> float:
        """Where the warm-up starts: the base rate, or the peak when the batch is below the
        base batch (warming *down* to a smaller rate would make no sense)."""
        return min(self.base_lr, self.peak_lr)

    def _epoch_lr(self, epoch: float) -> float:
        n = self.warmup_epochs
        if n <= 1 or epoch >= n:
            past = max(0, int(epoch) - max(n, 1))
            return self.peak_lr * self.anneal ** past
        start = self.start_lr
        return start + (self.peak_lr - start) * (epoch - 1) / (n - 1)

    def lr(self, epoch: int, fraction: float = 0.0) -> float:
        """The rate for ``epoch`` (1-based) after ``fraction`` (0..1) of it is done."""
        if epoch < 1:
            raise ValueError(f"epochs are numbered from 1, got {epoch}")
        if self.granularity == "epoch" or epoch >= self.warmup_epochs:
            return self._epoch_lr(epoch)
        return self._epoch_lr(epoch + min(max(fraction, 0.0), 1.0))

    def table(self, epochs: int) -> list[float]:
        """The rate at the start of each epoch 1..epochs (for plans and logs)."""
        return [self.lr(e) for e in range(1, epochs + 1)]


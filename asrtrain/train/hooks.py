"""Observers of the training loop: what tests and benchmarks see of a real run.

The loop calls a :class:`Hooks` object at fixed points; the default does nothing.
Tests record the batches and weights of each learner through it (SSGD equals one
learner, gossip keeps the mean), or stop a learner at a chosen step, so the
properties are proven for the loop that ``asrtrain train`` runs, not for a copy.
A hooks object crosses to spawned workers: define subclasses at module level.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

#: The loop a hook observes (``Trainer``): a type parameter, so that this module, which the
#: trainer imports, names nothing of the trainer's.
Loop = TypeVar("Loop")


class Hooks(Generic[Loop]):
    """Called by :meth:`asrtrain.train.trainer.Trainer.fit`; override what you need."""

    def start(self, trainer: Loop) -> None:
        """After the strategy wrapped the model (identical weights everywhere), before the first step."""

    def before_step(self, trainer: Loop, step: int) -> None:
        """Before step ``step`` (1-based over the run) computes."""

    def after_step(self, trainer: Loop, x: Any, y: Any, lr: float) -> None:
        """After the optimizer step and the strategy's after-step (gossip applied)."""

    def end_epoch(self, trainer: Loop, row: dict[str, Any]) -> None:
        """After the epoch's checkpoint, with the epoch row (every learner has it)."""

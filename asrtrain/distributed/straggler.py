"""A test knob: one learner made slower than the rest (tests and benches).

Work sharing and gossip are there so that a slow learner does not hold the others
back; a straggler on demand is how the tests and benches show it.
"""

from __future__ import annotations

import time

from asrtrain.distributed.config import DistConfig


class Straggler:
    """``straggler_rank`` sleeps ``straggler_factor - 1`` times its compute time after each step."""

    def __init__(self, cfg: DistConfig, rank: int) -> None:
        self.cfg, self.rank = cfg, rank
        self.last_t: float | None = None  # when the last step ended (None: none yet this epoch)

    def after_step(self) -> None:
        """Sleep in proportion to the time since the last step ended, if this learner is the straggler."""
        now = time.perf_counter()
        if self.cfg.straggler_rank == self.rank and self.last_t is not None and self.cfg.straggler_factor > 1:
            time.sleep((self.cfg.straggler_factor - 1.0) * (now - self.last_t))
        self.last_t = time.perf_counter()

    def new_epoch(self) -> None:
        """The time between epochs (validation, checkpoints) is not compute: do not stretch it."""
        self.last_t = None

"""TensorBoard event files beside ``metrics.jsonl``: the same rows, for ``tensorboard --logdir``.

Users of torchtitan, icefall and ESPnet watch training in TensorBoard. Every row the
main learner writes to ``metrics.jsonl`` is also written as scalars under
``EXP/tensorboard/`` (torch's SummaryWriter, which writes from a thread of its own, so a
step pays for queueing a few numbers, ~50 µs each), keyed by the step: step rows as
``train/loss``, ``train/lr``, ``train/frames_per_s``; epoch rows as ``epoch/<name>``;
per-learner lists (held-out loss, wait at the epoch's end, gossip rounds and time) as
one curve per learner, ``<name>/learner<r>``. A resumed run purges the events after
its checkpoint's step, as ``metrics.jsonl`` drops its rows, so the curves read as if the
run had never stopped.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

log = logging.getLogger("asrtrain.train")

#: Where the event files go, under the experiment directory.
EVENTS_DIR = "tensorboard"
#: Row fields that are not figures.
_NOT_FIGURES = {"kind", "time", "step", "epoch"}


class EventSink:
    """Scalars of each metrics row in TensorBoard's event files."""

    def __init__(self, exp: Path, resume_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(Path(exp) / EVENTS_DIR),
                                    purge_step=resume_step + 1 if resume_step else None)

    def write(self, row: dict[str, Any]) -> None:
        kind, step = row.get("kind"), row.get("step")
        if kind not in ("step", "epoch") or not isinstance(step, int):
            return
        prefix = "train" if kind == "step" else "epoch"
        for name, value in row.items():
            if name in _NOT_FIGURES:
                continue
            if isinstance(value, list):
                base = name.removesuffix("_by_learner")
                for rank, v in enumerate(value):
                    if _number(v):
                        self.writer.add_scalar(f"{base}/learner{rank}", v, step)
            elif _number(value):
                self.writer.add_scalar(f"{prefix}/{name}", value, step)

    def close(self) -> None:
        self.writer.close()


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def open_sink(exp: Path, enabled: bool, resume_step: int | None = None) -> EventSink | None:
    """The sink, or None when turned off (``--no-tensorboard``) or TensorBoard is missing."""
    if not enabled:
        return None
    try:
        return EventSink(exp, resume_step)
    except ImportError as exc:  # torch.utils.tensorboard needs the tensorboard package
        log.warning("TensorBoard event files not written (%s): pip install tensorboard", exc)
        return None

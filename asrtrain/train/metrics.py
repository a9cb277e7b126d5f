"""``metrics.jsonl``: one JSON row every K steps and one per epoch.

Step rows (``"kind": "step"``): step, epoch, lr, mean training loss over the
last K steps, real (unpadded) frames per second of this learner (:class:`StepWindow`). Epoch rows
(``"kind": "epoch"``): the epoch's training loss and frame accuracy summed over
all learners, the held-out loss and frame accuracy, the learning rate and the
wall time (under ``--lr-schedule plateau`` also the rate's decision for the next
epoch). The last row (``"kind": "select"``) says which epoch(s) ``final.pt`` was made
of (``--select``). On resume the rows after the checkpoint (written by the killed
run), a row the kill cut off, and the select row are dropped, so the file reads as if
the run had never stopped.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from asrtrain.core.atomic import write_text
from asrtrain.core.journal import read_jsonl
from asrtrain.core.progress import Progress


class MetricsLog:
    """Appends rows to ``metrics.jsonl`` (flushed per row: readable while training)."""

    def __init__(self, path: Path, resume_epoch: int | None = None, resume_step: int | None = None,
                 events: Any = None) -> None:
        self.path = Path(path)
        self.events = events  # an EventSink (train/events.py): the rows also for TensorBoard
        rows = read_metrics(self.path) if resume_epoch is not None and self.path.exists() else []
        kept = [r for r in rows if _kept(r, resume_epoch or 0, resume_step)]
        write_text(self.path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
        self._handle = open(self.path, "a", encoding="utf-8")

    def write(self, kind: str, **values: Any) -> dict[str, Any]:
        row = {"kind": kind, "time": round(time.time(), 3), **{k: _plain(v) for k, v in values.items()}}
        self._handle.write(json.dumps(row, sort_keys=True) + "\n")
        self._handle.flush()
        if self.events is not None:
            self.events.write(row)
        return row

    def close(self) -> None:
        self._handle.close()
        if self.events is not None:
            self.events.close()

    def __enter__(self) -> MetricsLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EpochBar:
    """The epoch's progress bar: steps, or under work sharing the blocks handed out to all learners.

    Shown by the main learner; the others log its line at the interval only.
    """

    def __init__(self, strategy: Any, epoch: int, epochs: int, steps: int, num_blocks: int) -> None:
        self.strategy = strategy
        shared = strategy.blocks_handed_out() is not None
        total, unit = (num_blocks, " blocks") if shared else (steps, " steps")
        self.bar = Progress(f"epoch {epoch}/{epochs}", total=total, unit=unit,
                            enabled=None if strategy.is_main else False)

    def __enter__(self) -> EpochBar:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.__exit__(*exc)

    def show(self, step: int, lr: float | None = None, loss: float = 0.0, frames: float = 0.0,
             seconds: float = 0.0) -> None:
        """After a step (``lr`` given): the step, the rate, the last loss read and this learner's frames/s."""
        fields: dict[str, Any] = {} if lr is None else {"step": step, "lr": lr,
                                                         "fps": f"{frames / max(seconds, 1e-9):.0f}"}
        if loss:
            fields["loss"] = loss
        handed_out = self.strategy.blocks_handed_out()
        if handed_out is not None:
            self.bar.set_done(handed_out, **fields)
        elif lr is not None:
            self.bar.advance(1, **fields)


class StepWindow:
    """The training loss and speed of this learner over the steps since the last step row."""

    def __init__(self) -> None:
        self.loss_sum, self.frames, self.start = 0.0, 0, time.perf_counter()

    def add(self, loss_sum: float, frames: int) -> None:
        self.loss_sum += loss_sum
        self.frames += frames

    def row(self, step: int, epoch: int, lr: float) -> dict[str, Any]:
        """The step row's values, and a new window from now."""
        now = time.perf_counter()
        row = {"step": step, "epoch": epoch, "lr": lr, "loss": self.loss_sum / max(self.frames, 1),
               "frames_per_s": self.frames / max(now - self.start, 1e-9)}
        self.loss_sum, self.frames, self.start = 0.0, 0, now
        return row


def epoch_row(epoch: int, step: int, lr: float, sums: list[float], seconds: float) -> dict[str, Any]:
    """The epoch row's training figures from the learners' summed [loss, frames, correct, steps]."""
    loss_sum, frames, correct, steps = sums[:4]
    return {"epoch": epoch, "step": step, "lr": lr, "train_loss": loss_sum / max(frames, 1),
            "train_acc": correct / max(frames, 1), "train_frames": int(frames),
            "learner_steps": int(steps), "seconds": seconds,
            "frames_per_s": frames / max(seconds, 1e-9)}


def epoch_summary(row: dict[str, Any]) -> str:
    """One readable log line for an epoch row."""
    text = f"epoch {row['epoch']}: train loss {row['train_loss']:.4f} acc {100 * row['train_acc']:.1f}%"
    if "valid_loss" in row:
        text += f" | held-out loss {row['valid_loss']:.4f} acc {100 * row['valid_acc']:.1f}%"
    if "valid_loss_by_learner" in row:
        by = row["valid_loss_by_learner"]
        text += f" (learners {min(by):.4f}-{max(by):.4f})"
    return (text + f" | lr {row['lr']:.4g} | {row['frames_per_s']:,.0f} frames/s | "
            f"{row['seconds']:.1f} s, step {row['step']}")


def _kept(row: dict[str, Any], epochs_done: int, step: int | None) -> bool:
    """Rows written before the checkpoint a run resumes from: epochs done, and steps up to its step.
    The final model's selection row goes: the resumed run writes its own at its end."""
    if row.get("kind") == "select":
        return False
    if row.get("kind") != "epoch" and step is not None and "step" in row:
        return int(row["step"]) <= step
    return int(row.get("epoch", 0)) <= epochs_done


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "item"):
        return value.item()
    return value


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """All rows of a ``metrics.jsonl``: a row cut off by a killed run is dropped with a warning (the
    rerun goes on); a malformed line before the last is an error naming the line. Non-finite
    numbers, which JSON cannot hold and :func:`_plain` writes as ``"nan"``/``"inf"``, come back as
    floats (a diverged run's losses would otherwise reach sums and plots as strings)."""
    return [{k: _NON_FINITE.get(v, v) if isinstance(v, str) else v for k, v in row.items()}
            for row in read_jsonl(path)]


#: How :func:`_plain` writes a non-finite float, back to the float.
_NON_FINITE = {str(v): v for v in (math.nan, math.inf, -math.inf)}


def epoch_rows(path: Path) -> list[dict[str, Any]]:
    """The per-epoch rows, in epoch order."""
    return sorted((r for r in read_metrics(path) if r.get("kind") == "epoch"),
                  key=lambda r: r["epoch"])

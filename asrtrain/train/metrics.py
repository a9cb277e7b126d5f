"""``metrics.jsonl``: one JSON row every K steps and one per epoch.

Step rows (``"kind": "step"``): step, epoch, lr, mean training loss over the
last K steps, real (unpadded) frames per second of this learner. Epoch rows
(``"kind": "epoch"``): the epoch's training loss and frame accuracy summed over
all learners, the held-out loss and frame accuracy, the learning rate and the
wall time. On resume the rows after the resumed epoch (written by the killed
run) are dropped, so the file reads as if the run had never stopped.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from asrtrain.core.atomic import write_text
from asrtrain.core.errors import InputError


class MetricsLog:
    """Appends rows to ``metrics.jsonl`` (flushed per row: readable while training)."""

    def __init__(self, path: Path, resume_epoch: int | None = None) -> None:
        self.path = Path(path)
        rows = read_metrics(self.path) if resume_epoch is not None and self.path.exists() else []
        kept = [r for r in rows if _row_epoch(r) <= (resume_epoch or 0)]
        write_text(self.path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
        self._handle = open(self.path, "a", encoding="utf-8")

    def write(self, kind: str, **values: Any) -> dict[str, Any]:
        row = {"kind": kind, "time": round(time.time(), 3), **{k: _plain(v) for k, v in values.items()}}
        self._handle.write(json.dumps(row, sort_keys=True) + "\n")
        self._handle.flush()
        return row

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> MetricsLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _row_epoch(row: dict[str, Any]) -> int:
    """Epoch rows belong to their epoch; a step row of epoch e belongs to the run of epoch e."""
    return int(row.get("epoch", 0))


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if hasattr(value, "item"):
        return value.item()
    return value


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """All rows of a ``metrics.jsonl``; a malformed line is an error naming the line."""
    path = Path(path)
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"line {number}: not JSON ({exc.msg})", path) from None
    return rows


def epoch_rows(path: Path) -> list[dict[str, Any]]:
    """The per-epoch rows, in epoch order."""
    return sorted((r for r in read_metrics(path) if r.get("kind") == "epoch"),
                  key=lambda r: r["epoch"])

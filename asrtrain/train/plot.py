"""Loss against epoch for one or several runs: the picture of the paper's Figure 2.

Reads each run's ``metrics.jsonl`` epoch rows and draws the training loss
(solid) and held-out loss (dashed) per run on one axis, and the held-out frame
accuracy on a second, with matplotlib's Agg backend (no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asrtrain.core.atomic import atomic_path
from asrtrain.core.errors import InputError
from asrtrain.train.metrics import epoch_rows


def load_runs(exps: list[Path], labels: list[str] | None = None) -> list[tuple[str, list[dict[str, Any]]]]:
    """(label, epoch rows) per experiment dir; a run without epoch rows is an error naming it."""
    if labels is not None and len(labels) != len(exps):
        raise InputError(f"{len(labels)} labels for {len(exps)} runs")
    runs = []
    for i, exp in enumerate(exps):
        path = Path(exp) / "metrics.jsonl"
        if not path.is_file():
            raise InputError("no metrics.jsonl (not a training run?)", exp)
        rows = epoch_rows(path)
        if not rows:
            raise InputError("no complete epoch yet", path)
        runs.append((labels[i] if labels else Path(exp).name, rows))
    return runs


def plot_runs(exps: list[Path], out: Path, labels: list[str] | None = None,
              title: str | None = None) -> Path:
    """Write a PNG of loss (and held-out accuracy when present) against epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = load_runs(exps, labels)
    has_acc = any("valid_acc" in r for _, rows in runs for r in rows)
    fig, axes = plt.subplots(1, 2 if has_acc else 1, figsize=(11 if has_acc else 6, 4.2), squeeze=False)
    loss_ax = axes[0][0]
    for index, (label, rows) in enumerate(runs):
        color = f"C{index % 10}"
        epochs = [r["epoch"] for r in rows]
        loss_ax.plot(epochs, [r["train_loss"] for r in rows], "-o", color=color, ms=3,
                     label=f"{label} train")
        held = [(r["epoch"], r["valid_loss"]) for r in rows if "valid_loss" in r]
        if held:
            loss_ax.plot(*zip(*held, strict=True), "--s", color=color, ms=3, label=f"{label} held-out")
        if has_acc:
            acc = [(r["epoch"], 100 * r["valid_acc"]) for r in rows if "valid_acc" in r]
            if acc:
                axes[0][1].plot(*zip(*acc, strict=True), "--s", color=color, ms=3, label=label)
    loss_ax.set_xlabel("epoch")
    loss_ax.set_ylabel("cross-entropy per frame")
    loss_ax.grid(alpha=0.3)
    loss_ax.legend(fontsize=8)
    if has_acc:
        axes[0][1].set_xlabel("epoch")
        axes[0][1].set_ylabel("held-out frame accuracy (%)")
        axes[0][1].grid(alpha=0.3)
        axes[0][1].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(out)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    return out

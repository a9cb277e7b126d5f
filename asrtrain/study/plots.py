"""The studies' figures, drawn from the runs' records and ``metrics.jsonl`` (matplotlib, Agg).

* held-out loss by epoch, one panel per strategy, a curve per batch (its best rate);
* the papers' Fig. 2 in summary: each strategy's best held-out loss against the batch, the
  baseline's margin as a band, the largest batch within it marked; beside it the held-out
  curves of each strategy's largest batch within the margin against the baseline;
* the learners' spread beside the loss over training (``spread``, ``step`` and
  ``sharpness`` rows), and the spread at each epoch's end before any global average;
* the range test: held-out loss and spread against the rate.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from asrtrain.core.atomic import atomic_path
from asrtrain.train.metrics import read_metrics

STYLE = {"ssgd": ("tab:blue", "o"), "adpsgd": ("tab:orange", "s"), "h-adpsgd": ("tab:green", "^")}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, png: Path) -> Path:
    png.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    _plt().close(fig)
    return png


def _held(record: dict[str, Any]) -> tuple[list[int], list[float]]:
    rows = [(r["epoch"], r["valid_loss"]) for r in record["history"]
            if isinstance(r.get("valid_loss"), (int, float)) and math.isfinite(r["valid_loss"])]
    return [e for e, _ in rows], [v for _, v in rows]


def plot_heldout_by_epoch(records: list[dict[str, Any]], baseline: str, png: Path) -> Path:
    """One panel per strategy: held-out loss by epoch, a curve per batch; the baseline dashed in each."""
    plt = _plt()
    base = next(r for r in records if r["name"] == baseline)
    strategies = list(dict.fromkeys(r["strategy"] for r in records))
    fig, axes = plt.subplots(1, len(strategies), figsize=(5.2 * len(strategies), 4), squeeze=False, sharey=True)
    for ax, strategy in zip(axes[0], strategies, strict=True):
        runs = sorted((r for r in records if r["strategy"] == strategy), key=lambda r: r["batch"])
        for i, r in enumerate(runs):
            label = f"batch {r['batch']} ×{r.get('multiplier', 1):g}" + (" (diverged)" if r.get("diverged") else "")
            ax.plot(*_held(r), "-o", ms=3, color=f"C{i % 10}", label=label)
        ax.plot(*_held(base), "--", color="black", label=f"baseline ({baseline})")
        ax.set(title=strategy.upper(), xlabel="epoch")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("held-out cross-entropy per frame")
    fig.tight_layout()
    return _save(fig, png)


def plot_largest_batch(summary: dict[str, Any], margin: float, records: list[dict[str, Any]], png: Path) -> Path:
    """Best held-out loss by batch per strategy against the margin; the largest batches' curves."""
    plt = _plt()
    fig, (ax, curves) = plt.subplots(1, 2, figsize=(11, 4))
    base_loss = summary["baseline_loss"]
    ax.axhspan(base_loss, summary["limit"], color="grey", alpha=0.25, label=f"baseline + {100 * margin:g}%")
    for strategy in dict.fromkeys(r["strategy"] for r in summary["rows"]):
        colour, marker = STYLE.get(strategy, ("tab:red", "x"))
        rows = [r for r in summary["rows"] if r["strategy"] == strategy]
        finite = [r for r in rows if math.isfinite(r["best_valid_loss"])]
        ax.plot([r["batch"] for r in finite], [r["best_valid_loss"] for r in finite], marker=marker, color=colour,
                label=strategy.upper())
        largest = summary["largest_batch"].get(strategy)
        if largest is not None:
            row = next(r for r in rows if r["batch"] == largest)
            ax.plot([largest], [row["best_valid_loss"]], "o", ms=12, mfc="none", color=colour)
            run = next((r for r in records if r["name"] == row["best_run"]), None)
            if run is not None:
                curves.plot(*_held(run), "-", marker=marker, color=colour, label=f"{strategy.upper()} batch {largest}")
    base = next((r for r in records if r["name"] == summary["baseline"]), None)
    if base is not None:
        curves.plot(*_held(base), "--", color="black", label="baseline")
    ax.set(xscale="log", xlabel="batch (chunks a step)", ylabel="best held-out loss",
           title="best over the rate grid (circled: largest within the margin)")
    ax.set_xscale("log", base=2)
    curves.set(xlabel="epoch", ylabel="held-out loss", title="largest batch within the margin")
    for a in (ax, curves):
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, png)


def _rows(exp: Path, kind: str) -> list[dict[str, Any]]:
    path = exp / "metrics.jsonl"
    return [r for r in read_metrics(path) if r.get("kind") == kind] if path.is_file() else []


def plot_spread(records: list[dict[str, Any]], runs: Path, png: Path) -> Path:
    """Per run: the training loss (step rows) and the learners' spread over the steps, the spread at each
    epoch's end before averaging, and λ_max · rate / 2(1+μ) where sharpness was measured."""
    plt = _plt()
    sharp = {r["name"]: _rows(runs / r["name"], "sharpness") for r in records}
    panels = 3 if any(sharp.values()) else 2
    fig, axes = plt.subplots(panels, 1, figsize=(8, 2.6 * panels), sharex=True, squeeze=False)
    loss_ax, spread_ax = axes[0][0], axes[1][0]
    for i, r in enumerate(records):
        colour = f"C{i % 10}"
        steps = _rows(runs / r["name"], "step")
        spread = _rows(runs / r["name"], "spread")
        loss_ax.plot([s["step"] for s in steps], [s["loss"] for s in steps], color=colour, label=r["name"])
        spread_ax.plot([s["step"] for s in spread], [s["spread"] for s in spread], color=colour)
        ends = [(h["step"], h["spread"]) for h in r["history"] if h.get("spread")]
        if ends:
            spread_ax.plot(*zip(*ends, strict=True), "o", ms=4, color=colour)
        if panels == 3 and sharp[r["name"]]:
            axes[2][0].plot([s["step"] for s in sharp[r["name"]]], [s["ratio"] for s in sharp[r["name"]]],
                            "-o", ms=3, color=colour)
    loss_ax.set(ylabel="training loss")
    spread_ax.set(ylabel="RMS spread of the replicas", yscale="log")
    if panels == 3:
        axes[2][0].axhline(1.0, color="black", lw=0.8, ls="--")
        axes[2][0].set(ylabel="λ_max · rate / 2(1+μ)")
    axes[-1][0].set_xlabel("step (dots: each epoch's end, before averaging)")
    for row in axes:
        row[0].grid(alpha=0.3)
    if records:
        loss_ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, png)


def plot_range(records: list[dict[str, Any]], png: Path) -> Path:
    """Held-out loss and spread against the rate, a line per run (colour: strategy; dashed: no clipping), and
    λ_max · rate / 2(1+μ) where the sharpness probe ran (above 1: heavy-ball SGD unstable on that curvature)."""
    plt = _plt()
    sharp = any(r.get("sharpness") for r in records)
    fig, axes = plt.subplots(1, 3 if sharp else 2, figsize=(16 if sharp else 11, 4))
    loss_ax, spread_ax = axes[0], axes[1]
    for r in records:
        rows = [x for x in r.get("range", [])[1:] if isinstance(x["valid_loss"], (int, float))]
        if sharp and r.get("sharpness"):
            colour, marker = STYLE.get(r["strategy"], ("tab:red", "x"))
            axes[2].plot([x["lr"] for x in r["sharpness"]], [x["ratio"] for x in r["sharpness"]],
                         "-" if r.get("clip") else "--", marker=marker, ms=3, color=colour)
        colour, marker = STYLE.get(r["strategy"], ("tab:red", "x"))
        style = "-" if r.get("clip") else "--"
        label = f"{r['strategy']} clip {r.get('clip', 0):g} seed {r.get('seed', 0)}"
        loss_ax.plot([x["lr"] for x in rows], [min(x["valid_loss"], 50.0) for x in rows], style, marker=marker,
                     ms=3, color=colour, label=label)
        if r["strategy"] != "ssgd":
            spread_ax.plot([x["lr"] for x in rows], [x["spread"] for x in rows], style, marker=marker, ms=3,
                           color=colour, label=label)
    from matplotlib.ticker import NullFormatter

    loss_ax.set(xlabel="rate", ylabel="held-out loss (capped at 50)", title="range test")
    spread_ax.set(yscale="log", xlabel="rate", ylabel="RMS spread of the replicas")
    if sharp:
        axes[2].axhline(1.0, color="black", lw=0.8, ls="--")
        axes[2].set(yscale="log", xlabel="rate", ylabel="λ_max · rate / 2(1+μ) (replicas' mean)")
    for a in axes:
        a.set_xscale("log", base=2)
        a.xaxis.set_minor_formatter(NullFormatter())
        a.grid(alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=6)
    fig.tight_layout()
    return _save(fig, png)

"""The batch claim (INTERSPEECH 2019, Fig. 2): how large a batch each strategy trains at, rates tuned.

With 16 learners SSGD converged up to batch 2560 on SWB-300 and ADPSGD up to 8192, each
with its rate tuned. Here every strategy, at every batch, trains at a small grid of peak
rates around the linear-scaling rule (``multiplier · lr · batch / base_batch``, warmed up
from ``multiplier · lr``): the claim lives where SSGD starts to diverge, so the grid goes
above the rule too. SSGD over any number of learners is one learner at the total batch
(the mechanism tests prove it for the real SSGD): it runs as one replica, and SSGD at the
base batch is the baseline (the best over its grid). Per strategy and batch the report
gives the best run, whether it is within ``margin`` of the baseline's best held-out loss,
and the largest peak rate that still trains; per strategy the largest batch within the
margin (the papers' Fig. 2).

A run *trains* when its losses stay finite, its last held-out loss is not above its first
epoch's, its best is below ln(pdfs) (the uniform guess), and no epoch's held-out loss rose to
``BLOWUP`` times the best before it: it learned and never blew up. A run that blew up and came
back (ADPSGD at 512, twice the rule's rate: 2.27 after epoch 1, 64 in epoch 3, 2.01 at the end)
does not train at that rate; a bump while warm-up raises the rate (the baseline at ×4: 0.959,
then 1.000) is not a blow-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from asrtrain.core.atomic import write_text
from asrtrain.study.probes import ProbeConfig
from asrtrain.study.runs import Runner, RunSpec, write_json
from asrtrain.study.simulate import SimConfig
from asrtrain.train.config import TrainConfig


@dataclass(frozen=True)
class BatchGrid:
    """What the batch study trains: strategies × batches × peak-rate multipliers."""

    strategies: tuple[str, ...]
    batches: tuple[int, ...]          # total chunks a step (the base batch is always added)
    multipliers: tuple[float, ...]    # × the linear-scaling peak rate
    learners: int = 16
    group: int = 1                    # H-ADPSGD: learners per super-learner
    margin: float = 0.02
    global_average: bool = True


def run_name(strategy: str, batch: int, multiplier: float) -> str:
    return f"{strategy}-{batch}-x{multiplier:g}"


def batch_specs(base: TrainConfig, grid: BatchGrid, probes: ProbeConfig) -> list[RunSpec]:
    """The baseline's grid first (SSGD at the base batch), then every strategy, listed batch and multiplier
    (gossip at the base batch only when it is listed: 16 learners of one chunk each cost 4× a learner's step)."""
    specs = []
    for strategy in ("ssgd", *(s for s in grid.strategies if s != "ssgd")):
        if strategy == "ssgd":  # the baseline always; SSGD's other batches when asked for
            batches = sorted(set(grid.batches) | {base.base_batch}) if "ssgd" in grid.strategies else [base.base_batch]
        else:
            batches = sorted(set(grid.batches))
        for batch in batches:
            for m in grid.multipliers:
                # SSGD is one replica: nothing to average, so its spec (and a baseline copied from a
                # study with the global average) is the same either way
                sim = SimConfig(strategy, learners=1 if strategy == "ssgd" else grid.learners,
                                group_size=grid.group if strategy == "h-adpsgd" else 1,
                                global_average=grid.global_average or strategy == "ssgd")
                cfg = replace(base, batch=batch, lr=base.lr * m)
                specs.append(RunSpec(run_name(strategy, batch, m), cfg, sim, probes,
                                     extra={"multiplier": m, "role": "baseline" if strategy == "ssgd"
                                            and batch == base.base_batch else "grid"}))
    return specs


BLOWUP = 1.5  # a held-out loss this many times the best before it is a blow-up


def trains(record: dict[str, Any], num_pdfs: int) -> bool:
    """Finite losses, the last not above the first, the best below the uniform guess, no blow-up."""
    losses = [r.get("valid_loss") for r in record["history"]]
    if record.get("diverged") or not losses or not all(isinstance(v, (int, float)) and math.isfinite(v)
                                                       for v in losses):
        return False
    blew_up = any(v > BLOWUP * min(losses[:i]) for i, v in enumerate(losses) if i)
    return losses[-1] <= losses[0] and record["best_valid_loss"] < math.log(num_pdfs) and not blew_up


def summarize(records: list[dict[str, Any]], base_batch: int, grid: BatchGrid, num_pdfs: int) -> dict[str, Any]:
    """Rows per strategy and batch (best run, within margin, largest rate that trains) and the verdicts."""
    baseline_runs = [r for r in records if r["strategy"] == "ssgd" and r["batch"] == base_batch]
    baseline = min(baseline_runs, key=lambda r: r["best_valid_loss"])
    limit = baseline["best_valid_loss"] * (1 + grid.margin)
    rows = []
    for strategy in dict.fromkeys(r["strategy"] for r in records):
        for batch in sorted({r["batch"] for r in records if r["strategy"] == strategy}):
            runs = [r for r in records if r["strategy"] == strategy and r["batch"] == batch]
            best = min(runs, key=lambda r: r["best_valid_loss"])
            training = [r for r in runs if trains(r, num_pdfs)]
            rows.append({"strategy": strategy, "batch": batch, "best_run": best["name"],
                         "best_multiplier": best["multiplier"], "best_valid_loss": best["best_valid_loss"],
                         "within_margin": best["best_valid_loss"] <= limit,
                         "largest_training_lr": max((r["peak_lr"] for r in training), default=None),
                         "largest_training_multiplier": max((r["multiplier"] for r in training), default=None),
                         "diverged": [r["multiplier"] for r in runs if not trains(r, num_pdfs)],
                         "seconds": sum(r["seconds"] for r in runs)})
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    largest = {s: max((r["batch"] for r in rows if r["strategy"] == s and r["within_margin"]), default=None)
               for s in strategies}
    largest_rate = {s: max((r["largest_training_lr"] for r in rows if r["strategy"] == s
                            and r["largest_training_lr"] is not None), default=None) for s in strategies}
    return {"baseline": baseline["name"], "baseline_loss": baseline["best_valid_loss"], "limit": limit,
            "rows": rows, "largest_batch": largest, "largest_training_lr": largest_rate}


def report(summary: dict[str, Any], grid: BatchGrid, base: TrainConfig, chunks: int) -> str:
    """``batch.md``: the table, the verdict lines, the plots."""
    batches = sorted({r["batch"] for r in summary["rows"]})
    lines = [f"# Batch study: {grid.learners} simulated learners, {base.epochs} epochs\n",
             f"Baseline: one learner at batch {base.base_batch} ({summary['baseline']}), best held-out loss "
             f"{summary['baseline_loss']:.4f}; margin {100 * grid.margin:g}% (≤ {summary['limit']:.4f}). Peak "
             f"rates: multiplier × {base.lr:g} × batch/{base.base_batch}, warmed up over {base.warmup_epochs} "
             f"epoch(s). Global average at each epoch's end: {'yes' if grid.global_average else 'no'}. "
             f"Full steps an epoch: " + ", ".join(f"batch {b}: {chunks // b}" for b in batches) + ".\n",
             "| strategy | batch | best run | best held-out loss | within margin | largest rate that trains "
             "(× rule) | did not train | minutes |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in summary["rows"]:
        rate = "-" if r["largest_training_lr"] is None else \
            f"{r['largest_training_lr']:.4g} (×{r['largest_training_multiplier']:g})"
        lines.append(f"| {r['strategy']} | {r['batch']} | {r['best_run']} | {r['best_valid_loss']:.4f} | "
                     f"{'yes' if r['within_margin'] else 'no'} | {rate} | "
                     f"{', '.join(f'×{m:g}' for m in r['diverged']) or '-'} | {r['seconds'] / 60:.0f} |")
    lines.append("")
    base_row = next(r for r in summary["rows"] if r["strategy"] == "ssgd" and r["batch"] == base.base_batch)
    if len(grid.multipliers) > 1 and base_row["best_multiplier"] in (min(grid.multipliers), max(grid.multipliers)):
        lines += [f"**The baseline's best rate is at the edge of the grid (×{base_row['best_multiplier']:g}): the "
                  "base rate is not tuned, so every comparison with it is biased. Widen --rate-multipliers or move "
                  "--lr, and run the study again in a new OUT.**", ""]
    for s, batch in summary["largest_batch"].items():
        rate = summary["largest_training_lr"][s]
        lines.append(f"- {s.upper()}: largest batch within the margin {batch or 'none'}; largest peak rate "
                     f"that trains {'none' if rate is None else f'{rate:.4g}'}")
    lines += ["", "![held-out loss by epoch](batch-heldout.png)", "", "![largest batch within the margin]"
              "(batch-largest.png)", "", "![learners' spread and loss](batch-spread.png)", ""]
    return "\n".join(lines)


def batch_study(base: TrainConfig, out: Path, grid: BatchGrid, probes: ProbeConfig, runner: Runner,
                num_pdfs: int, only: str | None = None) -> dict[str, Any] | None:
    """Every run of the grid, or those matching ``only`` (resumable), then ``batch.json``, ``batch.md``
    and the plots over every run of the grid finished so far (None: no baseline run finished yet).

    A study split over machines or cores runs a share each (``only``); copying the finished run
    directories into one OUT/runs and running the whole grid there then trains nothing more."""
    from asrtrain.study.plots import plot_heldout_by_epoch, plot_largest_batch, plot_spread
    from asrtrain.study.runs import select_runs

    specs = batch_specs(base, grid, probes)
    runner.run_all(select_runs(specs, only), "study batch")
    records = [r for r in (runner.record(s) for s in specs) if r is not None]
    if not any(r["strategy"] == "ssgd" and r["batch"] == base.base_batch for r in records):
        return None
    summary = summarize(records, base.base_batch, grid, num_pdfs)
    best = {(r["strategy"], r["batch"]): r["best_run"] for r in summary["rows"]}
    chosen = [r for r in records if best.get((r["strategy"], r["batch"])) == r["name"]]
    plot_heldout_by_epoch(chosen, summary["baseline"], out / "batch-heldout.png")
    plot_largest_batch(summary, grid.margin, chosen, out / "batch-largest.png")
    plot_spread([r for r in chosen if r["strategy"] != "ssgd"], out / "runs", out / "batch-spread.png")
    missing = [s.name for s in specs if s.name not in {r["name"] for r in records}]
    record = {"grid": {**grid.__dict__}, "base_batch": base.base_batch, "lr": base.lr, **summary, "runs": records,
              "missing": len(missing), "missing_runs": missing}
    write_json(out / "batch.json", record)
    text = report(summary, grid, base, runner.chunks)
    if missing:
        text = (f"**Partial: {len(missing)} run(s) of the grid not finished** ({', '.join(missing)}); the rows "
                "below are over the finished runs only.\n\n" + text)
    write_text(out / "batch.md", text)
    return record

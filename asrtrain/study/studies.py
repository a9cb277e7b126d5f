"""The papers' claims as runs of the simulator: batch size, hierarchy, ring topology.

Each study trains (or mixes) with :mod:`asrtrain.study.simulate`, keeps every run's
experiment directory (``metrics.jsonl``, ``final.pt``) under ``OUT/runs/``, and
writes ``OUT/<study>.json``, PNG plots in the papers' form (held-out loss against
epoch, one curve per run) and ``OUT/<study>.md``.

* batch (INTERSPEECH 2019, Fig. 2): SSGD and ADPSGD over ``learners`` learners at
  batches from the base up, with the paper's recipe (the rate scaled linearly from
  the base batch, warm-up, annealing), beside one learner at the base batch. A batch
  "converges" when its best held-out loss is within ``margin`` of the baseline's.
* hierarchy (section 4): H-ADPSGD over λ learners in super-learners of N against
  ADPSGD over λ/N learners at the same total batch.
* topology (ICASSP 2020): per-round consensus rate of the fixed and randomized rings
  at 4–128 learners, measured by the simulator's gossip on random weights, beside
  the bound from the spectral gap; and training curves of the ring variants and the
  two readings of delay-by-one at a large batch.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch

from asrtrain.core.atomic import write_text
from asrtrain.distributed.topology import spectral_gap
from asrtrain.study.simulate import SimConfig, SimStrategy, simulate
from asrtrain.train.config import TrainConfig
from asrtrain.train.metrics import epoch_rows
from asrtrain.train.plot import plot_runs
from asrtrain.train.trainer import TrainingDiverged, train

log = logging.getLogger("asrtrain.study")


def _run(cfg: TrainConfig, sim: SimConfig | None, root: Path, name: str) -> dict[str, Any]:
    """One training run under ``root/runs/name``: its epoch rows and wall time."""
    cfg = replace(cfg, exp=root / "runs" / name, resume=False, keep_checkpoints=1)
    t0 = time.perf_counter()
    diverged = None
    try:
        result = train(cfg) if sim is None else simulate(cfg, sim)[0]
        history, final = result.history, str(result.final_path)
    except TrainingDiverged as exc:  # a batch too large for its rate: a result of the study, not a failure
        diverged, final = str(exc), None
        history = epoch_rows(cfg.exp / "metrics.jsonl") if (cfg.exp / "metrics.jsonl").is_file() else []
        log.warning("%s: %s", name, exc)
    return {"name": name, "batch": cfg.batch, "sim": asdict(sim) if sim else None, "seconds": time.perf_counter() - t0,
            "history": history, "final": final, "diverged": diverged,
            "best_valid_loss": min((r.get("valid_loss", float("inf")) for r in history), default=float("inf"))}


def _write(out: Path, study: str, record: dict[str, Any], report: str, plots: dict[str, list[dict[str, Any]]],
           root: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    for title, runs in plots.items():
        runs = [r for r in runs if r["history"]]  # a run that diverged in its first epoch has no curve
        png = out / f"{study}-{title.split(':')[0].replace(' ', '_')}.png"
        plot_runs([root / "runs" / r["name"] for r in runs], png, [r["name"] for r in runs], title)
        report += f"\n![{title}]({png.name})\n"
    write_text(out / f"{study}.json", json.dumps(record, indent=1, default=str))
    write_text(out / f"{study}.md", report)
    return record


def batch_study(base: TrainConfig, out: Path, learners: int, batches: list[int], margin: float) -> dict[str, Any]:
    """SSGD and ADPSGD at each batch, and one learner at the base batch."""
    baseline = _run(replace(base, batch=base.base_batch), None, out, "single")
    runs = [baseline]
    rows = []
    for strategy in ("ssgd", "adpsgd"):
        for batch in batches:
            if strategy == "ssgd" and batch == base.base_batch:  # SSGD is one learner at the total batch (tested)
                run = {**baseline, "name": "single"}
            else:
                run = _run(replace(base, batch=batch), SimConfig(strategy, learners=learners), out, f"{strategy}-{batch}")
            runs.append(run)
            ok = run["best_valid_loss"] <= baseline["best_valid_loss"] * (1 + margin)
            rows.append({"strategy": strategy, "batch": batch, "best_valid_loss": run["best_valid_loss"],
                         "within_margin": ok, "seconds": run["seconds"], "diverged": run["diverged"]})
    largest = {s: max((r["batch"] for r in rows if r["strategy"] == s and r["within_margin"]), default=None)
               for s in ("ssgd", "adpsgd")}
    record = {"learners": learners, "margin": margin, "baseline": baseline, "rows": rows, "largest": largest,
              "runs": runs}
    lines = [f"# Batch study: {learners} simulated learners\n",
             f"Baseline: one learner at batch {base.base_batch}, best held-out loss "
             f"{baseline['best_valid_loss']:.4f}. Margin {100 * margin:.0f}%.\n",
             "| strategy | batch | best held-out loss | within margin | seconds |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r['strategy']} | {r['batch']} | {r['best_valid_loss']:.4f} | "
              f"{'yes' if r['within_margin'] else 'no (diverged)' if r['diverged'] else 'no'} | {r['seconds']:.0f} |"
              for r in rows]
    lines.append(f"\nLargest batch within the margin: SSGD {largest['ssgd']}, ADPSGD {largest['adpsgd']}.")
    plots = {f"{s.upper()}: held-out loss by batch": [baseline] + [r for r in runs if r["name"].startswith(s + "-")]
             for s in ("ssgd", "adpsgd")}
    runs = [r for i, r in enumerate(runs) if r not in runs[:i]]
    return _write(out, "batch", record, "\n".join(lines) + "\n", plots, out)


def _losses(run: dict[str, Any]) -> str:
    return ", ".join(f"{row.get('valid_loss', float('nan')):.4f}" for row in run["history"])


def hierarchy_study(base: TrainConfig, out: Path, learners: int, group: int) -> dict[str, Any]:
    """H-ADPSGD over ``learners`` in super-learners of ``group`` against ADPSGD over learners/group."""
    h = _run(base, SimConfig("h-adpsgd", learners=learners, group_size=group), out, f"h-adpsgd-{learners}x{group}")
    flat = _run(base, SimConfig("adpsgd", learners=learners // group), out, f"adpsgd-{learners // group}")
    record = {"learners": learners, "group": group, "batch": base.batch, "runs": [h, flat]}
    lines = [f"# Hierarchy study: H-ADPSGD {learners // group}×{group} against ADPSGD over {learners // group}, "
             f"batch {base.batch}\n", "| run | best held-out loss | by epoch |", "| --- | --- | --- |"]
    lines += [f"| {r['name']} | {r['best_valid_loss']:.4f} | {_losses(r)} |" for r in (h, flat)]
    return _write(out, "hierarchy", record, "\n".join(lines) + "\n", {"hierarchy: held-out loss": [h, flat]}, out)


def consensus_rate(n: int, topology: str, seed: int = 0, dim: int = 256, floor: float = 1e-6,
                   max_rounds: int = 20_000) -> tuple[float, int]:
    """Per-round shrink factor of the replicas' spread under the simulator's gossip alone (no steps)."""
    strategy = SimStrategy(SimConfig("adpsgd", learners=n, topology=topology, gossip_seed=seed, delay=0))
    g = torch.Generator().manual_seed(seed)
    strategy.params = [[torch.randn(dim, generator=g, dtype=torch.float64)] for _ in range(n)]
    start = strategy.rms_spread()
    spread = start
    while spread > floor * start and strategy.rounds < max_rounds:
        strategy._gossip()
        spread = strategy.rms_spread()
    return (spread / start) ** (1 / max(strategy.rounds, 1)), strategy.rounds


def topology_study(base: TrainConfig | None, out: Path, sizes: list[int], learners: int) -> dict[str, Any]:
    """The consensus table, and (with ``base``) the ring variants and delay-by-one at ``base.batch``."""
    table = []
    for n in sizes:
        for topology in ("ring", "random-ring"):
            gap = spectral_gap(n, topology, 0, 1, rounds=256)
            rate, rounds = consensus_rate(n, topology)
            table.append({"learners": n, "topology": topology, "spectral_gap": gap, "bound": (1 - gap) ** 0.5,
                          "measured": rate, "rounds_to_1e-6": rounds})
    lines = ["# Topology study\n", "Consensus: the replicas' RMS spread shrinks by `measured` per gossip round "
             "(random weights, no training, until 1e-6 of the start); the spectral gap's bound is "
             "sqrt(1 − gap) (spread² shrinks by 1 − gap a round in expectation).\n",
             "| learners | ring | spectral gap | bound | measured | rounds to 1e-6 |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['learners']} | {r['topology']} | {r['spectral_gap']:.5f} | {r['bound']:.5f} | "
              f"{r['measured']:.5f} | {r['rounds_to_1e-6']} |" for r in table]
    record: dict[str, Any] = {"consensus": table}
    out.mkdir(parents=True, exist_ok=True)
    _plot_consensus(table, out / "topology-consensus.png")
    lines.append("\n![consensus rate by learners](topology-consensus.png)\n")
    plots: dict[str, list[dict[str, Any]]] = {}
    if base is not None:
        variants = {"ring": SimConfig("adpsgd", learners=learners),
                    "random-ring": SimConfig("adpsgd", learners=learners, topology="random-ring"),
                    "delay-0": SimConfig("adpsgd", learners=learners, delay=0),
                    "delay-by-one-gradient": SimConfig("adpsgd", learners=learners, delay_by_one="gradient")}
        runs = [_run(base, sim, out, f"topology-{name}") for name, sim in variants.items()]
        record["variants"] = runs
        lines += [f"\nAt batch {base.batch}, {learners} learners (`ring` is the averaging one step late, the "
                  "real overlap and the 'averaging' reading of delay-by-one):\n",
                  "| variant | best held-out loss |", "| --- | --- |"]
        lines += [f"| {r['name']} | {r['best_valid_loss']:.4f} |" for r in runs]
        plots["ring variants: held-out loss"] = runs
    return _write(out, "topology", record, "\n".join(lines) + "\n", plots, out)


def _plot_consensus(table: list[dict[str, Any]], png: Path) -> None:
    """Rounds for the spread to shrink by e (−1/ln rate), measured and from the gap's bound, by learners."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from asrtrain.core.atomic import atomic_path

    fig, ax = plt.subplots(figsize=(6, 4))
    for topology, colour in (("ring", "tab:blue"), ("random-ring", "tab:orange")):
        rows = [r for r in table if r["topology"] == topology and 0 < r["measured"] < 1]
        n = [r["learners"] for r in rows]
        ax.plot(n, [-1 / math.log(r["measured"]) for r in rows], "o-", color=colour, label=f"{topology}: measured")
        ax.plot(n, [-1 / math.log(r["bound"]) for r in rows], "--", color=colour, label=f"{topology}: gap's bound")
    ax.set(xscale="log", yscale="log", xlabel="learners", ylabel="gossip rounds per e-fold of the spread")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)

"""The papers' hierarchy and topology claims as runs of the simulator.

Each study trains (or mixes) with :mod:`asrtrain.study.simulate` through the resumable
:class:`~asrtrain.study.runs.Runner` (every run's experiment directory under ``OUT/runs/``),
and writes ``OUT/<study>.json``, PNG plots in the papers' form (held-out loss against
epoch, one curve per run) and ``OUT/<study>.md``. The batch claim is
:mod:`asrtrain.study.batch`, the range test :mod:`asrtrain.study.lr_range`.

* hierarchy (section 4): H-ADPSGD over λ learners in super-learners of N against
  ADPSGD over λ/N learners at the same total batch.
* topology (ICASSP 2020): per-round consensus rate of the fixed and randomized rings
  at 4–128 learners, measured by the simulator's gossip on random weights, beside
  the bound from the spectral gap; and training curves of the ring variants and the
  two readings of delay-by-one at a large batch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from asrtrain.core.atomic import write_text
from asrtrain.distributed.topology import spectral_gap
from asrtrain.study.probes import ProbeConfig
from asrtrain.study.runs import Runner, RunSpec
from asrtrain.study.simulate import SimConfig, SimStrategy
from asrtrain.train.config import TrainConfig
from asrtrain.train.plot import plot_runs


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


def _losses(run: dict[str, Any]) -> str:
    return ", ".join(f"{row.get('valid_loss', float('nan')):.4f}" for row in run["history"])


def hierarchy_study(base: TrainConfig, out: Path, learners: int, group: int, runner: Runner,
                    probes: ProbeConfig, global_average: bool = True) -> dict[str, Any]:
    """H-ADPSGD over ``learners`` in super-learners of ``group`` against ADPSGD over learners/group."""
    specs = [RunSpec(f"h-adpsgd-{learners}x{group}", base,
                     SimConfig("h-adpsgd", learners=learners, group_size=group, global_average=global_average), probes),
             RunSpec(f"adpsgd-{learners // group}", base,
                     SimConfig("adpsgd", learners=learners // group, global_average=global_average), probes)]
    h, flat = runner.run_all(specs, "study hierarchy")
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


def topology_study(base: TrainConfig | None, out: Path, sizes: list[int], learners: int,
                   runner: Runner | None = None, probes: ProbeConfig | None = None,
                   global_average: bool = True) -> dict[str, Any]:
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
    if base is not None and runner is not None:
        ga = global_average
        variants = {"ring": SimConfig("adpsgd", learners=learners, global_average=ga),
                    "random-ring": SimConfig("adpsgd", learners=learners, topology="random-ring", global_average=ga),
                    "delay-0": SimConfig("adpsgd", learners=learners, delay=0, global_average=ga),
                    "delay-by-one-gradient": SimConfig("adpsgd", learners=learners, delay_by_one="gradient",
                                                       global_average=ga)}
        runs = runner.run_all([RunSpec(f"topology-{name}", base, sim, probes or ProbeConfig())
                               for name, sim in variants.items()], "study topology")
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

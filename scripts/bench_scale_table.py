"""The pure half of ``scripts/bench_scale.py``: its JSONs read back, growth fitted, and the
table extrapolated to a cluster (kept apart so a test can import it without running a stage).

Growth: ``y = a·h^b`` fitted by least squares on log-log over the sizes measured (h: hours
of training speech). At small sizes a stage's fixed cost (imports, the LM's graph, a torch
process) flattens ``b``, so a power law alone would under-extrapolate a stage that grows
linearly above a constant; the extrapolation is therefore the larger of the power law and a
straight line (least squares of ``y`` on ``h``), and both are in the JSON of ``--report``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

#: The stated cluster: nodes × cores × memory, GPUs a node.
NODES, CORES, NODE_GB, GPUS = 8, 64, 256, 8
#: Targets of the extrapolation, hours of training speech (LibriSpeech; the papers' SWB+Fisher).
TARGETS = (960.0, 2000.0)
#: Frames a second of one H200 on the paper's 6×512 BLSTM at batch 8,192 (docs/gpus.md).
GPU_FRAMES_PER_S = 1.12e6
FRAMES_PER_HOUR = 360_000


@dataclass(frozen=True)
class Parallel:
    """How a stage spreads over the cluster: ``cores`` it can use and why."""

    cores: int
    how: str


#: From each command's --nj / --job-cmd / --nproc (asrtrain ... --help) and hybrid.sh's use.
PARALLEL = {
    "corpus": Parallel(CORES, "prepare synth --nj: processes on one host (your corpus instead)"),
    "features": Parallel(CORES, "prepare features --nj: processes on one host, one ark each"),
    "align": Parallel(NODES * CORES, "prepare align --nj --job-cmd srun: jobs on any node, "
                                     "the parent sums their statistics"),
    "ivectors": Parallel(NODES * CORES, "prepare ivectors --nj --job-cmd srun (adapt_nj): jobs "
                                        "on any node; the UBM's and extractor's EM in the parent"),
    "fmllr": Parallel(NODES * CORES, "prepare fmllr --nj --job-cmd srun (adapt_nj): jobs on any "
                                     "node, whole speakers; the GMM's EM in the parent"),
    "lang": Parallel(1, "prepare lang: one process (lexicon, LM, tree, HCLG)"),
    "archive": Parallel(1, "prepare archive: one process a split, one file (the recipe does "
                           "not pass --shards)"),
    "train": Parallel(NODES * GPUS, "train --nproc learners: one a GPU; cluster time from the "
                                    "H200's frames/s, not from the CPU time"),
    "decode": Parallel(CORES, "decode --nj: processes on one host (decode_cmd runs it as one "
                              "job)"),
}


NOTES = ("Training is one epoch (the sizes rule runs 12, 16 beyond 200 h) of the rule's network "
         "(3×160 below 2 h, 4×320 below 20 h; the papers' 6×512 from 200 h), on CPU learners "
         "here. Decoding is of the test split, an eighth of the corpus. Memory is the whole "
         "stage's at --nj 2. The extrapolation takes the larger of the power law and a "
         "straight line through the sizes.")


@dataclass(frozen=True)
class Fit:
    """``y = coef·h^exponent`` and ``y = intercept + slope·h`` over the same points."""

    exponent: float
    coef: float
    intercept: float
    slope: float

    def at(self, h: float) -> float:
        """The larger of the two models at ``h`` (see the module's docstring)."""
        return max(self.coef * h ** self.exponent, self.intercept + self.slope * h)


def fit(xs: list[float], ys: list[float]) -> Fit | None:
    """Least squares of log y on log x (and of y on x); None below two distinct sizes."""
    points = [(x, y) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len({x for x, _ in points}) < 2:
        return None
    b, log_a = _line([math.log(x) for x, _ in points], [math.log(y) for _, y in points])
    slope, intercept = _line([x for x, _ in points], [y for _, y in points])
    return Fit(b, math.exp(log_a), intercept, slope)


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope, my - slope * mx


def cluster_seconds(stage: str, cpu_s: float, hours: float) -> float:
    """Wall seconds of ``stage`` on the cluster: its CPU time over the cores it can use; for
    train, an epoch of ``hours`` at the H200's frames/s on every GPU (linear: a bound)."""
    par = PARALLEL[stage]
    if stage == "train":
        return hours * FRAMES_PER_HOUR / (GPU_FRAMES_PER_S * par.cores)
    return cpu_s / par.cores


def load(out: Path) -> list[dict]:
    """Every stage's JSON under ``out`` (``h*/STAGE.json``), each with its size's training
    hours (the corpus stage runs before sizes.sh exists: it takes its size's figure)."""
    records = [json.loads(p.read_text()) for p in sorted(out.glob("h*/*.json"))]
    train = {r["hours"]: r["train_hours"] for r in records if r.get("train_hours")}
    for r in records:
        r["train_hours"] = r.get("train_hours") or train.get(r["hours"])
    return records


def memory_mb(record: dict) -> float:
    """The stage's peak: the larger of the tree's sampled PSS sum and its biggest process."""
    return max(record["peak_tree_pss_mb"], record["max_process_rss_mb"])


def x_of(record: dict) -> float:
    """Hours of training speech (sizes.sh's ``hours``), else the corpus hours asked."""
    return record.get("train_hours") or record["hours"]


def summarize(records: list[dict], stages: list[str]) -> list[dict]:
    """Per stage: the measured rows by size, the fits and the extrapolations."""
    rows = []
    for stage in stages:
        done = sorted((r for r in records if r["stage"] == stage), key=x_of)
        if not done:
            continue
        xs = [x_of(r) for r in done]
        fits = {k: fit(xs, [f(r) for r in done]) for k, f in
                (("cpu", lambda r: r["cpu_s"]), ("wall", lambda r: r["wall_s"]),
                 ("mem", memory_mb))}
        row: dict = {"stage": stage, "measured": done, "fits": fits, "at": {}}
        for target in TARGETS:
            if fits["cpu"] is None or fits["mem"] is None:
                continue
            cpu = fits["cpu"].at(target)
            mem_gb = fits["mem"].at(target) / 1024
            row["at"][target] = {"cpu_core_h": cpu / 3600,
                                 "cluster_h": cluster_seconds(stage, cpu, target) / 3600,
                                 "mem_gb": mem_gb, "over": mem_gb > NODE_GB}
        rows.append(row)
    return rows


def memory_growth(done: list[dict]) -> float:
    """Memory at the largest size over that at 1 h (issue 38 asks 16 h within 2× of it), or
    over the smallest size's without a 1 h run."""
    base = next((r for r in done[:-1] if r["hours"] == 1), done[0])
    return memory_mb(done[-1]) / memory_mb(base)


def _exp(f: Fit | None) -> str:
    return "—" if f is None else f"{f.exponent:.2f}"


def _hours(h: float) -> str:
    return f"{h * 60:.0f} min" if h < 1 else f"{h:g} h"


def markdown(rows: list[dict]) -> str:
    """Two tables: what was measured at each size, then growth and the cluster's figures."""
    sizes = sorted({(r["hours"], round(x_of(r), 3)) for row in rows for r in row["measured"]})
    head = " | ".join(f"{h:g} h ({t:g} h train): wall / CPU s, MB" for h, t in sizes)
    lines = [f"| stage | {head} |", "| --- |" + " --- |" * len(sizes)]
    for row in rows:
        by = {r["hours"]: r for r in row["measured"]}
        cells = [f"{by[h]['wall_s']:.0f} / {by[h]['cpu_s']:.0f}, {memory_mb(by[h]):.0f}"
                 if h in by else "pending" for h, _ in sizes]
        lines.append(f"| {row['stage']} | " + " | ".join(cells) + " |")
    lines += ["", f"Cluster: {NODES} nodes × {CORES} cores × {NODE_GB} GB, {GPUS} GPUs each. "
              "b: exponent of h (log-log least squares); memory ×: at the largest size over at 1 h; at a target, CPU core-hours, the "
              "cluster's wall hours (CPU over the cores the stage can use) and memory; "
              "**!** memory over one node's.", ""]
    tgt = " | ".join(f"{_hours(t)}: CPU h, cluster h, GB" for t in TARGETS)
    lines += [f"| stage | b CPU | b wall | b memory | memory × | {tgt} | spreads over |",
              "| --- | --- | --- | --- | --- |" + " --- |" * len(TARGETS) + " --- |"]
    for row in rows:
        cells = []
        for t in TARGETS:
            a = row["at"].get(t)
            cells.append("—" if a is None else f"{a['cpu_core_h']:.3g}, {a['cluster_h']:.3g}, "
                         f"{a['mem_gb']:.3g}{' **!**' if a['over'] else ''}")
        f = row["fits"]
        par = PARALLEL[row["stage"]]
        lines.append(f"| {row['stage']} | {_exp(f['cpu'])} | {_exp(f['wall'])} | "
                     f"{_exp(f['mem'])} | {memory_growth(row['measured']):.2f} | "
                     + " | ".join(cells) + f" | {par.cores}: {par.how} |")
    return "\n".join(lines + ["", NOTES]) + "\n"

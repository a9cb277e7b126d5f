"""The learning-rate range test: the rate doubling every N steps until the held-out loss blows up.

A cheaper and sharper test of the batch claim than training every batch to the end: the
IBM follow-up (Zhang et al., arXiv 2112.01433) reports decentralized SGD converging at
large rates where synchronous SGD diverges. So at one large batch, SSGD and ADPSGD (same
learners, same data order per seed) train from the same start with the rate
``start · factor^⌊step/every⌋``; every ``every`` steps the replicas' mean is evaluated on
a fixed held-out subset (``held_chunks`` chunks spread over the held-out archive, the
same for every run) and a ``range`` row (step, rate, held-out loss, spread) goes into the
run's ``metrics.jsonl``. The run ends at the first evaluation whose loss is not finite,
above the untrained model's, or above ``blow_up`` times the best so far: that interval's
rate is the run's divergence rate. Gradient clipping bounds every step (a smaller step
for a noisier gradient), a confound of the claim: the study runs it on and off.

Several seeds give the seed-to-seed spread: a difference between strategies counts only
when their ranges of divergence rates do not overlap.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from asrtrain.core.errors import ConfigError
from asrtrain.study.probes import ProbeConfig, averaged, held_batch, loss_on
from asrtrain.study.runs import RunEnded, Runner, RunSpec
from asrtrain.study.simulate import SimConfig, SimTrainer
from asrtrain.train.config import TrainConfig
from asrtrain.train.hooks import Hooks
from asrtrain.train.metrics import read_metrics
from asrtrain.train.trainer import Trainer


@dataclass(frozen=True)
class RangeConfig:
    """The rate's ladder and when a run counts as blown up."""

    start_lr: float
    factor: float = 2.0
    every: int = 20          # steps at each rate (and between held-out evaluations)
    rungs: int = 10          # rates tried: start · factor^0 … factor^(rungs-1)
    held_chunks: int = 512   # the fixed held-out subset
    blow_up: float = 2.0     # a held-out loss above this times the best so far ends the run

    def __post_init__(self) -> None:
        if not (self.start_lr > 0 and self.factor > 1 and self.every >= 1 and self.rungs >= 1
                and self.held_chunks >= 1 and self.blow_up > 1):
            raise ConfigError("range test: start rate > 0, factor > 1, every >= 1, rungs >= 1, held-out chunks "
                              f">= 1 and blow-up > 1, got {asdict(self)}")

    def rate(self, steps_done: int) -> float:
        """The rate of the next step after ``steps_done`` steps."""
        return self.start_lr * self.factor ** min(steps_done // self.every, self.rungs - 1)

    @property
    def steps(self) -> int:
        return self.every * self.rungs

    @property
    def max_lr(self) -> float:
        return self.rate(self.steps - 1)


def range_trainer(rng: RangeConfig) -> type[SimTrainer]:
    """The simulated trainer whose rate is the range test's ladder, by step (a resume continues it)."""

    class RangeTrainer(SimTrainer):
        def lr(self, epoch: int, fraction: float = 0.0) -> float:
            return rng.rate(self.step)

    return RangeTrainer


class RangeProbe(Hooks):
    """Evaluates the replicas' mean every ``every`` steps and ends the run at the blow-up."""

    def __init__(self, rng: RangeConfig) -> None:
        self.rng = rng
        self.rows: list[dict[str, Any]] = []
        self._held: tuple[torch.Tensor, torch.Tensor] | None = None
        self.ended: str | None = None
        self.blown_at: float | None = None  # the rate of the evaluation that found the blow-up
        self.last_lr: float | None = None   # the rate of the last step (a non-finite training loss stops there)

    def start(self, trainer: Trainer) -> None:
        sim: SimTrainer = trainer  # type: ignore[assignment]
        source = sim.valid if sim.valid is not None else sim.archive
        self._held = held_batch(source, self.rng.held_chunks, sim.device)
        assert trainer.metrics is not None
        self.rows = [{k: r[k] for k in ("step", "lr", "valid_loss", "spread")}
                     for r in read_metrics(trainer.metrics.path) if r.get("kind") == "range"]
        if not self.rows:  # the untrained model: the loss a run must not go above
            self._evaluate(sim, 0.0)

    def after_step(self, trainer: Trainer, x: Any, y: Any, lr: float) -> None:
        self.last_lr = lr
        if trainer.step % self.rng.every:
            return
        row = self._evaluate(trainer, lr)  # type: ignore[arg-type]
        loss = row["valid_loss"]
        best = min(r["valid_loss"] for r in self.rows if math.isfinite(r["valid_loss"]))
        if not math.isfinite(loss) or loss > self.rows[0]["valid_loss"] or loss > self.rng.blow_up * best:
            self.ended = f"held-out loss {loss:.4g} at rate {lr:.4g} (best {best:.4g}): blown up"
            self.blown_at = lr
            raise RunEnded(self.ended)
        if trainer.step >= self.rng.steps:
            self.ended = f"rate {lr:.4g}, the last of the ladder, without a blow-up"
            raise RunEnded(self.ended)

    def _evaluate(self, trainer: SimTrainer, lr: float) -> dict[str, Any]:
        assert self._held is not None and trainer.metrics is not None
        with averaged(trainer) as model:
            loss = loss_on(model, *self._held)
        row = {"step": trainer.step, "lr": lr, "valid_loss": loss, "spread": trainer.sim_strategy.rms_spread()}
        trainer.metrics.write("range", epoch=trainer.epochs_done + 1, **row)
        self.rows.append(row)
        return row

    def result(self) -> dict[str, Any]:
        """The record's part: every evaluation, the divergence rate (None: none on the ladder)."""
        finite = [r for r in self.rows[1:] if math.isfinite(r["valid_loss"])]
        best = min(finite, key=lambda r: r["valid_loss"]) if finite else None
        return {"range": self.rows, "divergence_lr": self.blown_at, "last_lr": self.last_lr,
                "best_lr": best["lr"] if best else None, "range_end": self.ended,
                "initial_loss": self.rows[0]["valid_loss"] if self.rows else None}


def range_specs(base: TrainConfig, rng: RangeConfig, strategies: list[str], learners: int, clips: list[float],
                seeds: list[int], chunks: int, global_average: bool = True, group: int = 1,
                probes: ProbeConfig | None = None) -> list[RunSpec]:
    """One run per strategy, clip and seed, at ``base.batch``."""
    steps, _ = base.epoch_steps(chunks)
    epochs = -(-rng.steps // steps)
    specs = []
    for seed in seeds:
        for clip in clips:
            for strategy in strategies:
                sim = SimConfig(strategy, learners=1 if strategy == "ssgd" else learners,
                                group_size=group if strategy == "h-adpsgd" else 1, global_average=global_average)
                cfg = replace(base, epochs=epochs, clip=clip, seed=seed, warmup_epochs=0, log_every=rng.every)
                specs.append(RunSpec(f"range-{strategy}-clip{clip:g}-seed{seed}", cfg, sim,
                                     probes or ProbeConfig(spread_every=0),
                                     extra={"range_config": asdict(rng), "clip": clip, "seed": seed},
                                     hooks=(RangeProbe(rng),), trainer_class=range_trainer(rng),
                                     planned_steps=rng.steps))
    return specs


def divergence_table(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per strategy and clip: each seed's divergence rate (inf: none on the ladder), their range."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["strategy"], float(r["clip"])), []).append(r)
    rows = []
    for (strategy, clip), runs in sorted(groups.items()):
        rates = [divergence_rate(r) for r in sorted(runs, key=lambda r: r["seed"])]
        rows.append({"strategy": strategy, "clip": clip, "seeds": [r["seed"] for r in runs], "rates": rates,
                     "low": min(rates), "high": max(rates)})
    return rows


def divergence_rate(record: dict[str, Any]) -> float:
    """Where a run blew up: its evaluation's rate, or (a non-finite training loss first) its last rate."""
    if record.get("divergence_lr") is not None:
        return float(record["divergence_lr"])
    if record.get("diverged") and record.get("last_lr") is not None:
        return float(record["last_lr"])
    return math.inf


def verdicts(table: list[dict[str, Any]], clips: list[float]) -> list[str]:
    """Per clip: does ADPSGD (and H-ADPSGD) diverge at a higher rate than SSGD beyond the seeds' spread?"""
    lines = []
    for clip in clips:
        ssgd = next((r for r in table if r["strategy"] == "ssgd" and r["clip"] == clip), None)
        for other in (r for r in table if r["strategy"] != "ssgd" and r["clip"] == clip):
            if ssgd is None:
                continue
            if other["low"] > ssgd["high"]:
                word = "higher than SSGD's beyond the seed-to-seed spread"
            elif other["high"] < ssgd["low"]:
                word = "lower than SSGD's beyond the seed-to-seed spread"
            else:
                word = "not distinguishable from SSGD's (the seeds' ranges overlap)"
            lines.append(f"clip {clip:g}: {other['strategy'].upper()} diverges at {_rates(other)}, "
                         f"SSGD at {_rates(ssgd)}: {word}")
    return lines


def _rates(row: dict[str, Any]) -> str:
    return "[" + ", ".join("none on the ladder" if math.isinf(r) else f"{r:.4g}" for r in row["rates"]) + "]"


def _largest_ratio(rows: list[dict[str, Any]]) -> str:
    """The largest finite λ_max·rate/2(1+μ) of a run ("-": probe off; "nan": none finite, the
    weights had blown up at every probe)."""
    finite = [x["ratio"] for x in rows if math.isfinite(x["ratio"])]
    return f"{max(finite):.3g}" if finite else ("nan" if rows else "-")


def sharpness_rows(exp: Path) -> list[dict[str, Any]]:
    """A run's ``sharpness`` rows (none when the probe was off)."""
    path = exp / "metrics.jsonl"
    return [r for r in read_metrics(path) if r.get("kind") == "sharpness"] if path.is_file() else []


def lr_range_study(base: TrainConfig, out: Path, rng: RangeConfig, strategies: list[str], learners: int,
                   clips: list[float], seeds: list[int], runner: Runner, global_average: bool = True,
                   group: int = 1, probes: ProbeConfig | None = None) -> dict[str, Any]:
    """Every range run (resumable), then ``lr-range.json``, ``lr-range.md`` and the plot."""
    from asrtrain.core.atomic import write_text
    from asrtrain.study.plots import plot_range
    from asrtrain.study.runs import write_json

    specs = range_specs(base, rng, strategies, learners, clips, seeds, runner.chunks, global_average, group, probes)
    records = runner.run_all(specs, "study lr-range")
    table = divergence_table(records)
    for r in records:  # λ_max · rate / 2(1+μ) where the sharpness probe ran: above 1, heavy-ball SGD is unstable
        rows = [x for x in sharpness_rows(out / "runs" / r["name"]) if x["step"] > 0]
        r["sharpness"] = [{"step": x["step"], "lr": x["lr"], "ratio": x["ratio"]} for x in rows]
    lines = [f"# Learning-rate range test: batch {base.batch}, {learners} simulated learners\n",
             f"The rate starts at {rng.start_lr:.4g} and grows ×{rng.factor:g} every {rng.every} steps "
             f"(up to {rng.max_lr:.4g}); the replicas' mean is evaluated on {rng.held_chunks} held-out chunks "
             f"after each rate. A run ends when that loss is not finite, above the untrained model's or above "
             f"{rng.blow_up:g}× its best so far: the divergence rate is that rate. Global average at each "
             f"epoch's end: {'yes' if global_average else 'no'}.\n",
             "| strategy | clip | seeds | divergence rates | best-loss rates | largest λ_max·rate/2(1+μ) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in table:
        runs = sorted((r for r in records if r["strategy"] == row["strategy"] and r["clip"] == row["clip"]),
                      key=lambda r: r["seed"])
        best = ", ".join(f"{r['best_lr']:.4g}" if r.get("best_lr") else "-" for r in runs)
        sharp = ", ".join(_largest_ratio(r["sharpness"]) for r in runs)
        lines.append(f"| {row['strategy']} | {row['clip']:g} | {', '.join(map(str, row['seeds']))} | "
                     f"{_rates(row)[1:-1]} | {best} | {sharp} |")
    lines += ["", *[f"- {v}" for v in verdicts(table, clips)], "", "![range test](lr-range.png)", ""]
    plot_range(records, out / "lr-range.png")
    record = {"batch": base.batch, "learners": learners, "range": asdict(rng), "table": table, "runs": records,
              "global_average": global_average}
    write_json(out / "lr-range.json", record)
    write_text(out / "lr-range.md", "\n".join(lines))
    return record

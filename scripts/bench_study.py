#!/usr/bin/env python
"""The study's pilot: seconds a step of each kind of simulated run, and the study's hours from them.

A study of hours is planned from measured steps, not guesses. For each (strategy, batch) of
``--kinds`` this trains the real simulated run (:class:`asrtrain.study.simulate.SimTrainer`,
the spread probe on, as the study runs it) on ``ARCHIVE`` for ``--warmup`` untimed and
``--steps`` timed steps, and times the held-out evaluation per chunk. It prints seconds a
step, chunks a second, and the ratio of each kind's chunks/s to one learner's at the same
batch (the cost of simulating 16 replicas on small slices). With ``--plan`` it projects the
study: for each run of the plan, epochs × steps an epoch of ``--corpus-chunks`` × its
measured step, plus the held-out evaluation of ``--valid-chunks`` at each epoch's end. Steps
are timed in CPU seconds of this process (every thread's), which other jobs on a shared
machine do not inflate; with ``--threads 1`` they are the wall seconds of one idle core.

    python scripts/bench_study.py recipes/synth/data/archives/train.h5 --valid recipes/synth/data/archives/dev.h5 \\
        --hidden 64 --layers 2 --proj 32 --learners 16 --kinds ssgd:16,ssgd:512,adpsgd:128,adpsgd:512 \\
        --steps 20 --threads 1 --plan batch:16,128,256,512:1,2,4:6 --corpus-chunks 60000 --valid-chunks 4000

``--plan`` is ``batch:BATCHES:MULTIPLIERS:EPOCHS[:STRATEGIES]`` (the batch study: every strategy at every
listed batch and multiplier, and the SSGD baseline at ``--base-batch``) and/or ``range:BATCH:STEPS:RUNS`` (the range test),
joined by ``+``. A kind not measured is interpolated per chunk from the nearest measured batch of its
strategy. Figures depend on the machine and on what else runs on it: say so with them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from asrtrain.model.config import ModelConfig  # noqa: E402
from asrtrain.study.probes import ProbeConfig, Probes, averaged, held_batch, loss_on, top_eigenvalue  # noqa: E402
from asrtrain.study.simulate import SimConfig, SimTrainer  # noqa: E402
from asrtrain.train.config import TrainConfig  # noqa: E402


class StepTimes(Probes):
    """The spread probe as the study runs it, and the wall and CPU time of every step.

    The CPU time (this process's, every thread's) is what a step costs whatever else the
    machine runs: on a machine shared with other jobs the wall time is not the step's.
    With one thread it is the wall time the step takes on an idle core.
    """

    def __init__(self) -> None:
        super().__init__(ProbeConfig(spread_every=10))
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self._t = (0.0, 0.0)

    def before_step(self, trainer: Any, step: int) -> None:
        self._t = (time.perf_counter(), time.process_time())

    def after_step(self, trainer: Any, x: Any, y: Any, lr: float) -> None:
        super().after_step(trainer, x, y, lr)
        self.wall.append(time.perf_counter() - self._t[0])
        self.cpu.append(time.process_time() - self._t[1])


def measure(archive: Path, model: ModelConfig, strategy: str, batch: int, learners: int, group: int, steps: int,
            warmup: int, threads: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of a step of this kind of run (after ``warmup`` untimed steps)."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainConfig(archive=archive, exp=Path(tmp), epochs=1, batch=batch, base_batch=batch, lr=0.01,
                          warmup_epochs=0, model=model, num_threads=threads, log_every=10,
                          max_steps_per_epoch=warmup + steps, resume=False)
        sim = SimConfig(strategy, learners=1 if strategy == "ssgd" else learners,
                        group_size=group if strategy == "h-adpsgd" else 1)
        trainer = SimTrainer(cfg, sim)
        timer = StepTimes()
        try:
            trainer.fit(timer)
        finally:
            trainer.strategy.close()
    return statistics.median(timer.wall[warmup:]), statistics.median(timer.cpu[warmup:])


def eval_seconds(valid: Path, model: ModelConfig, learners: int, threads: int) -> tuple[float, float]:
    """CPU seconds of the held-out evaluation of the replicas' mean per chunk (the epoch-end cost besides
    steps), and of one sharpness measurement (20 power iterations on 64 chunks, as the probe's defaults)."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TrainConfig(archive=valid, exp=Path(tmp), epochs=1, batch=learners, base_batch=learners, lr=0.0,
                          model=model, num_threads=threads, resume=False)
        trainer = SimTrainer(cfg, SimConfig("adpsgd", learners=learners))
        x, y = held_batch(trainer.archive, 1024)
        t = time.process_time()
        with averaged(trainer) as m:
            loss_on(m, x, y)
        per_chunk = (time.process_time() - t) / len(y)
        t = time.process_time()
        with averaged(trainer) as m:
            top_eigenvalue(m, x[:64], y[:64], iters=20)
        sharpness = time.process_time() - t
        trainer.strategy.close()
    return per_chunk, sharpness


def per_chunk(times: dict[tuple[str, int], float], strategy: str, batch: int) -> float:
    """Seconds a chunk of this kind: measured, or the nearest measured batch of the strategy's."""
    if (strategy, batch) in times:
        return times[(strategy, batch)] / batch
    known = [b for s, b in times if s == strategy]
    if not known:
        raise SystemExit(f"no measured kind of {strategy}: add one to --kinds")
    nearest = min(known, key=lambda b: abs(b - batch))
    return times[(strategy, nearest)] / nearest


def project(plan: str, times: dict[tuple[str, int], float], chunks: int, valid_chunks: int, eval_s: float,
            base_batch: int) -> list[tuple[str, int, float]]:
    """(part, runs, hours) of each part of the plan."""
    parts = []
    for part in plan.split("+"):
        kind, *fields = part.split(":")
        if kind == "batch":
            listed = sorted({int(b) for b in fields[0].split(",")})
            mults, epochs = [float(m) for m in fields[1].split(",")], int(fields[2])
            strategies = fields[3].split(",") if len(fields) > 3 else ["ssgd", "adpsgd"]
            seconds, runs = 0.0, 0
            for strategy in ("ssgd", *(s for s in strategies if s != "ssgd")):  # the baseline always
                if strategy == "ssgd":
                    batches = sorted(set(listed) | {base_batch}) if "ssgd" in strategies else [base_batch]
                else:
                    batches = listed
                for batch in batches:
                    epoch = chunks * per_chunk(times, strategy, batch) + valid_chunks * eval_s
                    seconds += len(mults) * epochs * epoch
                    runs += len(mults)
            parts.append((part, runs, seconds / 3600))
        elif kind == "range":
            batch, steps, runs = int(fields[0]), int(fields[1]), int(fields[2])
            seconds = sum(runs / 2 * steps * batch * per_chunk(times, s, batch) for s in ("ssgd", "adpsgd"))
            parts.append((part, runs, seconds / 3600))
        else:
            raise SystemExit(f"--plan part {part!r}: batch:... or range:...")
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("archive", type=Path)
    parser.add_argument("--valid", type=Path, default=None)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--proj", type=int, default=32)
    parser.add_argument("--learners", type=int, default=16)
    parser.add_argument("--group", type=int, default=4, help="h-adpsgd: learners per super-learner")
    parser.add_argument("--kinds", default="ssgd:16,ssgd:512,adpsgd:128,adpsgd:512", help="strategy:batch,...")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--plan", default=None)
    parser.add_argument("--base-batch", type=int, default=16)
    parser.add_argument("--corpus-chunks", type=int, default=None, help="chunks of the study's training archive")
    parser.add_argument("--valid-chunks", type=int, default=0, help="chunks of its held-out archive")
    args = parser.parse_args()
    model = ModelConfig(hidden=args.hidden, layers=args.layers, proj=args.proj)
    print(f"model {args.hidden}x{args.layers} proj {args.proj}, {args.learners} learners, {args.threads} thread(s), "
          f"{args.steps} timed steps each ({torch.__version__})")
    times: dict[tuple[str, int], float] = {}  # CPU seconds a step
    for kind in args.kinds.split(","):
        strategy, batch = kind.split(":")
        t0 = time.perf_counter()
        wall, cpu = measure(args.archive, model, strategy, int(batch), args.learners, args.group, args.steps,
                            args.warmup, args.threads)
        times[(strategy, int(batch))] = cpu
        ratio = ""
        if strategy != "ssgd" and ("ssgd", int(batch)) in times:
            ratio = f"  {times[('ssgd', int(batch))] / cpu:.2f}× one learner's chunks per CPU-s"
        print(f"{strategy:9s} batch {int(batch):5d}: {cpu:.4f} CPU-s/step ({wall:.4f} s wall), "
              f"{int(batch) / cpu:7.0f} chunks per CPU-s{ratio}  (measured in {time.perf_counter() - t0:.0f} s)",
              flush=True)
    eval_s = 0.0
    if args.valid:
        eval_s, sharp_s = eval_seconds(args.valid, model, args.learners, args.threads)
        print(f"held-out evaluation: {1e3 * eval_s:.3f} CPU-ms a chunk; one sharpness measurement: {sharp_s:.2f} CPU-s")
    if args.plan:
        chunks = args.corpus_chunks or 0
        total = 0.0
        for part, runs, hours in project(args.plan, times, chunks, args.valid_chunks, eval_s, args.base_batch):
            total += hours
            print(f"plan {part}: {runs} runs, {hours:.2f} CPU-hours")
        print(f"plan total: {total:.2f} CPU-hours (with --threads 1: the hours of one idle core)")


if __name__ == "__main__":
    main()

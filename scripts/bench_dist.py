#!/usr/bin/env python
"""Distributed training on this machine: gossip overlap and straggler tolerance, side by side.

Four learners (``--nproc`` launcher, gloo) run asrtrain's own training loop
(``Trainer`` with the real strategies, loader and checkpoints) on an archive of
random 21-frame chunks; each scenario runs one epoch of work-shared blocks:

(a) ADPSGD step time with gossip over the same without gossip (the overlap of
    communication with computation; target at most 1.10), with the default transport
    (shared memory between learners of one host) and, beside it, through the gossip
    process group (gloo over loopback TCP);
(b) aggregate frames/s of SSGD and of ADPSGD with learner 3 slowed 3×, each over
    its own run without the straggler (target: ADPSGD at least 0.7; SSGD, whose
    every step waits for the slowest member, falls towards 1/3).

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_dist.py [--hidden 128] [--blocks 48]``.
The figures depend on the load of the machine: other processes on the same cores
change them, so each ratio is taken between neighbouring runs and the median over
``--repeats`` is printed (with every repeat's value), and the CPU time per
step (all threads of a learner, gossip included) is printed beside the wall time.
With more learners than cores, communication is CPU work that no idle core can
absorb: the overlap shows fully only where communication has its own resources.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from asrtrain.train.hooks import Hooks  # noqa: E402


class Probe(Hooks):
    """Hooks on the real loop: step and after-step timings, CPU time, and gossip on or off.

    The compute thread's own gossip work (snapshot, apply) happens inside the
    strategy's ``after_step``; the probe times that call by wrapping it. Without
    gossip, the strategy's gossip thread is stopped before the first step: the same
    learners, work sharing and epoch end, no averaging between steps.
    """

    def __init__(self, gossip: bool, accel_s: float) -> None:
        self.gossip, self.accel_s = gossip, accel_s
        self.rec: dict[str, Any] = {}

    def start(self, trainer: Any) -> None:
        strategy = trainer.strategy
        if not self.gossip and strategy.gossiping.gossip is not None:
            strategy.gossiping.close()
            strategy.gossiping.gossip = None
        inner = strategy.after_step
        hooks, hooks_cpu = [], []

        def timed(model: Any, step: int) -> None:
            t, c = time.perf_counter(), time.thread_time()
            inner(model, step)
            hooks.append(time.perf_counter() - t)
            hooks_cpu.append(time.thread_time() - c)

        strategy.after_step = timed
        self.rec = {"rank": strategy.rank, "iters": [], "hooks": hooks, "hooks_cpu": hooks_cpu,
                    "params": sum(p.numel() for p in trainer.model.parameters())}
        self._start = self._last = time.perf_counter()
        self._cpu0 = time.process_time()

    def before_step(self, trainer: Any, step: int) -> None:
        if self.accel_s:
            time.sleep(self.accel_s)  # an accelerator computing: this learner's CPU idles

    def after_step(self, trainer: Any, x: Any, y: Any, lr: float) -> None:
        now = time.perf_counter()
        self.rec["iters"].append(now - self._last)
        self._last = now

    def end_epoch(self, trainer: Any, row: dict[str, Any]) -> None:
        iters = self.rec["iters"]
        self.rec.update(steps=len(iters), step_s=statistics.median(iters[1:] or iters),
                        cpu_per_step_s=(time.process_time() - self._cpu0) / max(len(iters), 1),
                        after_step_s=statistics.fmean(self.rec.pop("hooks") or [0.0]),
                        after_step_cpu_s=statistics.fmean(self.rec.pop("hooks_cpu") or [0.0]),
                        frames_per_s=row["frames_per_s"], epoch_s=row["seconds"],
                        compute_s=self._last - self._start, stats=dict(trainer.strategy.stats))


def worker(runs: list[tuple[str, dict[str, Any], bool]], opts: dict[str, Any]) -> dict[str, Any]:
    """Each learner: every scenario in turn, each a real Trainer run on fresh groups and store keys."""
    import torch.distributed as dist

    from asrtrain.distributed.config import DistConfig
    from asrtrain.distributed.launch import init_worker
    from asrtrain.distributed.strategy import DistributedStrategy
    from asrtrain.model.config import ModelConfig
    from asrtrain.train.config import TrainConfig
    from asrtrain.train.trainer import train

    place, store = init_worker("gloo", 120.0)
    n = place.world_size
    out: dict[str, Any] = {}
    try:
        for name, fields, gossip in runs:
            dist.barrier()
            strategy = DistributedStrategy(DistConfig(**fields), place, dist.PrefixStore(name, store))
            cfg = TrainConfig(archive=opts["archive"], exp=Path(opts["root"]) / name, epochs=1,
                              batch=opts["batch"] * n, base_batch=opts["batch"] * n, lr=0.01, warmup_epochs=0,
                              block_chunks=opts["batch"] * opts["batches"], log_every=10 ** 6, num_threads=1,
                              model=ModelConfig(hidden=opts["hidden"], layers=opts["layers"], proj=opts["proj"]))
            probe = Probe(gossip, opts["accel_s"])
            train(cfg, strategy, probe)
            gathered: list[Any] = [None] * n
            dist.all_gather_object(gathered, probe.rec)
            out[name] = gathered
    finally:
        dist.destroy_process_group()
    return out


def aggregate_fps(recs: list[dict[str, Any]]) -> float:
    """Real frames of all learners over the epoch's wall time: the trainer's own epoch figure."""
    return float(recs[0]["frames_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--proj", type=int, default=64)
    parser.add_argument("--dim", type=int, default=40)
    parser.add_argument("--pdfs", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=32,
                        help="chunks per learner per step (the papers: 2560 over 64 learners = 40)")
    parser.add_argument("--blocks", type=int, default=96, help="blocks in the epoch, shared by all learners")
    parser.add_argument("--batches", type=int, default=1, help="batches per block")
    parser.add_argument("--factor", type=float, default=3.0, help="straggler slow-down")
    parser.add_argument("--emulate-accelerator", dest="accel_s", type=float, default=0.0, metavar="S",
                        help="add S seconds of idle CPU per step, as while a GPU computes (default: none)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each scenario (median of the ratios)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import tempfile

    from asrtrain.data.synthetic import write_random_archive
    from asrtrain.distributed.local import launch_local

    opts = {k: getattr(args, k) for k in ("hidden", "layers", "proj", "batch", "batches", "accel_s")}
    root = Path(tempfile.mkdtemp(prefix="bench-dist-"))
    opts["root"] = str(root)
    opts["archive"] = str(write_random_archive(root / "train.h5", args.blocks * args.batches * args.batch,
                                               args.dim, args.pdfs))
    n = args.nproc
    slow = {"straggler_rank": n - 1, "straggler_factor": args.factor}
    # Warm-up epochs first (the first steps of a process are slow), then the scenarios
    # interleaved ``--repeats`` times; each figure is the best of its repeats.
    runs = [("warmup", {"strategy": "adpsgd", "nproc": n}, True),
            ("warmup-nogossip", {"strategy": "adpsgd", "nproc": n}, False)]
    for i in range(args.repeats):
        runs += [
            (f"adpsgd-nogossip.{i}", {"strategy": "adpsgd", "nproc": n}, False),
            (f"adpsgd.{i}", {"strategy": "adpsgd", "nproc": n}, True),
            (f"adpsgd-group.{i}", {"strategy": "adpsgd", "nproc": n, "gossip_transport": "group"}, True),
            (f"adpsgd-straggler.{i}", {"strategy": "adpsgd", "nproc": n, **slow}, True),
            (f"ssgd.{i}", {"strategy": "ssgd", "nproc": n}, True),
            (f"ssgd-straggler.{i}", {"strategy": "ssgd", "nproc": n, **slow}, True),
        ]
    load_start = os.getloadavg()  # other processes on these cores: the figures' context
    t0 = time.perf_counter()
    try:
        raw = launch_local(n, worker, (runs, opts), run_id="bench-dist")[0]
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    wall = time.perf_counter() - t0
    fast = list(range(n - 1))
    names = ("adpsgd-nogossip", "adpsgd", "adpsgd-straggler", "ssgd", "ssgd-straggler")
    res = {k: raw[f"{k}.0"] for k in names}
    # Runs next to each other share the machine's load (other processes on the same
    # cores): each ratio is taken within a repeat, and the median over repeats is kept.
    def step_of(k: str, i: int, key: str = "step_s") -> float:
        return statistics.median(raw[f"{k}.{i}"][r][key] for r in range(n))

    reps = range(args.repeats)
    step_ratios = [step_of("adpsgd", i) / step_of("adpsgd-nogossip", i) for i in reps]
    group_ratios = [step_of("adpsgd-group", i) / step_of("adpsgd-nogossip", i) for i in reps]
    cpu_ratios = [step_of("adpsgd", i, "cpu_per_step_s") / step_of("adpsgd-nogossip", i, "cpu_per_step_s")
                  for i in reps]
    adp_ratios = [aggregate_fps(raw[f"adpsgd-straggler.{i}"]) / aggregate_fps(raw[f"adpsgd.{i}"]) for i in reps]
    ssgd_ratios = [aggregate_fps(raw[f"ssgd-straggler.{i}"]) / aggregate_fps(raw[f"ssgd.{i}"]) for i in reps]
    step = {k: statistics.median(step_of(k, i) for i in reps) for k in ("adpsgd", "adpsgd-group", "adpsgd-nogossip")}
    cpu = {k: statistics.median(step_of(k, i, "cpu_per_step_s") for i in reps) for k in ("adpsgd", "adpsgd-nogossip")}
    fps = {k: statistics.median(aggregate_fps(raw[f"{k}.{i}"]) for i in reps) for k in names}
    figures = {
        "learners": n, "cpu_cores": os.cpu_count(), "params": res["adpsgd"][0]["params"],
        "step_s_gossip": round(step["adpsgd"], 4), "step_s_no_gossip": round(step["adpsgd-nogossip"], 4),
        "a_gossip_step_ratio": round(statistics.median(step_ratios), 3),
        "a_step_ratio_per_repeat": [round(v, 3) for v in step_ratios],
        "step_s_gossip_group": round(step["adpsgd-group"], 4),
        "a_group_step_ratio": round(statistics.median(group_ratios), 3),
        "a_group_ratio_per_repeat": [round(v, 3) for v in group_ratios],
        "shared_memory_rounds_rank0": res["adpsgd"][0]["stats"].get("shared_memory"),
        "cpu_s_per_step_gossip": round(cpu["adpsgd"], 4), "cpu_s_per_step_no_gossip": round(cpu["adpsgd-nogossip"], 4),
        "a_gossip_cpu_ratio": round(statistics.median(cpu_ratios), 3),
        "a_cpu_ratio_per_repeat": [round(v, 3) for v in cpu_ratios],
        "after_step_ms_gossip": round(1e3 * statistics.median(step_of("adpsgd", i, "after_step_s") for i in reps), 3),
        "after_step_ms_no_gossip": round(
            1e3 * statistics.median(step_of("adpsgd-nogossip", i, "after_step_s") for i in reps), 3),
        "after_step_cpu_ms_gossip": round(
            1e3 * statistics.median(step_of("adpsgd", i, "after_step_cpu_s") for i in reps), 3),
        "gossip_rounds_rank0": res["adpsgd"][0]["stats"].get("exchanged"),
        "gossip_comm_s_rank0": res["adpsgd"][0]["stats"].get("gossip_s"),
        "fps": {k: round(v, 1) for k, v in fps.items()},
        "b_adpsgd_straggler_ratio": round(statistics.median(adp_ratios), 3),
        "b_adpsgd_ratio_per_repeat": [round(v, 3) for v in adp_ratios],
        "b_ssgd_straggler_ratio": round(statistics.median(ssgd_ratios), 3),
        "b_ssgd_ratio_per_repeat": [round(v, 3) for v in ssgd_ratios],
        "adpsgd_straggler_blocks": [r["stats"].get("blocks") for r in res["adpsgd-straggler"]],
        "adpsgd_fast_learner_step_s_with_straggler": round(
            statistics.median(res["adpsgd-straggler"][r]["step_s"] for r in fast), 4),
        "adpsgd_straggler_epoch_s": [round(r["epoch_s"], 3) for r in res["adpsgd-straggler"]],
        "adpsgd_straggler_compute_s": [round(r["compute_s"], 3) for r in res["adpsgd-straggler"]],
        "adpsgd_epoch_s": [round(r["epoch_s"], 3) for r in res["adpsgd"]],
        "wall_s": round(wall, 1),
        "load_average_start": [round(v, 2) for v in load_start],
        "load_average_end": [round(v, 2) for v in os.getloadavg()],
    }
    print(f"4 learners on {os.cpu_count()} shared cores, BLSTM {args.layers}x{args.hidden} "
          f"({figures['params']} parameters), batch {args.batch} chunks per learner"
          + (f", {args.accel_s:g} s of emulated accelerator time per step" if args.accel_s else ""))
    print(f"(a) ADPSGD step time with gossip / without: {figures['a_gossip_step_ratio']:.3f} "
          f"({figures['step_s_gossip']:.4f} s vs {figures['step_s_no_gossip']:.4f} s; target <= 1.10; "
          f"per repeat {figures['a_step_ratio_per_repeat']}; "
          f"{figures['shared_memory_rounds_rank0']} of rank 0's {figures['gossip_rounds_rank0']} rounds "
          f"in shared memory)")
    print(f"    the same through the gossip process group (gloo, loopback TCP): {figures['a_group_step_ratio']:.3f} "
          f"({figures['step_s_gossip_group']:.4f} s; per repeat {figures['a_group_ratio_per_repeat']})")
    print(f"    CPU time per step (all threads of a learner), with / without: {figures['a_gossip_cpu_ratio']:.3f} "
          f"({figures['cpu_s_per_step_gossip']:.4f} s vs {figures['cpu_s_per_step_no_gossip']:.4f} s)")
    print(f"    compute thread's own gossip work (after_step: snapshot, apply) per step: "
          f"{figures['after_step_ms_gossip']:.3f} ms with gossip ({figures['after_step_cpu_ms_gossip']:.3f} ms of "
          f"its CPU), {figures['after_step_ms_no_gossip']:.3f} ms without")
    print(f"    load average (1, 5, 15 min) at start {figures['load_average_start']}, "
          f"at end {figures['load_average_end']}")
    print(f"(b) aggregate frames/s with learner {n - 1} slowed {args.factor:g}x, over the same without:")
    print(f"    ADPSGD {figures['b_adpsgd_straggler_ratio']:.3f} (target >= 0.7; per repeat "
          f"{figures['b_adpsgd_ratio_per_repeat']}; blocks per learner {figures['adpsgd_straggler_blocks']})")
    print(f"    SSGD   {figures['b_ssgd_straggler_ratio']:.3f} (falls towards 1/{args.factor:g}; per repeat "
          f"{figures['b_ssgd_ratio_per_repeat']})")
    print(json.dumps(figures))
    if args.json:
        from asrtrain.core.atomic import write_text

        write_text(args.json, json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()

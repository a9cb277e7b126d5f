#!/usr/bin/env python
"""What H-ADPSGD buys when the link between hosts is the bottleneck: 2 hosts × 2 learners.

Two hosts are network namespaces on this machine (``tests/distributed/netns.py``;
needs root). On each, ``torchrun`` starts two learners of the real ``asrtrain
train`` (c10d rendezvous on host 0's address). Each strategy trains one epoch of a
random archive, first on an unshaped link, then with every host's outgoing link
limited (``tc tbf``) so that sending the model once takes about one step's compute,
as the papers' 100 Gbit/s Ethernet did for a V100 step. The figure is each
strategy's aggregate frames/s (the epoch row of ``metrics.jsonl``) on the shaped
link over its own on the unshaped one.

Where the traffic goes: SSGD allreduces the gradients of the 4 learners every
step, across the link; ADPSGD learners gossip with a partner every round, on this
host or the other one in alternate rounds; H-ADPSGD super-learners are the hosts:
members allreduce on their host (loopback), and only the super-learners' gossip
crosses the link, each member sending its shard.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_hosts.py [--hidden 256] [--steps 40]``.
The 2 cores are shared by the 4 learners and their communication threads: step
times are those of a loaded machine, and the link's rate is set from them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "distributed"))

from netns import Hosts, torchrun, unavailable  # noqa: E402

from asrtrain.data.synthetic import write_random_archive  # noqa: E402
from asrtrain.model.config import ModelConfig  # noqa: E402

STRATEGIES = ("ssgd", "adpsgd", "h-adpsgd")
LEARNERS_PER_HOST = 2


def train_args(args: argparse.Namespace, archive: Path, exp: Path, strategy: str) -> list[str]:
    exe = str(Path(sys.executable).parent / "asrtrain")
    return [exe, "train", str(archive), str(exp), "--strategy", strategy, "--epochs", "1",
            "--batch", str(args.batch), "--base-batch", str(args.batch), "--hidden", str(args.hidden),
            "--layers", str(args.layers), "--proj", "0", "--warmup-epochs", "0", "--threads", "1",
            "--block-chunks", str(args.batch // 4), "--timeout", "120", "--log-every", "1000", "--no-resume"]


def run_once(hosts: Hosts, args: argparse.Namespace, archive: Path, root: Path, strategy: str,
             label: str, port: int) -> dict:
    """One epoch of ``strategy`` on both hosts; its epoch row (rank 0 writes it)."""
    exp = root / f"{strategy}-{label}"
    argv = ["--no-python", *train_args(args, archive, exp, strategy)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = torchrun(hosts, LEARNERS_PER_HOST, port, argv, run_id=f"{strategy}-{label}")
    procs = [hosts.popen(i, cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(hosts.n)]
    outs = [p.communicate(timeout=1800)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"{strategy} ({label}) failed:\n" + "\n".join(o[-2000:] for o in outs))
    rows = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines() if line.strip()]
    row = next(r for r in rows if r.get("kind") == "epoch")
    return {**row, **gossip_stats(exp)}


def gossip_stats(exp: Path) -> dict:
    """Rank 0's gossip figures of the epoch (its log line ``rank 0 epoch 1: {...}``)."""
    import ast
    import re

    for log in sorted((exp / "log").glob("train.rank0*.log")):
        found = re.findall(r"rank 0 epoch 1: (\{.*\})", log.read_text())
        if found:
            stats = ast.literal_eval(found[-1])
            return {"rounds": stats.get("rounds", 0), "rank0_steps": stats.get("steps", 0)}
    return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dim", type=int, default=40)
    parser.add_argument("--pdfs", type=int, default=500)
    parser.add_argument("--batch", type=int, default=32, help="effective batch (chunks per step, all learners)")
    parser.add_argument("--steps", type=int, default=40, help="steps per epoch")
    args = parser.parse_args()
    why = unavailable()
    if why:
        raise SystemExit(f"bench_hosts: cannot make hosts here: {why}")
    model = ModelConfig(input_dim=args.dim, hidden=args.hidden, layers=args.layers, proj=0, num_pdfs=args.pdfs)
    model_mb = model.num_parameters() * 4 / 1e6
    port = 29700 + os.getpid() % 200
    with tempfile.TemporaryDirectory(prefix="bench_hosts-") as tmp, Hosts(2) as hosts:
        root = Path(tmp)
        archive = write_random_archive(root / "train.h5", args.batch * args.steps, args.dim, args.pdfs)
        print(f"2 hosts × {LEARNERS_PER_HOST} learners (torchrun, c10d rendezvous on {hosts.addr(0)}); "
              f"model {args.layers}×{args.hidden} BLSTM, {model.num_parameters():,} parameters = "
              f"{model_mb:.1f} MB; batch {args.batch} chunks, {args.steps} steps an epoch")
        free = {}
        for k, strategy in enumerate(STRATEGIES):
            free[strategy] = run_once(hosts, args, archive, root, strategy, "free", port + k)
        adp = free["adpsgd"]
        step_s = adp["seconds"] / max(adp["learner_steps"] / (2 * LEARNERS_PER_HOST), 1)
        mbit = round(model_mb * 8 / step_s, 1)
        print(f"unshaped: an ADPSGD step takes {step_s * 1000:.0f} ms on this loaded machine; "
              f"link shaped to {mbit} Mbit/s per host, so the model ({model_mb:.1f} MB) takes one step to send")
        hosts.shape(mbit)
        shaped = {}
        for k, strategy in enumerate(STRATEGIES):
            shaped[strategy] = run_once(hosts, args, archive, root, strategy, "shaped", port + 10 + k)
        hosts.shape(None)
    print(f"\n{'strategy':10s} {'free fps':>10s} {'shaped fps':>11s} {'ratio':>7s}   gossip rounds per step (free, shaped)")
    for strategy in STRATEGIES:
        a, b = free[strategy]["frames_per_s"], shaped[strategy]["frames_per_s"]
        mix = [r["rounds"] / max(r["rank0_steps"], 1) if r.get("rounds") else 0.0 for r in (free[strategy], shaped[strategy])]
        print(f"{strategy:10s} {a:10,.0f} {b:11,.0f} {b / a:7.3f}   {mix[0]:.2f}, {mix[1]:.2f}")
    print(json.dumps({"model_mb": model_mb, "link_mbit": mbit, "step_s": step_s,
                      "free": {s: free[s]["frames_per_s"] for s in STRATEGIES},
                      "shaped": {s: shaped[s]["frames_per_s"] for s in STRATEGIES},
                      "rounds": {s: [free[s].get("rounds"), shaped[s].get("rounds")] for s in STRATEGIES}}))


if __name__ == "__main__":
    main()

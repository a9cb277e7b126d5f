#!/usr/bin/env python
"""What the hierarchy buys on a slow link, in convergence (issue 23): 2 hosts × 2 learners, real archives.

``scripts/bench_hosts.py`` shows the throughput side: on a shaped link flat ADPSGD keeps its
frames/s by gossiping less often, H-ADPSGD by sending only shards across the link. Gossiping
less often is not free: the learners drift further apart. Here ADPSGD and H-ADPSGD (the hosts
as super-learners) train the same real archive for the same epochs, on a free link and on a
link shaped so that sending the model once takes about one step's compute (the papers' 100
Gbit/s Ethernet against a V100 step), and the figures are what a user would compare: held-out
loss and frame accuracy by epoch, frames/s, and gossip rounds a step.

Usage (root, for the network namespaces; OMP_NUM_THREADS=1)::

    python scripts/bench_hosts_convergence.py recipes/synth/data/archives --epochs 4 \
        --json docs/study/hosts-convergence/result.json

The link's rate comes from a free-link ADPSGD epoch's step time on this (loaded) machine, as
in bench_hosts.py; ``--mbit`` sets it instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
sys.path.insert(0, str(REPO / "tests" / "distributed"))

from bench_hosts import LEARNERS_PER_HOST  # noqa: E402
from netns import Hosts, torchrun, unavailable  # noqa: E402

from asrtrain.data.archive import Archive  # noqa: E402
from asrtrain.model.config import ModelConfig  # noqa: E402
from asrtrain.train.metrics import epoch_rows  # noqa: E402

STRATEGIES = ("adpsgd", "h-adpsgd")


def train_argv(args: argparse.Namespace, exp: Path, strategy: str) -> list[str]:
    exe = str(Path(sys.executable).parent / "asrtrain")
    return [exe, "train", str(args.archives / "train.h5"), str(exp), "--valid", str(args.archives / "dev.h5"),
            "--strategy", strategy, "--epochs", str(args.epochs), "--batch", str(args.batch), "--base-batch",
            str(args.batch), "--lr", str(args.lr), "--warmup-epochs", "1", "--hidden", str(args.hidden),
            "--layers", str(args.layers), "--proj", str(args.proj), "--threads", "1", "--seed", str(args.seed),
            "--timeout", "300", "--select", "last", "--no-tensorboard", "--no-resume"]


def train(hosts: Hosts, args: argparse.Namespace, root: Path, strategy: str, label: str, port: int) -> dict:
    """``strategy`` on both hosts for ``--epochs``; its epoch rows and rank 0's gossip rounds a step."""
    import subprocess

    exp = root / f"{strategy}-{label}"
    cmd = torchrun(hosts, LEARNERS_PER_HOST, port, ["--no-python", *train_argv(args, exp, strategy)],
                   run_id=f"{strategy}-{label}")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [hosts.popen(i, cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(hosts.n)]
    outs = [p.communicate(timeout=3600)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise SystemExit(f"{strategy} ({label}) failed:\n" + "\n".join(o[-2000:] for o in outs))
    rows = epoch_rows(exp / "metrics.jsonl")
    return {"epochs": [{k: r.get(k) for k in ("epoch", "valid_loss", "valid_acc", "train_loss", "frames_per_s",
                                               "seconds", "learner_steps")} for r in rows],
            "rounds_per_step": rounds_per_step(exp), "exp": str(exp)}


def rounds_per_step(exp: Path) -> float | None:
    """Rank 0's gossip rounds over its steps, whole run (its log's last ``rank 0 epoch N`` line)."""
    import ast
    import re

    for log in sorted((exp / "log").glob("train.rank0*.log")):
        found = re.findall(r"rank 0 epoch \d+: (\{.*\})", log.read_text())
        if found:
            last = ast.literal_eval(found[-1])
            steps = sum(ast.literal_eval(f).get("steps", 0) for f in found)
            return last.get("rounds", 0) / max(steps, 1)
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("archives", type=Path, help="a directory with train.h5 and dev.h5")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=128, help="effective batch (chunks a step, all learners)")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--proj", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mbit", type=float, default=None, help="the shaped link's rate (default: from the free run)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    why = unavailable()
    if why:
        raise SystemExit(f"bench_hosts_convergence: cannot make hosts here: {why}")
    a = Archive(args.archives / "train.h5")
    model = ModelConfig(input_dim=a.feat_dim, hidden=args.hidden, layers=args.layers, proj=args.proj,
                        num_pdfs=a.num_pdfs)
    model_mb = model.num_parameters() * 4 / 1e6
    port = 29900 + os.getpid() % 90
    result: dict = {"model_mb": model_mb, "batch": args.batch, "epochs": args.epochs, "lr": args.lr, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="hosts-conv-") as tmp, Hosts(2) as hosts:
        root = Path(tmp)
        print(f"2 hosts × {LEARNERS_PER_HOST} learners; {args.layers}×{args.hidden} BLSTM proj {args.proj} "
              f"({model_mb:.2f} MB); batch {args.batch}, {args.epochs} epochs of {a.num_chunks} chunks", flush=True)
        for k, strategy in enumerate(STRATEGIES):
            result["runs"][f"{strategy}-free"] = train(hosts, args, root, strategy, "free", port + k)
        first = result["runs"]["adpsgd-free"]["epochs"][0]
        step_s = first["seconds"] / max(first["learner_steps"] / (2 * LEARNERS_PER_HOST), 1)
        mbit = args.mbit or round(model_mb * 8 / step_s, 1)
        result.update(step_s=step_s, link_mbit=mbit)
        print(f"free link: an ADPSGD step takes {step_s * 1000:.0f} ms; shaping each host's link to {mbit} Mbit/s",
              flush=True)
        hosts.shape(mbit)
        for k, strategy in enumerate(STRATEGIES):
            result["runs"][f"{strategy}-shaped"] = train(hosts, args, root, strategy, "shaped", port + 10 + k)
        hosts.shape(None)
    print(f"\n{'run':18s} {'rounds/step':>11s} {'frames/s':>9s}   held-out loss / frame accuracy by epoch")
    for name, run in result["runs"].items():
        fps = sum(e["frames_per_s"] for e in run["epochs"]) / len(run["epochs"])
        curve = "  ".join(f"{e['valid_loss']:.3f}/{100 * e['valid_acc']:.1f}%" for e in run["epochs"])
        rps = run["rounds_per_step"]
        print(f"{name:18s} {rps if rps is not None else float('nan'):11.2f} {fps:9,.0f}   {curve}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

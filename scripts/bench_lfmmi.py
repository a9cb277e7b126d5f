"""Speed of lattice-free MMI (``train-seq`` on a ``prepare den-graph`` file): the denominator's
forward-backward alone, and whole epochs on one learner or several, side by side.

    .venv/bin/python scripts/bench_lfmmi.py MODEL ARCHIVE DEN.npz [--utts 160] [--utts-per-step 8]

MODEL is a cross-entropy ``final.pt``, ARCHIVE its training archive, DEN its graph. Part one
times ``den_posteriors`` on the lengths of the archive's first ``--utts`` utterances (random
scores: the recursions' cost does not depend on them) with torch's threads at 1 and at the
cores this process may use, and on the GPU when there is one. Part two runs ``train-seq`` for
one epoch of ``--utts`` utterances (``--max-utts``) as a learner with one thread, one with every
core, and ``--nproc`` learners of one thread each, and prints each epoch's frames/s (from its
history, so start-up is left out) and the ratio to the first. The recipes' lfmmi stage runs the
fastest of these on a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


def den_rate(den_path: Path, lengths: list[int], per_step: int, num_pdfs: int, device: str) -> float:
    """Frames a second of the denominator's forward-backward over ``lengths`` in steps."""
    from asrtrain.train.den_graph import DenGraph
    from asrtrain.train.lfmmi import DenMatrices, den_posteriors

    den = DenMatrices.of(DenGraph.load(den_path), num_pdfs).to(device)
    rng = np.random.default_rng(0)
    scores = [0.1 * rng.normal(size=(n, num_pdfs)).astype(np.float32) for n in lengths]
    den_posteriors(den, scores[:1])   # warm-up (CUDA context, allocator)
    start = time.perf_counter()
    for i in range(0, len(scores), per_step):
        den_posteriors(den, scores[i:i + per_step])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return sum(lengths) / (time.perf_counter() - start)


def epoch_rate(args: argparse.Namespace, out: Path, extra: list[str]) -> float:
    """Frames a second of one ``train-seq`` epoch (its history's figure)."""
    cmd = [sys.executable, "-m", "asrtrain.cli.main", "train-seq", str(args.model), str(args.archive),
           str(args.den), str(out), "--epochs", "1", "--max-utts", str(args.utts), "--diagnostic-utts", "8",
           "--utts-per-step", str(args.utts_per_step), "--no-resume", *extra]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    history = json.loads((out / "history.json").read_text())
    return float(history[-1]["frames_per_second"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("archive", type=Path)
    ap.add_argument("den", type=Path)
    ap.add_argument("--utts", type=int, default=160)
    ap.add_argument("--utts-per-step", type=int, default=8)
    args = ap.parse_args()
    from asrtrain.model.io import load_final
    from asrtrain.train.validate import open_archive

    cores = len(os.sched_getaffinity(0))
    num_pdfs = load_final(args.model).config.num_pdfs
    lengths = [int(t) for _, _, _, t in open_archive(args.archive, "training").utterances[: args.utts]]
    print(f"{len(lengths)} utterances, {sum(lengths)} frames, {num_pdfs} pdfs, {cores} cores")
    rows = []
    for threads in sorted({1, cores}):
        torch.set_num_threads(threads)
        rows.append((f"denominator, CPU, {threads} thread(s)", den_rate(args.den, lengths, args.utts_per_step,
                                                                        num_pdfs, "cpu")))
    if torch.cuda.is_available():
        rows.append(("denominator, GPU", den_rate(args.den, lengths, args.utts_per_step, num_pdfs, "cuda")))
    for name, rate in rows:
        print(f"{name:40s} {rate:10.0f} frames/s  {rate / rows[0][1]:5.2f}x")
    runs = [("train-seq, 1 learner, 1 thread", ["--threads", "1"]),
            (f"train-seq, 1 learner, {cores} threads", ["--threads", str(cores)]),
            (f"train-seq, {cores} learners, 1 thread each", ["--nproc", str(cores)])]
    with tempfile.TemporaryDirectory() as tmp:
        rates = [(name, epoch_rate(args, Path(tmp) / str(i), extra)) for i, (name, extra) in enumerate(runs)]
    for name, rate in rates:
        print(f"{name:40s} {rate:10.0f} frames/s  {rate / rates[0][1]:5.2f}x")


if __name__ == "__main__":
    main()

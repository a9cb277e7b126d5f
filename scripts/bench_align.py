#!/usr/bin/env python
"""How good and how fast are alignments made from nothing (``asrtrain prepare align``)?

Two parts, both printed as tables:

1. **Quality and time per rung** on a corpus whose exact alignments are known (the
   embedded corpus): runs ``asrtrain prepare align --reference`` (or reads the
   ``report.json`` of a run given with ``--report``) and prints, after each rung
   (mono, tri, LDA+MLLT, SAT), the share of phone boundaries within 10 and 20 ms of the
   exact ones, frame-level phone agreement and the rung's time; then the same for the
   held-out splits aligned with the final model.
2. **One EM step, asrtrain's AcousticModel against Kaldi's AmDiagGmm** (kaldi-hmm-gmm:
   AccumAmDiagGmm.accumulate_for_gmm per frame + mle_am_diag_gmm_update) on the same
   random aligned frames: the largest parameter difference and both times, side by side
   in one run (``--kaldi-sizes pdfs comps dim frames``). Needs kaldi-hmm-gmm.
3. **Jobs** (``--nj 1 2 ...``): the same run once per number of jobs, then per stage
   (each rung, each split's final alignment, the SAT features) wall and CPU seconds
   (this process and every job's) per hour of audio, side by side.

Usage (the demo's corpus, after its stages 0-1)::

    .venv/bin/python scripts/bench_align.py --corpus recipes/synth/data/corpus \\
        --mfcc recipes/synth/data/mfcc --out /tmp/bench_ali
    .venv/bin/python scripts/bench_align.py --report recipes/synth/exp/ali/report.json
    .venv/bin/python scripts/bench_align.py --corpus recipes/synth/data/corpus \
        --mfcc recipes/synth/data/mfcc --out /tmp/bench_nj --nj 1 2 -- --gauss 6000 --iters 15
    # the jobs as separate programs on TCP, as on a cluster (prepare align --job-cmd)
    .venv/bin/python scripts/bench_align.py --corpus recipes/synth/data/corpus \\
        --mfcc recipes/synth/data/mfcc --out /tmp/bench_tcp --nj 2 -- --gauss 6000 --iters 15 \\
        --job-cmd env --listen 127.0.0.1
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_align(args: argparse.Namespace) -> Path:
    """``prepare align`` on the corpus' train split (dev and test aligned too); its report."""
    cmd = [str(Path(sys.executable).parent / "asrtrain"), "prepare", "align",
           str(args.corpus / "dict"), str(args.mfcc / "train"), str(args.out),
           "--phones", str(args.corpus / "phones.txt"), "--reference", str(args.corpus),
           *args.extra]
    for split in ("dev", "test"):
        if (args.mfcc / split / "feats.scp").exists():
            cmd += ["--split", f"{split}={args.mfcc / split}"]
    t0 = time.time()
    subprocess.run(cmd, check=True)
    print(f"prepare align: {time.time() - t0:.1f} s wall clock ({' '.join(cmd[1:4])} ...)")
    return args.out / "report.json"


def print_report(path: Path) -> None:
    report = json.loads(path.read_text())
    head = f"{'':10} {'within 10 ms':>12} {'within 20 ms':>12} {'frames':>8} {'median ms':>9} {'s':>7}"
    print(head)
    total = 0.0
    for stage, fig in report["stages"].items():
        a = fig.get("agreement", {})
        total += fig["seconds"]
        print(f"{stage:10} {a.get('within_10ms', float('nan')):12.3f} "
              f"{a.get('within_20ms', float('nan')):12.3f} {a.get('frame_agreement', float('nan')):8.3f} "
              f"{a.get('median_abs_error_ms', float('nan')):9.1f} {fig['seconds']:7.1f}")
    for split, fig in report["splits"].items():
        a = fig.get("agreement", {})
        total += fig["seconds"]
        lost = sum(fig["lost"].values())
        label = f"{split}*" if a else split
        print(f"{label:10} {a.get('within_10ms', float('nan')):12.3f} "
              f"{a.get('within_20ms', float('nan')):12.3f} {a.get('frame_agreement', float('nan')):8.3f} "
              f"{a.get('median_abs_error_ms', float('nan')):9.1f} {fig['seconds']:7.1f}"
              f"   aligned {fig['aligned']}, lost {lost}")
    print(f"{'total':10} {'':12} {'':12} {'':8} {'':9} {total:7.1f}")
    print("(* held-out split aligned with the final model; the rows above are the training "
          "split after each rung)")


def timing_rows(report: dict) -> dict[str, dict]:
    """Every timed part of a report: the rungs, each split's final alignment, SAT features."""
    rows = {stage: fig for stage, fig in report["stages"].items()}
    rows.update({f"align {split}": fig for split, fig in report["splits"].items()})
    if "sat_fmllr_time" in report:
        rows["SAT features"] = report["sat_fmllr_time"]
    return rows


def print_jobs(reports: dict[int, dict]) -> None:
    """Per part and number of jobs: wall and CPU seconds, and both per hour of audio."""
    print(f"{'':14} {'nj':>3} {'audio h':>8} {'wall s':>8} {'cpu s':>8} {'wall s/h':>9} "
          f"{'cpu s/h':>9} {'speed-up':>8}")
    first = next(iter(reports.values()))
    for part in timing_rows(first):
        for nj, report in reports.items():
            fig = timing_rows(report)[part]
            hours = fig["audio_hours"]
            base = timing_rows(first)[part]["seconds"]
            print(f"{part:14} {nj:3d} {hours:8.3f} {fig['seconds']:8.1f} {fig['cpu_seconds']:8.1f} "
                  f"{fig['seconds'] / hours:9.0f} {fig['cpu_seconds'] / hours:9.0f} "
                  f"{base / max(fig['seconds'], 1e-9):8.2f}")
    for nj, report in reports.items():
        rows = timing_rows(report).values()
        wall, cpu = sum(f["seconds"] for f in rows), sum(f["cpu_seconds"] for f in rows)
        print(f"{'total':14} {nj:3d} {'':8} {wall:8.1f} {cpu:8.1f}")


def kaldi_side_by_side(sizes: list[int]) -> None:
    script = REPO / "tests" / "align" / "kaldi_gmm_check.py"
    proc = subprocess.run([sys.executable, str(script), *map(str, sizes)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        print(f"kaldi-hmm-gmm comparison skipped: {proc.stderr.strip().splitlines()[-1]}")
        return
    got = json.loads(proc.stdout)
    s = got["seconds"]
    print(f"one EM step, {got['frames']} frames ({' x '.join(map(str, sizes[:3]))} pdfs x "
          f"comps x dim): asrtrain {s['asrtrain']:.3f} s, Kaldi's AmDiagGmm {s['kaldi']:.3f} s, "
          f"ratio {s['asrtrain'] / s['kaldi']:.2f}; largest differences {got['max_abs_diff']} "
          f"(Kaldi removed {got['kaldi_removed']} Gaussians under its min count)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, help="corpus dir with dict/, phones.txt, exact ali")
    ap.add_argument("--mfcc", type=Path, help="dir with {train,dev,test} MFCC data dirs")
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench_align"))
    ap.add_argument("--report", type=Path, help="print this report.json instead of running")
    ap.add_argument("--kaldi-sizes", type=int, nargs=4, default=[500, 8, 39, 100000])
    ap.add_argument("--nj", type=int, nargs="+", help="run once per number of jobs; compare")
    ap.add_argument("extra", nargs="*", help="more options for prepare align (after --)")
    args = ap.parse_args()
    if args.nj:
        reports, root, extra = {}, args.out, list(args.extra)
        for nj in args.nj:
            args.out, args.extra = root / f"nj{nj}", [*extra, "--nj", str(nj)]
            reports[nj] = json.loads(run_align(args).read_text())
            print_report(args.out / "report.json")
        print_jobs(reports)
        return
    if args.report is None and args.corpus is not None:
        args.report = run_align(args)
    if args.report is not None:
        print_report(args.report)
    kaldi_side_by_side(args.kaldi_sizes)


if __name__ == "__main__":
    main()

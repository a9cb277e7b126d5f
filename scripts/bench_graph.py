#!/usr/bin/env python
"""What does HCLG cost at LibriSpeech size? Time and peak memory of each graph step.

A synthetic lang (``bench_graph_synth.py``: N words of 2–12 phones over 40 phones, a
count-pruned 3-gram of M n-grams, a tree of a few thousand pdfs) goes through the graph
steps ``prepare lang`` runs, with the project's own functions, in a child process: L
(dict dir → L_disambig), G (kaldilm), LG, C∘LG, H∘CLG, determinize, minimize, self-loops,
write. Each step's wall and CPU seconds and peak RSS (VmHWM, reset between steps through
/proc/self/clear_refs) are logged as it ends. Several sizes give each step's growth
(a power law in the n-gram count), which predicts the full size before it is tried; a
watchdog kills the child above ``--max-gb`` of RSS.

Usage::

    nice -n 10 .venv/bin/python scripts/bench_graph.py --words 20000 50000 \\
        --ngrams 150000 375000 --out /work/bench_graph/small.json   # predicts 200k/1.5M
    nice -n 10 .venv/bin/python scripts/bench_graph.py --out /work/bench_graph/full.json
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEPS = ("L", "G", "LG", "C∘LG", "H∘CLG", "determinize", "minimize", "self-loops", "write")


# -- measuring (in the child) -------------------------------------------------------------
def _status_kb(field: str, pid: str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class Steps:
    """Wall s, CPU s and peak RSS (MB) of consecutive steps of this process; a step ends
    where the next begins, so build_hclg's own log lines can cut its steps."""

    def __init__(self) -> None:
        self.out: dict[str, dict] = {}
        self.name: str | None = None

    def start(self, name: str) -> None:
        self.end()
        Path("/proc/self/clear_refs").write_text("5")    # VmHWM := VmRSS
        self.name, self.c0, self.w0 = name, time.process_time(), time.perf_counter()

    def end(self, states_arcs: tuple[int, int] | None = None) -> None:
        if self.name is None:
            return
        row = {"wall": round(time.perf_counter() - self.w0, 2),
               "cpu": round(time.process_time() - self.c0, 2),
               "peak_mb": _status_kb("VmHWM") // 1024, "rss_mb": _status_kb("VmRSS") // 1024}
        if states_arcs:
            row["states"], row["arcs"] = states_arcs
        self.out[self.name] = row
        print(f"bench_graph: {self.name:12} wall {row['wall']:8.1f} s  cpu {row['cpu']:8.1f} s  "
              f"peak {row['peak_mb']:6d} MB  {states_arcs or ''}", file=sys.stderr, flush=True)
        self.name = None


class _Cut(logging.Handler):
    """Ends a step at each ``graph: <step> done`` line of ``asrtrain.lang.graph``."""

    def __init__(self, steps: Steps) -> None:
        super().__init__()
        self.steps = steps

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("graph: %s done") and record.args:
            what, _, s, a = record.args  # type: ignore[misc]
            self.steps.end((int(s), int(a)))
            nxt = STEPS.index(str(what)) + 1
            self.steps.start(STEPS[nxt] if STEPS[nxt] != "write" else "(after self-loops)")


def build(work: Path) -> dict:
    """The graph steps of ``prepare lang`` on ``work``'s dict, lm.arpa and tree."""
    import kaldifst

    from asrtrain.core.atomic import write_text
    from asrtrain.lang import graph as graphs
    from asrtrain.lang.lexicon import (
        align_lexicon_text,
        lexicon_fst,
        phone_table,
        read_dict_dir,
        word_table,
        write_symbols,
    )
    from asrtrain.lang.prepare import _arpa_to_g
    from asrtrain.lang.tree import ContextTree

    base_mb = _status_kb("VmRSS") // 1024
    lang = work / "lang"
    lang.mkdir(exist_ok=True)
    steps, sizes = Steps(), {}
    steps.start("L")
    lex = read_dict_dir(work / "dict")
    ptab, wtab = phone_table(lex), word_table(lex)
    write_symbols(lang / "phones.txt", ptab)
    write_symbols(lang / "words.txt", wtab)
    write_text(lang / "align_lexicon.txt", align_lexicon_text(lex))
    disambig_ids = [i for p, i in ptab.items() if p.startswith("#")]
    L_disambig = lexicon_fst(lex, True)
    graphs.write_fst(L_disambig, lang / "L_disambig.fst")
    steps.end(graphs.size(L_disambig))
    steps.start("G")
    _arpa_to_g(work / "lm.arpa", lang / "words.txt", lang / "G.fst")
    G = kaldifst.StdVectorFst.read(str(lang / "G.fst"))
    sizes["G"] = graphs.size(G)
    steps.end(sizes["G"])
    tree = ContextTree.from_json(json.loads((work / "tree").read_text()))
    steps.start("LG")
    lg = graphs.build_lg(L_disambig, G)
    sizes["LG"] = graphs.size(lg)
    steps.end(sizes["LG"])
    del G, L_disambig
    cut = _Cut(steps)
    logging.getLogger("asrtrain.lang.graph").addHandler(cut)
    logging.getLogger("asrtrain.lang.graph").setLevel(logging.INFO)
    steps.start("C∘LG")
    hclg = graphs.build_hclg(lg, tree, disambig_ids, sizes)
    logging.getLogger("asrtrain.lang.graph").removeHandler(cut)
    del lg
    steps.start("write")
    graphs.write_graph_dir(lang / "graph", hclg, lang, tree, lex.silence, sizes)
    steps.end()
    return {"steps": steps.out, "sizes": sizes, "base_mb": base_mb,
            "hclg_bytes": (lang / "graph" / "HCLG.fst").stat().st_size}


# -- the parent -----------------------------------------------------------------------------
def child(mode: str, *args: str, max_gb: float) -> dict:
    """This script's ``--child`` mode in a fresh process (stderr passes through), watched:
    killed above ``max_gb`` of RSS. Its JSON result, with its peak RSS and wall time."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", mode, *args],
                            stdout=subprocess.PIPE, text=True, env=env)
    peak = [0, False]

    def watch() -> None:
        while proc.poll() is None:
            try:
                rss = _status_kb("VmRSS", str(proc.pid))
            except OSError:
                return
            peak[0] = max(peak[0], rss)
            if rss > max_gb * 2**20:
                peak[1] = True
                proc.kill()
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()
    out, _ = proc.communicate()
    if peak[1]:
        raise SystemExit(f"child {mode} {args} passed {max_gb} GB of RSS and was killed")
    if proc.returncode:
        raise SystemExit(f"child {mode} {args} failed (exit {proc.returncode})")
    got = json.loads(out.strip().splitlines()[-1])
    got["sampled_peak_mb"] = peak[0] // 1024
    got["child_wall"] = round(time.perf_counter() - t0, 1)
    return got


def run_size(work: Path, words: int, ngrams: int, pdfs: int, utterances: int,
             max_gb: float, reuse: bool = False) -> dict:
    """Generate (unless there) and build one size (with ``reuse``, unless built before);
    its figures, kept in the size's directory."""
    d = work / f"w{words}_n{ngrams}_p{pdfs}"
    d.mkdir(parents=True, exist_ok=True)
    made = d / "inputs.json"
    if not made.exists():
        gen = child("make", str(d), str(words), str(ngrams), str(pdfs), str(utterances),
                    max_gb=max_gb)
        made.write_text(json.dumps(gen) + "\n")
    inputs = json.loads(made.read_text())
    print(f"== {words} words ({inputs['prons']} prons), n-grams {inputs['ngrams']}, "
          f"{inputs['pdfs']} pdfs", flush=True)
    built = d / "build.json"
    if reuse and built.exists():
        return json.loads(built.read_text())
    res = {"inputs": inputs, **child("build", str(d), max_gb=max_gb)}
    built.write_text(json.dumps(res) + "\n")
    return res


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares power law y = a·x^b (log-log); (a, b)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-3)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    var = sum((x - mx) ** 2 for x in lx)
    b = sum((x - mx) * (y - my) for x, y in zip(lx, ly, strict=True)) / var if var else 0.0
    return math.exp(my - b * mx), b


def table(runs: list[dict], target: int | None) -> dict:
    """Print each step per size, its growth exponents and (for ≥ 2 sizes) the prediction
    at ``target`` n-grams; returns the fits."""
    heads = [f"{r['inputs']['words'] // 1000}k/{sum(r['inputs']['ngrams']) / 1e6:.2f}M"
             for r in runs]
    print(f"\n{'step':12} " + " ".join(f"{h:>34}" for h in heads)
          + ("   exponents: wall cpu mem  -> predicted" if len(runs) > 1 else ""))
    print(f"{'':12} " + " ".join(f"{'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'arcs':>8}"
                                 for _ in runs))
    xs = [sum(r["inputs"]["ngrams"]) for r in runs]
    fits: dict[str, dict] = {}
    for step in STEPS:
        rows = [r["steps"].get(step) for r in runs]
        if not all(rows):
            continue
        line = f"{step:12} " + " ".join(
            f"{x['wall']:8.1f} {x['cpu']:8.1f} {x['peak_mb']:8d} {x.get('arcs', 0) / 1e6:7.2f}M"
            for x in rows)
        if len(runs) > 1 and target:
            f = {k: fit(xs, [x[k] for x in rows]) for k in ("wall", "cpu")}
            f["mem"] = fit(xs, [x["peak_mb"] - r["base_mb"] for x, r in zip(rows, runs, strict=True)])
            f["arcs"] = fit(xs, [x.get("arcs", 1) for x in rows])
            pred = {k: a * target ** b for k, (a, b) in f.items()}
            pred["mem"] += runs[-1]["base_mb"]
            fits[step] = {"exponents": {k: round(b, 2) for k, (_, b) in f.items()},
                          "predicted": {k: round(v, 1) for k, v in pred.items()}}
            line += (f"   {f['wall'][1]:4.2f} {f['cpu'][1]:4.2f} {f['mem'][1]:4.2f}"
                     f"  -> cpu {pred['cpu']:6.0f} s {pred['mem']:7.0f} MB {pred['arcs'] / 1e6:6.1f}M arcs")
        print(line)
    for r, h in zip(runs, heads, strict=True):
        peak = max(x["peak_mb"] for x in r["steps"].values())
        wall = sum(x["wall"] for x in r["steps"].values())
        cpu = sum(x["cpu"] for x in r["steps"].values())
        print(f"{h:>12}: total wall {wall:.0f} s, cpu {cpu:.0f} s, peak {peak} MB "
              f"(sampled {r['sampled_peak_mb']} MB), HCLG {r['sizes']['HCLG'][0]:,} states "
              f"{r['sizes']['HCLG'][1]:,} arcs, {r['hclg_bytes'] / 2**20:.0f} MiB on disk")
    return fits


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        sys.path.insert(0, str(HERE))
        if sys.argv[2] == "make":
            from bench_graph_synth import make_lang_inputs

            d, words, ngrams, pdfs, utts = sys.argv[3:8]
            got = make_lang_inputs(Path(d), int(words), int(ngrams), int(pdfs), int(utts))
        else:
            got = build(Path(sys.argv[3]))
        print(json.dumps(got))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--words", type=int, nargs="+", default=[200_000])
    ap.add_argument("--ngrams", type=int, nargs="+", default=[1_500_000],
                    help="n-grams in all, one per --words (about 8:5 bigrams:trigrams above "
                         "the unigrams)")
    ap.add_argument("--pdfs", type=int, default=3000, help="the tree's pdfs (about)")
    ap.add_argument("--utterances", type=int, default=3000,
                    help="synthetic aligned utterances the tree is built from")
    ap.add_argument("--predict", type=int, default=1_500_000,
                    help="n-grams to predict each step at (from 2 or more sizes)")
    ap.add_argument("--max-gb", type=float, default=20.0, help="kill a child above this RSS")
    ap.add_argument("--work", type=Path, default=Path("/work/bench_graph"))
    ap.add_argument("--reuse", action="store_true",
                    help="take the figures of a size built before instead of building it again")
    ap.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = ap.parse_args()
    if len(args.words) != len(args.ngrams):
        ap.error("give as many --ngrams as --words")
    runs = [run_size(args.work, w, n, args.pdfs, args.utterances, args.max_gb, args.reuse)
            for w, n in zip(args.words, args.ngrams, strict=True)]
    fits = table(runs, args.predict)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"runs": runs, "fits": fits, "predict_ngrams": args.predict},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()

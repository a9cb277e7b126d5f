#!/usr/bin/env python3
"""Lattices, the LM-weight sweep on them, and rescoring with the full LM: figures.

  graph LANG ARPA OUT        HCLG from an ARPA with LANG's lexicon and tree (the tree of
                             LANG's model, so its final.pt decodes it): size, build time
  sweep LATDIR GRAPH         the sweep of a lattice decode's grid per utterance, against
                             decoding once per setting (the one-best decoder's RTF)
  rescore LATDIR OLD NEW     rescoring time per utterance and the lattices' growth
  table --row LABEL=TEST,GRAPH ...   the WER table of decode dirs scored with --pick-on

The WER table of issue 25 on the embedded corpus (recipes/synth, the demo's model):
(a) HCLG from the full 4-gram, one-best; (b) HCLG from the LM pruned to a tenth, one-best;
(c) (b)'s lattices rescored with the full 4-gram. The commands (run in recipes/synth,
E=exp/blstm_h-adpsgd, GRID="--lmwt 4,6,8,10,12 --wip 0.0,0.5,1.0"):

  asrtrain prepare lang data/corpus/dict - data/corpus data/lang_p45k --arpa data/lang/lm.arpa \
      --prune-ngrams 45000 --num-pdfs 300               # same tree as data/lang
  for s in dev test; do
    asrtrain decode $E/final.pt data/lang/graph data/archives/$s.h5 $E/lm25/a_1best_$s $GRID \
        --text data/corpus/$s/text                                                   # (a)
    asrtrain decode $E/final.pt data/lang_p45k/graph data/archives/$s.h5 $E/lm25/b_1best_$s $GRID \
        --text data/corpus/$s/text                                                   # (b)
    asrtrain decode $E/final.pt data/lang_p45k/graph data/archives/$s.h5 $E/lm25/b_lat_$s $GRID \
        --text data/corpus/$s/text --lattices
    asrtrain rescore data/lang_p45k data/lang_p45k data/lang_p45k/graph $E/lm25/b_lat_$s \
        $E/lm25/c_rescored_$s $GRID                                                  # (c)
  done
  for x in a_1best b_1best b_lat c_rescored; do
    asrtrain score --sweep $E/lm25/${x}_test --pick-on $E/lm25/${x}_dev; done
  bench_rescore.py table --row "(a)=$E/lm25/a_1best_test,data/lang/graph" ...

Timings are CPU seconds of this process (the machine's cores are shared).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def build_graph(lang: Path, arpa: Path, out: Path) -> dict:
    """G from ``arpa`` (kaldilm, as prepare lang), LG, HCLG on LANG's tree; the graph dir
    as ``prepare lang`` writes it. Returns sizes and times."""
    import kaldifst

    from asrtrain.core.atomic import atomic_path, write_text
    from asrtrain.lang import graph as graphs
    from asrtrain.lang.fstio import write_const
    from asrtrain.lang.prepare import _arpa_to_g
    from asrtrain.lang.tree import ContextTree

    tree = ContextTree.from_json(json.loads((lang / "tree").read_text()))
    disambig = [int(x) for x in (lang / "disambig_phones.int").read_text().split()]
    out.mkdir(parents=True, exist_ok=True)
    w0, c0 = _clock()
    _arpa_to_g(arpa, lang / "words.txt", out / "G.fst")
    G = kaldifst.StdVectorFst.read(str(out / "G.fst"))
    L = kaldifst.StdVectorFst.read(str(lang / "L_disambig.fst"))
    sizes = {"G": graphs.size(G)}
    lg = graphs.build_lg(L, G)
    sizes["LG"] = graphs.size(lg)
    hclg = graphs.build_hclg(lg, tree, disambig, sizes)
    del lg, G
    with atomic_path(out / "graph") as tmp:
        tmp.mkdir()
        write_const(hclg, tmp / "HCLG.fst")
        for name in ("words.txt", "phones.txt", "tree", "tree_id", "align_lexicon.txt"):
            shutil.copyfile(lang / name, tmp / name)
        info = json.loads((lang / "graph" / "info.json").read_text())
        info["sizes"] = sizes
        write_text(tmp / "info.json", json.dumps(info, indent=2) + "\n")
    w1, c1 = _clock()
    return {"arpa": str(arpa), "sizes": sizes, "wall_s": w1 - w0, "cpu_s": c1 - c0,
            "hclg_bytes": (out / "graph" / "HCLG.fst").stat().st_size}


def cmd_graph(args: argparse.Namespace) -> None:
    figures = build_graph(args.lang, args.arpa, args.out)
    (args.out / "graph_build.json").write_text(json.dumps(figures, indent=2) + "\n")
    s, a = figures["sizes"]["HCLG"]
    print(f"{args.out}/graph: HCLG {s} states {a} arcs ({figures['hclg_bytes'] / 2**20:.0f} MiB), "
          f"built in {figures['wall_s']:.1f} s wall, {figures['cpu_s']:.1f} s CPU (G to HCLG)")


def _read_lattices(latdir: Path) -> list[tuple[str, object]]:
    from asrtrain.decode.lattice_io import read_archive
    from asrtrain.decode.lmrescore import lattice_archives

    return [item for path in lattice_archives(latdir) for item in read_archive(path)]


def cmd_sweep(args: argparse.Namespace) -> None:
    """The grid's best paths per utterance: one vectorized DP against a DP per setting
    (``WordLattice.best_path``), and the whole write (hyps and CTMs) against decoding."""
    from asrtrain.decode.graph_dir import GraphInfo
    from asrtrain.decode.grid import parse_lmwt, parse_wip, settings
    from asrtrain.decode.lattice_sweep import best_paths, write_sweep

    lats = _read_lattices(args.latdir)
    grid = [(w, p) for w, p, _ in settings(parse_lmwt(args.lmwt, 0.1), parse_wip(args.wip))]
    frames = sum(lat.num_frames for _, lat in lats)
    audio = frames * 0.01
    c0 = time.process_time()
    for _ in range(args.repeats):
        for _, lat in lats:
            best_paths(lat, grid)
    dp = (time.process_time() - c0) / args.repeats
    c0 = time.process_time()
    for _, lat in lats:
        for w, p in grid:
            lat.best_path(w, p)
    loop = time.process_time() - c0
    graph = GraphInfo.load(args.graph)
    c0 = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        write_sweep(lats, graph, graph.pdf_info, parse_lmwt(args.lmwt, 0.1), parse_wip(args.wip),
                    Path(tmp))
    full = time.process_time() - c0
    arcs = np.array([lat.num_arcs for _, lat in lats])
    print(f"{len(lats)} lattices, {audio:.0f} s of audio, arcs per lattice median "
          f"{np.median(arcs):.0f} max {arcs.max()}; grid of {len(grid)} settings")
    print(f"  sweep DP, all settings at once : {1e3 * dp / len(lats):8.2f} ms/utt   RTF {dp / audio:.5f}")
    print(f"  one DP per setting (best_path) : {1e3 * loop / len(lats):8.2f} ms/utt   RTF {loop / audio:.5f}"
          f"   ({loop / dp:.1f}x the sweep)")
    print(f"  sweep with hyps and CTMs       : {1e3 * full / len(lats):8.2f} ms/utt   RTF {full / audio:.5f}")
    if args.onebest is not None:
        stats = json.loads((args.onebest / "decode_stats.json").read_text())
        per_pass = stats["rtf_decode_per_lmwt"]
        print(f"  one-best decoding per setting  : RTF {per_pass:.5f} a pass, {per_pass * len(grid):.4f} "
              f"for the grid ({args.onebest}); the sweep is {per_pass * len(grid) / (full / audio):.0f}x cheaper")


def cmd_rescore(args: argparse.Namespace) -> None:
    """Rescoring time per utterance and the lattices' growth."""
    from asrtrain.decode.lmrescore import load_lm
    from asrtrain.decode.rescore import RescoreStats, rescore

    lats = _read_lattices(args.latdir)
    w0, c0 = _clock()
    old = load_lm(args.old, args.words, "first")
    new = load_lm(args.new, args.words, "full")
    w1, c1 = _clock()
    stats = RescoreStats()
    times = []
    for _, lat in lats:
        t = time.process_time()
        _, st = rescore(lat, old, new)
        times.append(time.process_time() - t)
        stats.add(st)
    audio = sum(lat.num_frames for _, lat in lats) * 0.01
    t = np.array(times)
    print(f"LMs loaded in {w1 - w0:.1f} s wall ({c1 - c0:.1f} s CPU); {len(lats)} lattices, {audio:.0f} s audio")
    print(f"  rescoring: {1e3 * t.mean():.1f} ms/utt mean, {1e3 * np.median(t):.1f} median, "
          f"{1e3 * t.max():.0f} max; RTF {t.sum() / audio:.5f}")
    print(f"  states {stats.states_in} -> {stats.states_out} ({stats.states_out / max(stats.states_in, 1):.2f}x), "
          f"arcs {stats.arcs_in} -> {stats.arcs_out} ({stats.arcs_out / max(stats.arcs_in, 1):.2f}x); "
          f"dropped arcs {stats.dropped_arcs}")


def cmd_table(args: argparse.Namespace) -> None:
    """The WER table: each row a test decode dir scored with ``score --sweep TEST
    --pick-on DEV`` (its ``score/dev_picked.json``), and the graph it was decoded with."""
    print("| run | graph (HCLG states / arcs) | test WER, dev-picked (setting) | dev WER there "
          "| best on test (oracle) |")
    print("| --- | --- | --- | --- | --- |")
    for label, test_dir, graph in (r.split("=", 1)[:1] + r.split("=", 1)[1].split(",") for r in args.row):
        pick = json.loads((Path(test_dir) / "score" / "dev_picked.json").read_text())
        sizes = json.loads((Path(graph) / "info.json").read_text())["sizes"]["HCLG"]
        p = pick["picked"]

        def wer(line: str) -> str:  # as compute-wer prints it ("%WER 6.59 [ 93 / 1411 ...")
            return line.split()[1] + "%"

        print(f"| {label} | {sizes[0]:,} / {sizes[1]:,} | {wer(pick['test_line'])} "
              f"({p['lmwt']}, {p['wip']}) | {wer(pick['dev_line'])} | "
              f"{wer(pick['oracle']['line'])} ({pick['oracle']['name']}) |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("graph", help="HCLG from an ARPA on LANG's lexicon and tree")
    g.add_argument("lang", type=Path)
    g.add_argument("arpa", type=Path)
    g.add_argument("out", type=Path)
    g.set_defaults(func=cmd_graph)
    sw = sub.add_parser("sweep", help="the sweep of a lattice decode against decoding per setting")
    sw.add_argument("latdir", type=Path)
    sw.add_argument("graph", type=Path)
    sw.add_argument("--lmwt", default="4,6,8,10,12")
    sw.add_argument("--wip", default="0.0,0.5,1.0")
    sw.add_argument("--repeats", type=int, default=3)
    sw.add_argument("--onebest", type=Path, help="a one-best decode dir of the same data (its RTF)")
    sw.set_defaults(func=cmd_sweep)
    r = sub.add_parser("rescore", help="rescoring time and lattice growth")
    r.add_argument("latdir", type=Path)
    r.add_argument("old", type=Path)
    r.add_argument("new", type=Path)
    r.add_argument("--words", type=Path, required=True, help="the graph's words.txt")
    r.set_defaults(func=cmd_rescore)
    t = sub.add_parser("table", help="the WER table of scored decode dirs")
    t.add_argument("--row", action="append", required=True, metavar="LABEL=TEST_DIR,GRAPH",
                   help="a test decode dir scored with --pick-on, and its graph dir")
    t.set_defaults(func=cmd_table)
    args = p.parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())

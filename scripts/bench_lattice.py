"""Lattice decoding against one-best decoding: real-time factor of the whole LM-weight grid
on one core, lattice sizes, and whether the two give the same words.

    .venv/bin/python scripts/bench_lattice.py [--graph recipes/synth/data/lang/graph]
        [--model recipes/synth/exp/blstm_h-adpsgd/final.pt]
        [--data recipes/synth/data/archives/test.h5] [--text recipes/synth/data/corpus/test/text]
        [--utts 40] [--lmwt 4,6,8,10,12] [--wip 0.0,0.5,1.0] [--acwt 0.1] [--beam 13]
        [--lattice-beam 8] [--simple]

The model scores every utterance once (not timed: the same for both). Then, on the same
scores, one core, CPU time:

- one-best (``asrtrain decode`` without ``--lattices``): kaldi-decoder's FasterDecoder
  once per (LM weight, penalty), as ``decode`` runs it (acoustic scale 1/w, the penalty
  in a copy of HCLG);
- lattices (``--lattices``): one search at ``--acwt`` with ``decode/latgen.py``, then
  every setting's best path from the lattice (``lattice_sweep.best_paths``).

Printed: RTF of each and their ratio; lattice sizes (arcs and states per frame, Kaldi's
lattice depth — input labels on arcs per frame —, the raw state-level lattice's arcs per
frame); the utterances whose best path at the search's own scale (w = 1/acwt, penalty 0)
differs from FasterDecoder's at that scale, and the WER of every setting both ways.
``--simple`` also times kaldi-decoder's LatticeSimpleDecoder (raw lattices only, no
max-active) at the same beams. Target (issue 25): lattices and the whole sweep at most
0.05 × real time.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

TARGET_RTF = 0.05


def _scores(model: Path, data: Path, num_pdfs: int, n: int) -> list[tuple[str, np.ndarray]]:
    from asrtrain.decode.loglikes import ModelScorer

    scorer = ModelScorer(model, data, num_pdfs)
    return [(u, scorer(u)) for u, _ in scorer.utterances()[:n]]


def _wer(hyps: dict[str, list[int]], refs: dict[str, list[str]], words: dict[int, str]) -> float:
    import kaldialign

    errors = sum(kaldialign.edit_distance(refs[u], [words[x] for x in h])["total"]
                 for u, h in hyps.items())
    return 100.0 * errors / max(1, sum(len(refs[u]) for u in hyps))


def one_best(hclg: Path, utts: list, grid: list[tuple[float, float]], beam: float,
             max_active: int) -> tuple[float, dict]:
    """FasterDecoder per setting: CPU seconds and word ids per (setting, utterance)."""
    import kaldi_decoder
    import kaldifst

    from asrtrain.decode.penalty import penalized_hclg

    opts = kaldi_decoder.FasterDecoderOptions(beam=beam, max_active=max_active)
    cpu, out = 0.0, {}
    with tempfile.TemporaryDirectory() as tmp:
        for p in sorted({p for _, p in grid}):
            fst = penalized_hclg(hclg, p, Path(tmp))
            dec = kaldi_decoder.FasterDecoder(fst, opts)
            for w in sorted({w for w, q in grid if q == p}):
                for utt, scores in utts:
                    c0 = time.process_time()
                    dec.decode(kaldi_decoder.DecodableCtc(np.ascontiguousarray(scores / w)))
                    ok, path = dec.get_best_path()
                    cpu += time.process_time() - c0
                    out[(w, p), utt] = list(kaldifst.get_linear_symbol_sequence(path)[2]) if ok else []
    return cpu, out


def lattices(hclg: Path, utts: list, grid: list[tuple[float, float]], acwt: float,
             beam: float, max_active: int, lattice_beam: float) -> tuple[float, float, dict, dict]:
    """One lattice search per utterance and the sweep: CPU seconds of each, words, sizes."""
    from asrtrain.decode.latgen import LatticeDecoder, SearchOptions
    from asrtrain.decode.lattice_sweep import best_paths

    dec = LatticeDecoder(hclg, SearchOptions(beam=beam, max_active=max_active,
                                             lattice_beam=lattice_beam))
    cols = dec.columns(utts[0][1].shape[1])
    search = sweep = 0.0
    out: dict = {}
    size = {"arcs": 0, "states": 0, "depth": 0, "raw": 0, "max_arcs_per_frame": 0.0,
            "reductions": 0, "det": 0.0}
    for utt, scores in utts:
        c0 = time.process_time()
        lat, info = dec.decode(scores, acwt, cols, utt)
        c1 = time.process_time()
        paths = best_paths(lat, grid)
        sweep += time.process_time() - c1
        search += c1 - c0
        for setting, path in zip(grid, paths, strict=True):
            out[setting, utt] = path.words if path is not None else []
        size["arcs"] += lat.num_arcs
        size["states"] += lat.num_states
        size["depth"] += int(lat.ilabels.size + lat.final_ilabels.size)
        size["raw"] += info.raw_arcs
        size["reductions"] += info.beam_reductions
        size["det"] += info.determinize_seconds
        size["max_arcs_per_frame"] = max(size["max_arcs_per_frame"],
                                         lat.num_arcs / max(1, scores.shape[0]))
    return search, sweep, out, size


def simple(hclg: Path, utts: list, acwt: float, beam: float, lattice_beam: float) -> float:
    """kaldi-decoder's LatticeSimpleDecoder (raw lattice): CPU seconds."""
    import kaldi_decoder

    from asrtrain.decode.kaldi_graph import read_hclg

    cfg = kaldi_decoder.LatticeSimpleDecoderConfig()
    cfg.beam, cfg.lattice_beam = beam, lattice_beam
    fst = read_hclg(hclg)  # outlives the decoder, which keeps no reference to it
    dec = kaldi_decoder.LatticeSimpleDecoder(fst, cfg)
    c0 = time.process_time()
    for _, scores in utts:
        dec.decode(kaldi_decoder.DecodableCtc(np.ascontiguousarray(scores * acwt)))
        dec.get_raw_lattice()
    return time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", type=Path, default=Path("recipes/synth/data/lang/graph"))
    ap.add_argument("--model", type=Path, default=Path("recipes/synth/exp/blstm_h-adpsgd/final.pt"))
    ap.add_argument("--data", type=Path, default=Path("recipes/synth/data/archives/test.h5"))
    ap.add_argument("--text", type=Path, default=Path("recipes/synth/data/corpus/test/text"))
    ap.add_argument("--utts", type=int, default=40)
    ap.add_argument("--lmwt", default="4,6,8,10,12")
    ap.add_argument("--wip", default="0.0,0.5,1.0")
    ap.add_argument("--acwt", type=float, default=0.1)
    ap.add_argument("--beam", type=float, default=13.0)
    ap.add_argument("--max-active", type=int, default=7000)
    ap.add_argument("--lattice-beam", type=float, default=8.0)
    ap.add_argument("--simple", action="store_true", help="also time LatticeSimpleDecoder")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    from asrtrain.decode.graph_dir import GraphInfo
    from asrtrain.decode.grid import parse_lmwt, parse_wip

    graph = GraphInfo.load(args.graph)
    hclg = args.graph / "HCLG.fst"
    lmwts, wips = parse_lmwt(args.lmwt, args.acwt), parse_wip(args.wip)
    grid = [(w, p) for w in lmwts for p in wips]
    search_w = 1.0 / args.acwt
    if (search_w, 0.0) not in grid:
        grid.append((search_w, 0.0))  # the search's own scale, for the one-best check
    utts = _scores(args.model, args.data, graph.num_pdfs, args.utts)
    audio = sum(s.shape[0] for _, s in utts) * 0.01
    refs = {ln.split()[0]: ln.split()[1:] for ln in args.text.read_text().splitlines() if ln.strip()}
    print(f"{len(utts)} utterances, {audio:.1f} s of audio; graph {args.graph} "
          f"(HCLG {graph.sizes.get('HCLG')}); beam {args.beam}, max-active {args.max_active}, "
          f"lattice beam {args.lattice_beam}, search acwt {args.acwt}; {len(grid)} settings")
    t_one, one = one_best(hclg, utts, grid, args.beam, args.max_active)
    t_lat, t_sweep, lat, size = lattices(hclg, utts, grid, args.acwt, args.beam,
                                         args.max_active, args.lattice_beam)
    frames = audio * 100
    print(f"one-best, FasterDecoder x {len(grid)} passes: RTF {t_one / audio:.4f} "
          f"({t_one / audio / len(grid):.4f} per pass)")
    print(f"lattices: search RTF {t_lat / audio:.4f} + sweep {t_sweep / audio:.4f} = "
          f"{(t_lat + t_sweep) / audio:.4f} (target {TARGET_RTF}); one-best grid / lattices "
          f"{t_one / (t_lat + t_sweep):.1f}x; lattice search / one FasterDecoder pass "
          f"{t_lat / (t_one / len(grid)):.2f}x")
    print(f"  of which determinization RTF {size['det'] / audio:.4f}")
    print(f"lattice size per frame: {size['arcs'] / frames:.2f} arcs, {size['states'] / frames:.2f}"
          f" states, depth {size['depth'] / frames:.2f}, raw state-level lattice "
          f"{size['raw'] / frames:.1f} arcs; most arcs per frame in one utterance "
          f"{size['max_arcs_per_frame']:.2f}; determinization beam narrowed {size['reductions']}x")
    if args.simple:
        t_simple = simple(hclg, utts, args.acwt, args.beam, args.lattice_beam)
        print(f"kaldi-decoder LatticeSimpleDecoder (raw lattice, no max-active): RTF "
              f"{t_simple / audio:.4f}")
    differ = [u for u, _ in utts if one[(search_w, 0.0), u] != lat[(search_w, 0.0), u]]
    print(f"best path at the search's scale (w {search_w:g}, penalty 0) differs from "
          f"FasterDecoder's in {len(differ)} of {len(utts)} utterances {differ[:5]}")
    print("WER per setting (one-best | lattice sweep):")
    for w, p in grid:
        a = _wer({u: one[(w, p), u] for u, _ in utts}, refs, graph.words)
        b = _wer({u: lat[(w, p), u] for u, _ in utts}, refs, graph.words)
        same = sum(one[(w, p), u] == lat[(w, p), u] for u, _ in utts)
        print(f"  {w:g}_{p:g}: {a:.2f} | {b:.2f}   ({same}/{len(utts)} identical)")


if __name__ == "__main__":
    main()

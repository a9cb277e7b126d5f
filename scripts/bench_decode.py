"""Speed of ``prepare lang`` and ``decode``: graph sizes, build time, decoder real-time factor.

    .venv/bin/python scripts/bench_decode.py CORPUS [--lm-lines N] [--num-pdfs 1000]
        [--model final.pt --data dev.h5] [--beam 13] [--lmwt 10] [--kaldi-graph]

CORPUS is a ``prepare synth`` output. ``--lm-lines`` cuts the LM text (and the lexicon
to the words it needs) for a quick run; without it the full lexicon and LM are used.
The real-time factor is decoding CPU seconds per audio second for one LM weight, one
core (CPU time, so other load on the machine changes it little; wall time is printed
too). It is given for oracle scores (a perfect model: an optimistic bound) and, with
``--model``/``--data``, for a trained model.

``--kaldi-graph`` also decodes a Kaldi-style copy of the graph (transition-id input labels,
two per pdf, ``asrtrain.decode.kaldi_style``) with ``--tid2pdf``, and prints its RTF
beside the pdf graph's, the ratio, and whether the hypotheses are identical.

Target (issue 8): real-time factor at most 0.1 with a trained model on the embedded corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

TARGET_RTF = 0.1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--lm-lines", type=int, default=0, help="cut the LM text to N lines (0: all)")
    ap.add_argument("--num-pdfs", type=int, default=1000)
    ap.add_argument("--model", type=Path)
    ap.add_argument("--data", type=Path)
    ap.add_argument("--beam", type=float, default=13.0)
    ap.add_argument("--lmwt", type=float, default=10.0)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--lang", type=Path, help="an existing lang dir (the model's): skip building")
    ap.add_argument("--kaldi-graph", action="store_true",
                    help="also decode a transition-id copy of the graph with --tid2pdf")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    from asrtrain.decode.decoder import DecodeConfig, decode, lmwt_name
    from asrtrain.lang.prepare import prepare_lang

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_decode."))
    corpus = args.corpus
    if args.lm_lines:
        from asrtrain.lang.subset import subset_corpus

        corpus = subset_corpus(args.corpus, work / "corpus", args.lm_lines)
    lang = args.lang or work / "lang"
    if args.lang is None:
        t0, c0 = time.time(), time.process_time()
        figures = prepare_lang(corpus / "dict", corpus / "lm_text", corpus, lang,
                               num_pdfs=args.num_pdfs)
        print(f"prepare lang: {time.time() - t0:.1f} s wall, {time.process_time() - c0:.1f} s CPU; "
              f"{figures['words']} words, {figures['num_pdfs']} pdfs, LM n-grams "
              f"{figures['ngrams']}, dev perplexity {figures.get('dev_perplexity', 0.0):.1f}")
        sizes = figures["sizes"]
    else:
        sizes = json.loads((lang / "graph" / "info.json").read_text())["sizes"]
    for name, (states, arcs) in sizes.items():
        print(f"  {name:6s} {states:10d} states {arcs:11d} arcs")
    runs = [("oracle", DecodeConfig(graph=lang / "graph", out=work / "oracle",
                                    oracle=lang / "pdf_ali" / "dev.scp"))]
    if args.model and args.data:
        runs.append(("model", DecodeConfig(graph=lang / "graph", out=work / "model",
                                           model=args.model, data=args.data)))
    if args.kaldi_graph:
        from asrtrain.decode.kaldi_style import write_kaldi_graph, write_tid2pdf

        t0 = time.time()
        tid2pdf = write_kaldi_graph(lang, work / "kaldi_graph")
        tmap = write_tid2pdf(work / "tid2pdf", lang, tid2pdf)
        print(f"Kaldi-style graph: {len(tid2pdf) - 1} transition-ids, written in "
              f"{time.time() - t0:.1f} s")
        for name, cfg in list(runs):
            runs.append((f"{name}, Kaldi graph", DecodeConfig(
                graph=work / "kaldi_graph", out=work / f"{name}_kaldi", oracle=cfg.oracle,
                model=cfg.model, data=cfg.data, tid2pdf=tmap)))
    rtfs = {}
    for name, cfg in runs:
        cfg.nj, cfg.beam, cfg.lmwts = 1, args.beam, [args.lmwt]
        got = decode(cfg)
        rtf = rtfs[name] = got["rtf_decode_per_lmwt"]
        print(f"decode ({name}, beam {args.beam:g}, lmwt {args.lmwt:g}): {got['audio_seconds']:.1f} s "
              f"of audio, RTF {rtf:.4f} CPU ({got['rtf_decode_wall_per_lmwt']:.4f} wall), scoring "
              f"RTF {got['rtf_scoring']:.4f}, {rtf / TARGET_RTF:.2f}x the target {TARGET_RTF}")
        base = name.removesuffix(", Kaldi graph")
        if base != name:
            hyp = f"hyp/{lmwt_name(args.lmwt)}.txt"
            same = (cfg.out / hyp).read_text() == (dict(runs)[base].out / hyp).read_text()
            print(f"  Kaldi graph / pdf graph decoding RTF: {rtf / rtfs[base]:.2f}; hypotheses "
                  f"{'identical' if same else 'DIFFERENT'}")
    print(f"load average: {os.getloadavg()[0]:.1f}; outputs in {work}")


if __name__ == "__main__":
    main()

"""A ``utils/mkgraph.sh``-style copy of our graph: transition-id input labels and a tid→pdf map.

Without Kaldi on the machine, this is how the Kaldi-graph path of ``decode`` is tested
and timed: every pdf gets two transition-ids (self-loop and forward, numbered in a seeded
shuffled order, as Kaldi numbers them by transition state and not by pdf), and each
HCLG arc takes its pdf's self-loop id when it is a self-loop, else the forward id. The
search space and costs are unchanged, so decoding the copy with ``--tid2pdf`` must give
the hypotheses (and, with phones in the map, the CTMs) of the original.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from asrtrain.core.atomic import write_text
from asrtrain.core.textio import read_lines, read_text


def write_kaldi_graph(lang: Path, out: Path, fst_kind: str = "const", seed: int = 3) -> np.ndarray:
    """Write ``out/`` (HCLG.fst, words.txt, phones.txt, num_pdfs, phones/*.int) from
    ``lang/graph``; return ``tid2pdf`` (index = transition-id, index 0 unused: -1)."""
    import kaldifst

    from asrtrain.lang.fstio import read_const, write_const
    from asrtrain.lang.lexicon import read_symbols

    graph = Path(lang) / "graph"
    num_pdfs = int(json.loads(read_text(graph / "info.json"))["num_pdfs"])
    tid = np.random.default_rng(seed).permutation(2 * num_pdfs).reshape(num_pdfs, 2) + 1
    tid2pdf = np.full(2 * num_pdfs + 1, -1, dtype=np.int64)
    tid2pdf[tid.reshape(-1)] = np.repeat(np.arange(num_pdfs), 2)
    arcs = read_const(graph / "HCLG.fst")
    real = arcs.il > 0
    arcs.il[real] = tid[arcs.il[real] - 1, (arcs.src[real] != arcs.dst[real]).astype(np.int64)]
    out = Path(out)
    (out / "phones").mkdir(parents=True, exist_ok=True)
    write_const(arcs, out / "HCLG.fst")
    if fst_kind == "vector":
        fst = kaldifst.StdVectorFst(kaldifst.StdConstFst.read(str(out / "HCLG.fst")))
        fst.write(str(out / "HCLG.fst"))
    for name in ("words.txt", "phones.txt"):
        shutil.copy(graph / name, out / name)
    write_text(out / "num_pdfs", f"{num_pdfs}\n")
    phones, words = read_symbols(graph / "phones.txt"), read_symbols(graph / "words.txt")
    silence = json.loads(read_text(graph / "info.json")).get("silence", "sil")
    write_text(out / "phones/word_boundary.int", "".join(
        f"{i} {'nonword' if p == silence else 'internal'}\n" for p, i in phones.items() if i > 0))
    rows = [ln.split() for ln in read_lines(graph / "align_lexicon.txt") if ln.strip()]
    write_text(out / "phones/align_lexicon.int", f"0 0 {phones[silence]}\n" + "".join(
        f"{words[r[0]]} {words[r[0]]} {' '.join(str(phones[p]) for p in r[1:])}\n" for r in rows))
    return tid2pdf


def write_tid2pdf(path: Path, lang: Path, tid2pdf: np.ndarray, with_phones: bool = True) -> Path:
    """``tid pdf`` lines, or ``tid pdf phone hmm-state`` as show-transitions tells them
    (written in descending order: the reader must not rely on the order)."""
    from asrtrain.lang.lexicon import read_symbols

    graph = Path(lang) / "graph"
    names = {i: p for p, i in read_symbols(graph / "phones.txt").items()}
    info = json.loads(read_text(graph / "tree"))["pdf_info"]
    lines = []
    for t in range(len(tid2pdf) - 1, 0, -1):
        p = int(tid2pdf[t])
        extra = f" {names[int(info[p][0])]} {int(info[p][1])}" if with_phones else ""
        lines.append(f"{t} {p}{extra}\n")
    write_text(path, "".join(lines))
    return Path(path)

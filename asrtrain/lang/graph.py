"""The decoding graph HCLG, built with kaldifst in Kaldi's order (``mkgraph.sh``).

LG = min(det*(L_disambig ∘ G)) in the log semiring; CLG = C ∘ LG by ``compose_context``
(cross-word triphones); H maps each context window of CLG to its pdf sequence, without
self-loops; HCLG = min(det*(H ∘ CLG)) with the disambiguation symbols then removed; the
HMM self-loops are added last, because a graph with self-loops is not determinizable.

H's arcs carry the pdf of the state they *enter* (input label pdf+1), so a graph state
entered by pdf k is "in" k and takes k's self-loop (Kaldi's reordered self-loops). A
state entered by arcs of different pdfs (minimization merges equal futures) is first
split, one copy per pdf, as Kaldi's ``MakePrecedingInputSymbolsSameClass`` does.
kaldifst has no relabel, rmsymbols or Kaldi's self-loop insertion: those steps work on
numpy arrays of the graph (:mod:`asrtrain.lang.fstio`). HCLG is written as a ConstFst,
as Kaldi's ``mkgraph.sh`` does.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import numpy as np

from asrtrain.lang.fstio import Arcs, to_arcs, to_vector_fst
from asrtrain.lang.tree import ContextTree

log = logging.getLogger("asrtrain.lang.graph")
SELF_LOOP_SCALE = 0.1


def h_transducer_text(ilabels: list[list[int]], tree: ContextTree, disambig_base: int) -> str:
    """H without self-loops: ilabel j of CLG → its pdf sequence (labels pdf+1).

    A one-element window ``[-k]`` (or ``[0]``, Kaldi's #-1) is a disambiguation symbol;
    it becomes input label ``disambig_base + k`` and is removed after determinization.
    """
    topo = tree.topo
    lines: list[str] = []
    nxt = 1
    for j, window in enumerate(ilabels):
        if j == 0:
            continue
        if len(window) == 1 and window[0] <= 0:
            lines.append(f"0 0 {disambig_base - window[0]} {j}")
            continue
        left, phone, right = window
        s_count = topo.num_states[phone]
        pdfs = [tree.pdf(left, phone, right, s) for s in range(s_count)]
        q = list(range(nxt, nxt + s_count))
        nxt += s_count
        lines.append(f"0 {q[0]} {pdfs[0] + 1} {j}")
        for s in range(s_count):
            for dest, prob in topo.forward(phone, s).items():
                cost = -math.log(prob)
                if dest == s_count:
                    lines.append(f"{q[s]} 0 0 0 {cost:.6g}")
                else:
                    lines.append(f"{q[s]} {q[dest]} {pdfs[dest] + 1} 0 {cost:.6g}")
    lines.append("0")
    return "\n".join(lines) + "\n"


def add_self_loops(arcs: Arcs, self_loop: np.ndarray, scale: float = SELF_LOOP_SCALE) -> Arcs:
    """Split states entered by several pdfs, then give each state its pdf's self-loop.

    ``self_loop[pdf]`` is the loop probability; the loop costs −scale·ln p and every way
    out of the state (arcs and final weight) gains −scale·ln(1−p), as Kaldi's
    ``add-self-loops`` with ``--self-loop-scale``. A state is "entered by" the input
    label of its incoming arcs (0: epsilon, and the start state); each further label
    gets a copy of the state with the same arcs out.
    """
    n = arcs.num_states
    width = int(max(arcs.il.max(initial=0), 0)) + 1
    keys = np.concatenate([arcs.dst * width + arcs.il, [arcs.start * width]])
    pairs, inverse = np.unique(keys, return_inverse=True)
    state, label = pairs // width, pairs % width
    first = np.searchsorted(state, state)              # index of the state's first pair
    rank = np.arange(pairs.size) - first
    extra = rank > 0
    target = state.copy()
    target[extra] = n + np.arange(int(extra.sum()))    # copies get new ids
    new_dst = target[inverse[:-1]]
    cls = np.zeros(n + int(extra.sum()), dtype=np.int64)
    cls[target] = label
    # copies take their original's arcs out and final weight
    orig = state[extra]
    by_src = np.argsort(arcs.src, kind="stable")
    bounds = np.searchsorted(arcs.src[by_src], np.arange(n + 1))
    lens = bounds[orig + 1] - bounds[orig]
    offsets = np.repeat(bounds[orig] - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    idx = by_src[offsets + np.arange(int(lens.sum()))]
    src = np.concatenate([arcs.src, np.repeat(target[extra], lens)])
    dst = np.concatenate([new_dst, new_dst[idx]])
    il = np.concatenate([arcs.il, arcs.il[idx]])
    ol = np.concatenate([arcs.ol, arcs.ol[idx]])
    w = np.concatenate([arcs.w, arcs.w[idx]])
    finals = dict(arcs.finals)
    for q, copy in zip(orig.tolist(), target[extra].tolist(), strict=True):
        if q in finals:
            finals[copy] = finals[q]
    pdf = cls - 1
    has_loop = pdf >= 0
    p = np.where(has_loop, self_loop[np.maximum(pdf, 0)], 0.0)
    loop_cost = np.where(has_loop, -scale * np.log(np.maximum(p, 1e-10)), 0.0)
    exit_cost = np.where(has_loop, -scale * np.log(np.maximum(1.0 - p, 1e-10)), 0.0)
    w = w + exit_cost[src]
    finals = {s: fw + float(exit_cost[s]) for s, fw in finals.items()}
    loops = np.flatnonzero(has_loop)
    return Arcs(src=np.concatenate([src, loops]), dst=np.concatenate([dst, loops]),
                il=np.concatenate([il, cls[loops]]), ol=np.concatenate([ol, np.zeros_like(loops)]),
                w=np.concatenate([w, loop_cost[loops]]), finals=finals, start=arcs.start,
                num_states=cls.size)


def size(fst) -> tuple[int, int]:
    """(states, arcs) of an FST."""
    n_arcs = sum(fst.num_arcs(s) for s in range(fst.num_states))
    return fst.num_states, n_arcs


def build_lg(L_disambig, G):
    """LG = min(det*(L ∘ G)) in the log semiring."""
    import kaldifst

    kaldifst.arcsort(L_disambig, sort_type="olabel")
    kaldifst.arcsort(G, sort_type="ilabel")
    lg = kaldifst.compose(L_disambig, G)
    kaldifst.determinize_star(lg, use_log=True)
    kaldifst.minimize_encoded(lg)
    kaldifst.arcsort(lg, sort_type="ilabel")
    return lg


def build_hclg(lg, tree: ContextTree, disambig_phones: list[int], sizes: dict[str, tuple[int, int]],
               self_loop_scale: float = SELF_LOOP_SCALE) -> Arcs:
    """HCLG (as arrays) from LG: context, H, determinize, drop #n, minimize, self-loops."""
    import kaldifst

    t0 = time.time()
    clg, ilabels = kaldifst.compose_context(disambig_phones, 3, 1, lg)
    kaldifst.arcsort(clg, sort_type="ilabel")
    sizes["CLG"] = size(clg)
    _step("C∘LG", t0, sizes["CLG"])
    disambig_base = tree.num_pdfs + 1
    h = kaldifst.compile(h_transducer_text(ilabels, tree, disambig_base))
    kaldifst.arcsort(h, sort_type="olabel")
    sizes["Ha"] = size(h)
    hclg = kaldifst.compose(h, clg)
    del clg, h
    _step("H∘CLG", t0, size(hclg))
    kaldifst.determinize_star(hclg, use_log=True)
    arcs = to_arcs(hclg)
    del hclg
    _step("determinize", t0, (arcs.num_states, arcs.src.size))
    arcs.il[arcs.il >= disambig_base] = 0          # Kaldi's fstrmsymbols
    hclg = to_vector_fst(arcs)
    kaldifst.minimize_encoded(hclg)
    arcs = to_arcs(hclg)
    del hclg
    sizes["HCLGa"] = (arcs.num_states, int(arcs.src.size))
    _step("minimize", t0, sizes["HCLGa"])
    self_loop = np.array([tree.topo.self_loop(ph, st) for ph, st in tree.pdf_info])
    arcs = add_self_loops(arcs, self_loop, self_loop_scale)
    sizes["HCLG"] = (arcs.num_states, int(arcs.src.size))
    _step("self-loops", t0, sizes["HCLG"])
    return arcs


def write_graph_dir(dest: Path, hclg: Arcs, lang: Path, tree: ContextTree, silence: str,
                    sizes: dict[str, tuple[int, int]], extra: dict | None = None) -> None:
    """A graph directory, whole or not at all: HCLG (ConstFst), the lang's symbol tables and
    alignment lexicon, the tree it was built for and its id, ``info.json``."""
    import json
    import shutil

    from asrtrain.core.atomic import atomic_path, write_text
    from asrtrain.lang.fstio import write_const

    tree_id = tree.identity()
    with atomic_path(dest) as tmp:
        tmp.mkdir()
        write_const(hclg, tmp / "HCLG.fst")
        for name in ("words.txt", "phones.txt", "align_lexicon.txt"):
            shutil.copyfile(lang / name, tmp / name)
        write_text(tmp / "tree", json.dumps(tree.to_json()) + "\n")
        write_text(tmp / "tree_id", tree_id + "\n")
        info = {"tree_id": tree_id, "num_pdfs": tree.num_pdfs, "sizes": sizes,
                "silence": silence, "self_loop_scale": SELF_LOOP_SCALE, **(extra or {})}
        write_text(tmp / "info.json", json.dumps(info, indent=2) + "\n")


def _step(what: str, t0: float, states_arcs: tuple[int, int]) -> None:
    log.info("graph: %s done at %.1fs (%d states, %d arcs)", what, time.time() - t0, *states_arcs)


def write_fst(fst, path: Path) -> None:
    """Write an FST atomically."""
    from asrtrain.core.atomic import atomic_path

    with atomic_path(path) as tmp:
        fst.write(str(tmp))

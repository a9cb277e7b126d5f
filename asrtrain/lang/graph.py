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

from asrtrain.core.malloc import release_memory
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
    gets a copy of the state with the same arcs out. The result has ConstFst's types
    (int32, float32 weights summed in float64): 20 bytes an arc.
    """
    n = arcs.num_states
    width = int(max(arcs.il.max(initial=0), 0)) + 1
    keys = np.append(arcs.dst.astype(np.int64) * width + arcs.il, arcs.start * width)
    pairs, inverse = np.unique(keys, return_inverse=True)
    del keys
    state, label = pairs // width, pairs % width
    del pairs
    extra = np.arange(state.size) - np.searchsorted(state, state) > 0   # not the first pair
    target = state.copy()
    target[extra] = n + np.arange(int(extra.sum()))    # copies get new ids
    total = n + int(extra.sum())
    if total >= 2**31:
        raise ValueError(f"HCLG with self-loops would have {total} states: over ConstFst's int32")
    new_dst = target[inverse[:-1]].astype(np.int32)
    del inverse
    cls = np.zeros(total, dtype=np.int32)
    cls[target] = label
    orig, copies = state[extra], target[extra]
    del state, label, target, extra
    idx, lens = _arcs_out_of(arcs.src, n, orig)        # copies take their original's arcs out
    src = np.concatenate([arcs.src.astype(np.int32), np.repeat(copies, lens).astype(np.int32)])
    dst = np.concatenate([new_dst, new_dst[idx]])
    del new_dst
    il = np.concatenate([arcs.il, arcs.il[idx]]).astype(np.int32)
    ol = np.concatenate([arcs.ol, arcs.ol[idx]]).astype(np.int32)
    finals = dict(arcs.finals)
    for q, copy in zip(orig.tolist(), copies.tolist(), strict=True):
        if q in finals:
            finals[copy] = finals[q]
    pdf = cls.astype(np.int64) - 1
    has_loop = pdf >= 0
    p = np.where(has_loop, self_loop[np.maximum(pdf, 0)], 0.0)
    loop_cost = np.where(has_loop, -scale * np.log(np.maximum(p, 1e-10)), 0.0)
    exit_cost = np.where(has_loop, -scale * np.log(np.maximum(1.0 - p, 1e-10)), 0.0)
    del pdf, p
    w = np.concatenate([arcs.w, arcs.w[idx]]).astype(np.float64)
    del idx
    w += exit_cost[src]
    finals = {s: fw + float(exit_cost[s]) for s, fw in finals.items()}
    loops = np.flatnonzero(has_loop).astype(np.int32)
    return Arcs(src=np.concatenate([src, loops]), dst=np.concatenate([dst, loops]),
                il=np.concatenate([il, cls[loops]]), ol=np.concatenate([ol, np.zeros_like(loops)]),
                w=np.concatenate([w, loop_cost[loops]]).astype(np.float32), finals=finals,
                start=arcs.start, num_states=total)


def _arcs_out_of(src: np.ndarray, n: int, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the arcs leaving each of ``states`` in turn (each state's arcs in their
    order in ``src``) and how many each has; no sort when the arcs are by state already,
    as read from a file."""
    by_src = None if np.all(src[1:] >= src[:-1]) else np.argsort(src, kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(src, minlength=n))))
    lens = bounds[states + 1] - bounds[states]
    offsets = np.repeat(bounds[states] - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    at = offsets + np.arange(int(lens.sum()))
    return (at if by_src is None else by_src[at]), lens


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
    release_memory()    # L∘G and its determinization: 2 GB of free heap at 200k words
    return lg


def build_hclg(lg, tree: ContextTree, disambig_phones: list[int], sizes: dict[str, tuple[int, int]],
               self_loop_scale: float = SELF_LOOP_SCALE) -> Arcs:
    """HCLG (as arrays) from LG: context, H, determinize, drop #n, minimize, self-loops."""
    import kaldifst

    t0 = time.time()
    clg, ilabels = kaldifst.compose_context(disambig_phones, 3, 1, lg)
    kaldifst.arcsort(clg, sort_type="ilabel")
    release_memory()
    sizes["CLG"] = size(clg)
    _step("C∘LG", t0, sizes["CLG"])
    disambig_base = tree.num_pdfs + 1
    h = kaldifst.compile(h_transducer_text(ilabels, tree, disambig_base))
    kaldifst.arcsort(h, sort_type="olabel")
    sizes["Ha"] = size(h)
    hclg = kaldifst.compose(h, clg)
    del clg, h
    release_memory()
    _step("H∘CLG", t0, size(hclg))
    kaldifst.determinize_star(hclg, use_log=True)
    arcs = to_arcs(hclg)
    del hclg
    release_memory()
    _step("determinize", t0, (arcs.num_states, arcs.src.size))
    arcs.il[arcs.il >= disambig_base] = 0          # Kaldi's fstrmsymbols
    hclg = to_vector_fst(arcs)
    del arcs
    kaldifst.minimize_encoded(hclg)
    arcs = to_arcs(hclg)
    del hclg
    release_memory()
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

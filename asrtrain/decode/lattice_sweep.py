"""The LM-weight sweep on lattices: every (LM weight, penalty) of the grid in one DP.

Kaldi's ``local/score.sh`` runs ``lattice-scale --inv-acoustic-scale=w |
lattice-add-penalty --word-ins-penalty=p | lattice-best-path`` once per setting. A
lattice is acyclic and its states are numbered topologically, so the best path is one
forward pass of min-plus over the arcs; with the K settings as a second axis, that pass
is done once for all of them: arc costs are a [A, K] matrix ``graph + p·[word] +
acoustic/w``, and the states are visited by *level* (longest distance from the start in
arcs), each level one vectorized gather-add-min over the arcs that enter it. A
CompactLattice has about one level per word, so the sweep costs tens of numpy calls per
utterance whatever the grid's size, where decoding again costs a search per setting.

The hypotheses and CTMs are written as the one-best decoder writes them (names from
``grid.py``, lines from ``ctm.py``), so ``asrtrain score --sweep`` reads them unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asrtrain.decode.ctm import BestPath
from asrtrain.decode.lattice import WordLattice


@dataclass
class Levels:
    """The arcs of a lattice grouped for the level-by-level DP (made once per lattice)."""

    arcs: np.ndarray  # int64 [A] arc ids sorted by (level of dst, dst)
    bounds: list[int]  # level L's arcs are arcs[bounds[L-1]:bounds[L]] (L >= 1)
    heads: list[np.ndarray]  # per level: offsets of each distinct dst's run in its slice
    dsts: list[np.ndarray]  # per level: the distinct dst states, in run order


def state_levels(lat: WordLattice) -> np.ndarray:
    """Longest distance in arcs from the start, per state (0 for the start and for states
    no arc enters). One pass over the arcs in source order: arcs go from lower to higher
    state numbers, so every arc into a state is seen before the arcs out of it."""
    level = [0] * lat.num_states
    order = np.argsort(lat.src, kind="stable")
    for s, d in zip(lat.src[order].tolist(), lat.dst[order].tolist(), strict=True):
        if level[s] >= level[d]:
            level[d] = level[s] + 1
    return np.asarray(level, dtype=np.int64)


def levels(lat: WordLattice) -> Levels:
    """Group the arcs by the level of the state they enter, and within a level by state."""
    dst = lat.dst.astype(np.int64)
    lev = state_levels(lat)[dst]
    arcs = np.lexsort((dst, lev))
    lev_sorted, dst_sorted = lev[arcs], dst[arcs]
    top = int(lev_sorted[-1]) if arcs.size else 0
    bounds = np.searchsorted(lev_sorted, np.arange(top + 1), side="right").tolist()
    heads, dsts = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        d = dst_sorted[lo:hi]
        head = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
        heads.append(head)
        dsts.append(d[head])
    return Levels(arcs=arcs, bounds=bounds, heads=heads, dsts=dsts)


def grid_costs(lat: WordLattice, lmwts: np.ndarray, wips: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Arc costs [A, K] and final costs [S, K] of setting k = (lmwts[k], wips[k]), in
    graph units: Kaldi's ``lattice-scale --inv-acoustic-scale`` then ``lattice-add-penalty``."""
    inv = 1.0 / lmwts
    words = (lat.word != 0).astype(np.float64)
    arc = (lat.graph.astype(np.float64)[:, None] + words[:, None] * wips[None, :]
           + lat.acoustic.astype(np.float64)[:, None] * inv[None, :])
    final = lat.final_graph.astype(np.float64)[:, None] + lat.final_acoustic.astype(np.float64)[:, None] * inv[None, :]
    return arc, final


def forward(lat: WordLattice, arc_cost: np.ndarray, lv: Levels | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Best cost from the start to every state per setting [S, K], and the arc that gives
    it [S, K] (-1 for the start and unreachable states). Ties go to the lower arc id."""
    lv = levels(lat) if lv is None else lv
    n, k = lat.num_states, arc_cost.shape[1]
    best = np.full((n, k), np.inf)
    back = np.full((n, k), -1, dtype=np.int64)
    if n:
        best[0] = 0.0
    src = lat.src.astype(np.int64)
    for i, (lo, hi) in enumerate(zip(lv.bounds[:-1], lv.bounds[1:], strict=True)):
        arcs = lv.arcs[lo:hi]
        vals = best[src[arcs]] + arc_cost[arcs]
        head = lv.heads[i]
        mins = np.minimum.reduceat(vals, head, axis=0)
        runs = np.diff(np.r_[head, arcs.shape[0]])
        cand = np.where(vals == np.repeat(mins, runs, axis=0), arcs[:, None], np.iinfo(np.int64).max)
        arg = np.minimum.reduceat(cand, head, axis=0)
        d = lv.dsts[i]
        best[d] = mins
        back[d] = np.where(np.isfinite(mins), arg, -1)
    return best, back


def path_from_arcs(lat: WordLattice, arcs: Sequence[int], end: int, cost: float) -> BestPath:
    """The path through ``arcs`` ending in final state ``end`` as ``ctm.BestPath``: input
    labels minus one per frame, the words, the frame each word's arc starts at."""
    pdfs: list[int] = []
    words: list[int] = []
    frames: list[int] = []
    for a in arcs:
        if lat.word[a]:
            words.append(int(lat.word[a]))
            frames.append(len(pdfs))
        pdfs.extend((lat.arc_string(a) - 1).tolist())
    pdfs.extend((lat.final_string(end) - 1).tolist())
    return BestPath(pdfs=pdfs, words=words, word_frames=frames, cost=cost)


def best_paths(lat: WordLattice, grid: Sequence[tuple[float, float]]) -> list[BestPath | None]:
    """The best path of each (LM weight, penalty) of ``grid``, None where the lattice has
    no complete path: ``lattice-best-path`` after scaling and penalty, for all at once."""
    if lat.num_states == 0 or not grid:
        return [None] * len(grid)
    lmwts = np.asarray([w for w, _ in grid], dtype=np.float64)
    wips = np.asarray([p for _, p in grid], dtype=np.float64)
    arc_cost, final_cost = grid_costs(lat, lmwts, wips)
    best, back = forward(lat, arc_cost)
    total = best + final_cost
    ends = np.argmin(total, axis=0)
    out: list[BestPath | None] = []
    src = lat.src
    for k, end in enumerate(ends.tolist()):
        cost = float(total[end, k])
        if not np.isfinite(cost):
            out.append(None)
            continue
        arcs: list[int] = []
        s = end
        while s != 0:
            a = int(back[s, k])
            arcs.append(a)
            s = int(src[a])
        arcs.reverse()
        out.append(path_from_arcs(lat, arcs, end, cost))
    return out

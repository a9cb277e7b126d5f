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

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from asrtrain.core.atomic import write_text
from asrtrain.decode.ctm import BestPath, ctm_lines
from asrtrain.decode.graph_dir import GraphInfo
from asrtrain.decode.grid import settings
from asrtrain.decode.lattice import WordLattice

log = logging.getLogger("asrtrain.decode")


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
        out.append(lat.path(arcs, end, cost))
    return out


@dataclass
class SweepStats:
    """What the sweep did: utterances, those without a complete path, and its time."""

    utterances: int = 0
    settings: int = 0
    no_path: list[str] = field(default_factory=list)
    dp_seconds: float = 0.0
    ctm_seconds: float = 0.0


def hyp_line(utt: str, path: BestPath | None, words: dict[int, str]) -> str:
    """``utt w1 w2 …`` (Kaldi text), or the id alone for an utterance without a path."""
    if path is None:
        return utt
    return " ".join([utt] + [words.get(x, f"#{x}") for x in path.words])


def write_sweep(lattices: Iterable[tuple[str, WordLattice | None]], graph: GraphInfo,
                labels: list[tuple[int, int]] | None, lmwts: list[float], wips: list[float],
                out: Path) -> SweepStats:
    """``OUT/hyp/<name>.txt`` and ``OUT/ctm/<name>.ctm`` for every setting of the grid
    from each utterance's lattice (None: the decoder found no path; an empty hypothesis,
    counted), named and written as the one-best decoder writes them; the hyps and CTMs of
    settings outside the grid are removed, as ``decode`` does."""
    grid = settings(lmwts, wips)
    pairs = [(w, p) for w, p, _ in grid]
    hyps: dict[str, list[str]] = {name: [] for _, _, name in grid}
    ctms: dict[str, list[str]] = {name: [] for _, _, name in grid}
    stats = SweepStats(settings=len(grid))
    for utt, lat in lattices:
        stats.utterances += 1
        t0 = time.perf_counter()
        paths = best_paths(lat, pairs) if lat is not None else [None] * len(grid)
        t1 = time.perf_counter()
        stats.dp_seconds += t1 - t0
        if paths[0] is None:
            stats.no_path.append(utt)
        for (_, _, name), path in zip(grid, paths, strict=True):
            hyps[name].append(hyp_line(utt, path, graph.words))
            if path is not None:
                ctms[name].extend(ctm_lines(utt, path, graph.words, labels, graph.silence,
                                            graph.prons))
        stats.ctm_seconds += time.perf_counter() - t1
    for _, _, name in grid:
        write_text(out / "hyp" / f"{name}.txt", "".join(h + "\n" for h in hyps[name]))
        write_text(out / "ctm" / f"{name}.ctm", "".join(c + "\n" for c in ctms[name]))
    remove_other_settings(out, {name for _, _, name in grid})
    if stats.no_path:
        log.warning("%d utterances have no complete path in their lattice (empty hypotheses): %s",
                    len(stats.no_path), ", ".join(stats.no_path[:5]))
    return stats


def remove_other_settings(out: Path, names: set[str]) -> None:
    """Drop hyps/CTMs of settings not in ``names`` (``score --sweep`` reads them all)."""
    for kind, ext in (("hyp", ".txt"), ("ctm", ".ctm")):
        for path in sorted((out / kind).glob(f"*{ext}")):
            if path.name[: -len(ext)] not in names:
                log.warning("removing %s of an earlier run (setting not in this grid)", path)
                path.unlink()

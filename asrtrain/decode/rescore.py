"""Rescoring a lattice with another LM: the first pass's LM costs out, the full LM's in.

Kaldi's ``lmrescore_const_arpa.sh`` runs ``lattice-lmrescore --lm-scale=-1`` with the
first pass's G, then ``lattice-lmrescore-const-arpa --lm-scale=1`` with the full LM, each a
composition of the lattice with the LM as a deterministic on-demand FST. Here both LMs
go in one composition: a state of the result is (lattice state, first-pass LM state,
full LM state), made only for the histories that some path of the lattice reaches, and
an arc that outputs word ``w`` in history ``h`` gets ``new(w|h) − old(w|h)`` (−ln p, back-off
included) added to its graph cost. The rest of the graph cost (transition and
pronunciation costs, the penalty) and the acoustic cost stay as they were, and every arc
keeps its frames' input labels.

The LMs are deterministic on words, so a path of the result is one path of the lattice
and one path of each LM: a lattice with one path per word sequence (a determinized one,
as the lattice decoder writes) gives one again, and every word sequence with a
probability under both LMs survives with its own alignment. That is what Kaldi's
determinization after the composition would give, so none is run here. A word the
full LM gives no probability ends its paths; those arcs are counted (``dropped_arcs``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from asrtrain.decode.lattice import WordLattice


class LanguageModel(Protocol):
    """What the rescorer needs of an LM (``lang/lmstore.LmStore``): −ln p with back-off,
    as G.fst's costs, over ``words.txt`` ids; a state names the effective history."""

    order: int

    def start_state(self) -> int: ...

    def score(self, state: int, word: int) -> tuple[float, int]: ...

    def final_cost(self, state: int) -> float: ...


class LmSwap:
    """The pair (first-pass LM, full LM) as one deterministic LM whose cost is the
    difference: what a word adds to a graph cost when the old LM's part is replaced.
    ``old`` None: only add the new LM (``lattice-lmrescore-const-arpa`` alone)."""

    def __init__(self, old: LanguageModel | None, new: LanguageModel) -> None:
        self.old, self.new = old, new
        self._pairs: dict[tuple[int, int], int] = {}
        self._states: list[tuple[int, int]] = []
        self._cache: dict[tuple[int, int], tuple[float, int]] = {}
        self.queries = 0

    def _id(self, pair: tuple[int, int]) -> int:
        got = self._pairs.get(pair)
        if got is None:
            got = self._pairs[pair] = len(self._states)
            self._states.append(pair)
        return got

    def start_state(self) -> int:
        return self._id((self.old.start_state() if self.old else -1, self.new.start_state()))

    def score(self, state: int, word: int) -> tuple[float, int]:
        """(new − old cost of ``word``, next state); the cost is inf if the new LM has no
        probability for it."""
        got = self._cache.get((state, word))
        if got is not None:
            return got
        self.queries += 1
        o, n = self._states[state]
        cost, n2 = self.new.score(n, word)
        o2 = -1
        if self.old is not None and math.isfinite(cost):
            old_cost, o2 = self.old.score(o, word)
            cost -= old_cost
        got = self._cache[(state, word)] = (cost, self._id((o2, n2)))
        return got

    def final_cost(self, state: int) -> float:
        o, n = self._states[state]
        cost = self.new.final_cost(n)
        if self.old is not None and math.isfinite(cost):
            cost -= self.old.final_cost(o)
        return cost


@dataclass
class RescoreStats:
    """Sizes before and after, and what the LM could not score (summed over utterances)."""

    utterances: int = 0
    states_in: int = 0
    arcs_in: int = 0
    states_out: int = 0
    arcs_out: int = 0
    dropped_arcs: int = 0
    dropped_finals: int = 0
    empty: int = 0

    def add(self, other: RescoreStats) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def _gather(labels: np.ndarray, offsets: np.ndarray, items: np.ndarray,
            keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The strings of ``items`` (arc or state ids) concatenated, with their new offsets;
    an item where ``keep`` is False gets the empty string."""
    starts = offsets[items].astype(np.int64)
    lengths = offsets[items + 1].astype(np.int64) - starts
    if keep is not None:
        lengths = np.where(keep, lengths, 0)
    new_off = np.r_[0, np.cumsum(lengths)]
    idx = np.repeat(starts - new_off[:-1], lengths) + np.arange(new_off[-1])
    return labels[idx].astype(np.int32), new_off.astype(np.int32)


def compose(lat: WordLattice, lm: LmSwap) -> tuple[WordLattice, RescoreStats]:
    """The lattice composed with ``lm`` (expanded on demand, lattice state by lattice state
    in topological order), trimmed to states that reach a final one, renumbered
    topologically; graph costs plus the LM's cost, everything else as it was."""
    stats = RescoreStats(utterances=1, states_in=lat.num_states, arcs_in=lat.num_arcs)
    n = lat.num_states
    if n == 0:
        stats.empty = 1
        return lat, stats
    by_src = np.argsort(lat.src, kind="stable")
    first = np.searchsorted(lat.src[by_src], np.arange(n + 1)).tolist()
    out_arcs = by_src.tolist()
    words, dsts = lat.word.tolist(), lat.dst.tolist()
    reached: list[dict[int, int]] = [dict() for _ in range(n)]
    home: list[int] = [0]  # lattice state of each composed state
    hist: list[int] = [lm.start_state()]
    reached[0][hist[0]] = 0
    arc_src: list[int] = []
    arc_dst: list[int] = []
    arc_of: list[int] = []
    arc_add: list[float] = []
    for s in range(n):
        arcs = out_arcs[first[s]:first[s + 1]]
        for h, me in reached[s].items():
            for a in arcs:
                w = words[a]
                cost, h2 = (0.0, h) if w == 0 else lm.score(h, w)
                if not math.isfinite(cost):
                    stats.dropped_arcs += 1
                    continue
                there = reached[dsts[a]]
                to = there.get(h2)
                if to is None:
                    to = there[h2] = len(home)
                    home.append(dsts[a])
                    hist.append(h2)
                arc_src.append(me)
                arc_dst.append(to)
                arc_of.append(a)
                arc_add.append(cost)
    home_a = np.asarray(home, dtype=np.int64)
    final_add = np.full(len(home), np.inf)
    for c, s in enumerate(home):
        if math.isfinite(lat.final_graph[s]):
            final_add[c] = lm.final_cost(hist[c])
            stats.dropped_finals += not math.isfinite(final_add[c])
    out = _build(lat, home_a, final_add, np.asarray(arc_src, dtype=np.int64),
                 np.asarray(arc_dst, dtype=np.int64), np.asarray(arc_of, dtype=np.int64),
                 np.asarray(arc_add, dtype=np.float64))
    stats.states_out, stats.arcs_out = out.num_states, out.num_arcs
    stats.empty = int(out.num_states == 0)
    return out, stats


def coaccessible(num_states: int, src: np.ndarray, dst: np.ndarray, final: np.ndarray) -> np.ndarray:
    """States from which a final state can be reached (arcs go from lower to higher ids)."""
    ok = np.isfinite(final)
    order = np.argsort(-src, kind="stable")
    for s, d in zip(src[order].tolist(), dst[order].tolist(), strict=True):
        if ok[d]:
            ok[s] = True
    return ok


def _build(lat: WordLattice, home: np.ndarray, final_add: np.ndarray, src: np.ndarray,
           dst: np.ndarray, arc_of: np.ndarray, arc_add: np.ndarray) -> WordLattice:
    """The composed lattice as a ``WordLattice``: useless states cut, states renumbered by
    (lattice state, creation), which is topological since lattice arcs go forward."""
    final_graph = lat.final_graph.astype(np.float64)[home] + final_add
    keep = coaccessible(home.shape[0], src, dst, final_graph)
    # order composed states by their lattice state; creation order breaks ties
    order = np.argsort(home, kind="stable")
    order = order[keep[order]]
    new_id = np.full(home.shape[0], -1, dtype=np.int64)
    new_id[order] = np.arange(order.shape[0])
    live = keep[src] & keep[dst]
    src, dst, arc_of, arc_add = new_id[src[live]], new_id[dst[live]], arc_of[live], arc_add[live]
    arcs = np.lexsort((dst, src))  # arcs by source state, as a decoder writes them
    src, dst, arc_of, arc_add = src[arcs], dst[arcs], arc_of[arcs], arc_add[arcs]
    ilabels, offsets = _gather(lat.ilabels, lat.ilabel_offsets, arc_of)
    states, fin = home[order], final_graph[order]
    final_ilabels, final_offsets = _gather(lat.final_ilabels, lat.final_offsets, states,
                                           np.isfinite(fin))
    return WordLattice(
        src=src.astype(np.int32), dst=dst.astype(np.int32), word=lat.word[arc_of].astype(np.int32),
        graph=(lat.graph[arc_of].astype(np.float64) + arc_add).astype(np.float32),
        acoustic=lat.acoustic[arc_of].astype(np.float32), ilabels=ilabels, ilabel_offsets=offsets,
        final_graph=fin.astype(np.float32),
        final_acoustic=np.where(np.isfinite(fin), lat.final_acoustic[states], np.inf).astype(np.float32),
        final_ilabels=final_ilabels, final_offsets=final_offsets)


def rescore(lat: WordLattice, old: LanguageModel | None, new: LanguageModel) -> tuple[WordLattice, RescoreStats]:
    """``lat`` with the first-pass LM's costs (``old``) replaced by ``new``'s."""
    return compose(lat, LmSwap(old, new))

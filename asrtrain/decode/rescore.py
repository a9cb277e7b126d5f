"""Rescoring a lattice with another LM: the first pass's LM costs out, the full LM's in.

Kaldi's ``lmrescore_const_arpa.sh`` runs ``lattice-lmrescore --lm-scale=-1`` with the
first pass's G, then ``lattice-lmrescore-const-arpa --lm-scale=1`` with the full LM, each a
composition of the lattice with the LM as a deterministic on-demand FST. Here both LMs
go in one composition: a state of the result is (lattice state, first-pass LM state,
full LM state), made only for the histories that some path of the lattice reaches, and
an arc that outputs word ``w`` in history ``h`` gets ``new(w|h) − old(w|h)`` (−ln p, back-off
included) added to its graph cost. The rest of the graph cost (transition and
pronunciation costs) and the acoustic cost stay as they were, and every arc keeps its
frames' input labels. States are made a level of the lattice at a time, with one batch
of queries to each LM (``LmStore.score_batch``), so the cost is numpy calls per level
(about one per word), not Python per arc.

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
from asrtrain.decode.lattice_sweep import levels


class LanguageModel(Protocol):
    """What the rescorer needs of an LM (``lang/lmstore.LmStore``): −ln p with back-off,
    as G.fst's costs, over ``words.txt`` ids; a state names the effective history."""

    order: int

    def start_state(self) -> int: ...

    def score_batch(self, states: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def final_cost(self, state: int) -> float: ...


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


def _swap_costs(old: LanguageModel | None, new: LanguageModel, h_old: np.ndarray,
                h_new: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """new − old cost of each word in its histories, and both next states (epsilon arcs,
    word 0, cost nothing and keep their histories)."""
    add = np.zeros(words.shape[0])
    o2, n2 = h_old.copy(), h_new.copy()
    isw = np.flatnonzero(words != 0)
    if isw.size:
        cost, n2[isw] = new.score_batch(h_new[isw], words[isw])
        if old is not None:
            old_cost, o2[isw] = old.score_batch(h_old[isw], words[isw])
            cost = cost - old_cost
        add[isw] = cost
    return add, o2, n2


def compose(lat: WordLattice, old: LanguageModel | None, new: LanguageModel
            ) -> tuple[WordLattice, RescoreStats]:
    """The lattice composed with the pair of LMs, expanded on demand and trimmed to states
    that reach a final one; graph costs plus new − old LM cost, everything else kept.

    Level by level (``lattice_sweep.levels``): all arcs entering the lattice states of one
    level leave states of lower levels, whose composed states are all known, so the
    composed states of a level are made at once, from one batch of LM queries. They are
    numbered as made, which is a topological order. ``old`` None only adds ``new``."""
    stats = RescoreStats(utterances=1, states_in=lat.num_states, arcs_in=lat.num_arcs)
    n = lat.num_states
    if n == 0:
        stats.empty = 1
        return lat, stats
    lv = levels(lat)
    src, dst, word = (lat.src.astype(np.int64), lat.dst.astype(np.int64), lat.word.astype(np.int64))
    first = np.zeros(n, dtype=np.int64)   # composed states of lattice state s:
    count = np.zeros(n, dtype=np.int64)   # first[s] .. first[s] + count[s] - 1
    count[0] = 1
    home = [np.zeros(1, np.int64)]
    h_old = [np.full(1, -1 if old is None else old.start_state(), np.int64)]
    h_new = [np.full(1, new.start_state(), np.int64)]
    made = 1
    arcs: list[tuple[np.ndarray, ...]] = []
    for lo, hi in zip(lv.bounds[:-1], lv.bounds[1:], strict=True):
        into = lv.arcs[lo:hi]
        rep = count[src[into]]
        a = np.repeat(into, rep)
        if a.size == 0:
            continue
        runs = np.cumsum(rep) - rep
        c_src = np.repeat(first[src[into]], rep) + np.arange(a.size) - np.repeat(runs, rep)
        ho, hn = np.concatenate(h_old), np.concatenate(h_new)
        add, o2, n2 = _swap_costs(old, new, ho[c_src], hn[c_src], word[a])
        ok = np.isfinite(add)
        stats.dropped_arcs += int(a.size - ok.sum())
        a, c_src, add, o2, n2 = a[ok], c_src[ok], add[ok], o2[ok], n2[ok]
        d = dst[a]
        order = np.lexsort((n2, o2, d))
        ds, os_, ns = d[order], o2[order], n2[order]
        head = np.r_[True, (ds[1:] != ds[:-1]) | (os_[1:] != os_[:-1]) | (ns[1:] != ns[:-1])]
        ids = np.cumsum(head) - 1
        c_dst = np.empty_like(ids)
        c_dst[order] = made + ids
        new_home = ds[head]
        starts = np.flatnonzero(np.r_[True, new_home[1:] != new_home[:-1]])
        first[new_home[starts]] = made + starts
        count[new_home[starts]] = np.diff(np.r_[starts, new_home.size])
        home.append(new_home)
        h_old.append(os_[head])
        h_new.append(ns[head])
        made += new_home.size
        arcs.append((c_src, c_dst, a, add))
    home_a, ho, hn = np.concatenate(home), np.concatenate(h_old), np.concatenate(h_new)
    final_add = np.full(made, np.inf)
    for c in np.flatnonzero(np.isfinite(lat.final_graph[home_a])).tolist():
        cost = new.final_cost(int(hn[c]))
        if old is not None and math.isfinite(cost):
            cost -= old.final_cost(int(ho[c]))
        final_add[c] = cost
        stats.dropped_finals += not math.isfinite(cost)
    if arcs:
        c_src, c_dst, arc_of, add = (np.concatenate(x) for x in zip(*arcs, strict=True))
    else:
        c_src = c_dst = arc_of = np.zeros(0, np.int64)
        add = np.zeros(0)
    out = _build(lat, home_a, final_add, c_src, c_dst, arc_of, add)
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


def rescore(lat: WordLattice, old: LanguageModel | None, new: LanguageModel
            ) -> tuple[WordLattice, RescoreStats]:
    """``lat`` with the first-pass LM's costs (``old``) replaced by ``new``'s."""
    return compose(lat, old, new)

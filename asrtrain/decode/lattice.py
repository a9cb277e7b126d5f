"""A word lattice per utterance: Kaldi's CompactLattice held as numpy arrays.

The first pass keeps, for each utterance, every word sequence whose cost is within the
lattice beam of the best, each with its best alignment (Kaldi's lattice-faster decoder
determinized: one path per word sequence). The LM-weight sweep and the rescoring work on
these arrays, so a sweep costs one pass over a small acyclic graph, not a new search.

Weights are Kaldi's LatticeWeight pair: ``graph`` (LM + transition + pronunciation costs,
as on HCLG's arcs, plus any word insertion penalty) and ``acoustic`` (−log-likelihood,
unscaled, as Kaldi writes lattices). A path's cost at LM weight ``w`` and insertion
penalty ``p`` is ``graph + p·words + acoustic / w`` (``lattice-scale
--inv-acoustic-scale=w | lattice-add-penalty --word-ins-penalty=p``). Each arc carries
the string of input labels (HCLG's: pdf+1, or transition-ids on a Kaldi graph) of the
frames it spans, one label per frame; a final weight may carry a string too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from asrtrain.decode.ctm import BestPath


@dataclass
class WordLattice:
    """Kaldi's CompactLattice for one utterance; states numbered topologically, start 0."""

    src: np.ndarray  # int32 [A] arc source state
    dst: np.ndarray  # int32 [A] arc destination state (src < dst)
    word: np.ndarray  # int32 [A] output word id (words.txt), 0 = epsilon
    graph: np.ndarray  # float32 [A] graph cost
    acoustic: np.ndarray  # float32 [A] acoustic cost, unscaled
    ilabels: np.ndarray  # int32 [sum of string lengths] input labels of all arcs, concatenated
    ilabel_offsets: np.ndarray  # int32 [A+1] arc a's string = ilabels[off[a]:off[a+1]]
    final_graph: np.ndarray  # float32 [S] graph cost of the final weight, inf where not final
    final_acoustic: np.ndarray  # float32 [S] acoustic cost of the final weight
    final_ilabels: np.ndarray  # int32 [...] strings of the final weights, concatenated
    final_offsets: np.ndarray  # int32 [S+1] state s's final string = final_ilabels[fo[s]:fo[s+1]]

    @property
    def num_states(self) -> int:
        return int(self.final_graph.shape[0])

    @property
    def num_arcs(self) -> int:
        return int(self.src.shape[0])

    @property
    def num_frames(self) -> int:
        """Frames of the utterance: the string length of any complete path (all equal)."""
        if self.num_states == 0:
            return 0
        times = self.state_times()
        ends = np.flatnonzero(np.isfinite(self.final_graph))
        if ends.size == 0:
            return int(times.max())
        return int(times[ends[0]] + np.diff(self.final_offsets)[ends[0]])

    def state_times(self) -> np.ndarray:
        """Frames consumed on reaching each state (int64 [S]). A determinized lattice
        gives every path into a state the same length (Kaldi's LatticeStateTimes);
        a state no arc reaches is at 0."""
        times = np.zeros(self.num_states, dtype=np.int64)
        lengths = np.diff(self.ilabel_offsets)
        order = np.argsort(self.src, kind="stable")
        for a in order.tolist():
            times[self.dst[a]] = times[self.src[a]] + lengths[a]
        return times

    @classmethod
    def from_arcs(cls, num_states: int, start: int, arcs: list[tuple[int, int, int, float, float, list[int]]],
                  finals: dict[int, tuple[float, float, list[int]]]) -> WordLattice:
        """A lattice from arcs ``(src, dst, word, graph, acoustic, ilabels)`` and final
        weights ``state -> (graph, acoustic, ilabels)`` in any state numbering: states are
        renumbered topologically from ``start``, those not reachable from it dropped.
        Raises ValueError on a cycle."""
        out: list[list[int]] = [[] for _ in range(num_states)]
        indeg = [0] * num_states
        for i, arc in enumerate(arcs):
            out[arc[0]].append(i)
        seen = [False] * num_states
        stack = [start] if num_states else []
        if stack:
            seen[start] = True
        while stack:  # reachable states, and in-degrees among them
            s = stack.pop()
            for i in out[s]:
                d = arcs[i][1]
                indeg[d] += 1
                if not seen[d]:
                    seen[d] = True
                    stack.append(d)
        order: list[int] = []
        stack = [start] if num_states else []
        while stack:
            s = stack.pop()
            order.append(s)
            for i in reversed(out[s]):
                d = arcs[i][1]
                indeg[d] -= 1
                if indeg[d] == 0:
                    stack.append(d)
        if len(order) != sum(seen):
            raise ValueError("the lattice has a cycle")
        new = {s: k for k, s in enumerate(order)}
        kept = [i for s in order for i in out[s]]
        lengths = [len(arcs[i][5]) for i in kept]
        flens = [len(finals[s][2]) if s in finals else 0 for s in order]
        return cls(
            src=np.array([new[arcs[i][0]] for i in kept], dtype=np.int32),
            dst=np.array([new[arcs[i][1]] for i in kept], dtype=np.int32),
            word=np.array([arcs[i][2] for i in kept], dtype=np.int32),
            graph=np.array([arcs[i][3] for i in kept], dtype=np.float32),
            acoustic=np.array([arcs[i][4] for i in kept], dtype=np.float32),
            ilabels=np.array([x for i in kept for x in arcs[i][5]], dtype=np.int32),
            ilabel_offsets=np.r_[0, np.cumsum(lengths, dtype=np.int64)].astype(np.int32),
            final_graph=np.array([finals[s][0] if s in finals else np.inf for s in order],
                                 dtype=np.float32),
            final_acoustic=np.array([finals[s][1] if s in finals else 0.0 for s in order],
                                    dtype=np.float32),
            final_ilabels=np.array([x for s in order if s in finals for x in finals[s][2]],
                                   dtype=np.int32),
            final_offsets=np.r_[0, np.cumsum(flens, dtype=np.int64)].astype(np.int32))

    def check(self) -> None:
        """Raise ValueError unless the arrays are consistent and numbered topologically."""
        a, s = self.num_arcs, self.num_states
        sizes = {"dst": self.dst, "word": self.word, "graph": self.graph, "acoustic": self.acoustic}
        for name, arr in sizes.items():
            if arr.shape != (a,):
                raise ValueError(f"{name} has shape {arr.shape}, expected ({a},)")
        if self.ilabel_offsets.shape != (a + 1,) or self.final_offsets.shape != (s + 1,):
            raise ValueError("offsets must have one entry more than arcs (states)")
        if self.final_acoustic.shape != (s,):
            raise ValueError("final_acoustic must have one entry per state")
        if a and (self.src.min() < 0 or self.dst.max() >= s or (self.src >= self.dst).any()):
            raise ValueError("arcs must go from a lower to a higher state number")
        if self.ilabel_offsets[-1] != self.ilabels.size or self.final_offsets[-1] != self.final_ilabels.size:
            raise ValueError("offsets do not cover the input labels")

    def arc_string(self, a: int) -> np.ndarray:
        return self.ilabels[self.ilabel_offsets[a]:self.ilabel_offsets[a + 1]]

    def final_string(self, s: int) -> np.ndarray:
        return self.final_ilabels[self.final_offsets[s]:self.final_offsets[s + 1]]

    def costs(self, lm_weight: float, wip: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Scalar arc and final costs at LM weight ``w`` and penalty ``p`` (graph units)."""
        arc = (self.graph.astype(np.float64) + wip * (self.word != 0)
               + self.acoustic.astype(np.float64) / lm_weight)
        final = self.final_graph.astype(np.float64) + self.final_acoustic.astype(np.float64) / lm_weight
        return arc, final

    def best_path(self, lm_weight: float, wip: float = 0.0) -> BestPath | None:
        """The cheapest complete path at (``lm_weight``, ``wip``) as ``ctm.BestPath``
        (input labels minus one as ``pdfs``, words and the frame each word's arc starts
        at, and the cost in graph units); None for a lattice without a final state."""
        n = self.num_states
        if n == 0:
            return None
        arc_cost, final_cost = self.costs(lm_weight, wip)
        best = np.full(n, np.inf)
        back = np.full(n, -1, dtype=np.int64)
        best[0] = 0.0
        order = np.argsort(self.src, kind="stable")  # arcs by source: states in topological order
        src, dst = self.src[order], self.dst[order]
        for i in range(order.shape[0]):
            s = src[i]
            if not np.isfinite(best[s]):
                continue
            c = best[s] + arc_cost[order[i]]
            if c < best[dst[i]]:
                best[dst[i]] = c
                back[dst[i]] = order[i]
        total = best + final_cost
        end = int(np.argmin(total))
        if not np.isfinite(total[end]):
            return None
        arcs: list[int] = []
        s = end
        while s != 0:
            a = int(back[s])
            arcs.append(a)
            s = int(self.src[a])
        arcs.reverse()
        return self.path(arcs, end, float(total[end]))

    def path(self, arcs: Sequence[int], end: int, cost: float) -> BestPath:
        """The path through ``arcs`` ending in final state ``end`` as ``ctm.BestPath``: input
        labels minus one per frame, the words, the frame each word's arc starts at."""
        pdfs: list[int] = []
        words: list[int] = []
        frames: list[int] = []
        for a in arcs:
            if self.word[a]:
                words.append(int(self.word[a]))
                frames.append(len(pdfs))
            pdfs.extend((self.arc_string(a) - 1).tolist())
        pdfs.extend((self.final_string(end) - 1).tolist())
        return BestPath(pdfs=pdfs, words=words, word_frames=frames, cost=cost)

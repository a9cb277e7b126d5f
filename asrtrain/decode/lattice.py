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
        best = self.best_path(1.0, 0.0)
        return len(best.pdfs) if best is not None else 0

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
        pdfs: list[int] = []
        words: list[int] = []
        frames: list[int] = []
        for a in arcs:
            if self.word[a]:
                words.append(int(self.word[a]))
                frames.append(len(pdfs))
            pdfs.extend(int(x) - 1 for x in self.arc_string(a))
        pdfs.extend(int(x) - 1 for x in self.final_string(end))
        return BestPath(pdfs=pdfs, words=words, word_frames=frames, cost=float(total[end]))

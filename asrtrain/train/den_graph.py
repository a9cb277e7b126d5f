"""The denominator graph of lattice-free MMI (Kaldi's chain ``den.fst``, Povey et al. 2016).

Lattice MMI (``mmi.py``) needs a decoding of the training set, and its competitors are the
word sequences that decoding kept. Lattice-free MMI sums instead over every path of a
small graph: a phone trigram of the training alignments (only the trigrams seen, no
back-off: Kaldi's ``--no-prune-ngram-order``), expanded to the lang's context-dependent
HMM states with the lang's transition probabilities. Every state emits one pdf (the tree's
pdf of its triphone and HMM state), so the forward-backward (``lfmmi.py``) is a sparse
matrix product per frame.

A triphone's HMM states and exits depend on (left, phone, right) only through the tree's
pdfs and through (phone, right), the trigram's history: triphones that share both are one
set of states. The utterances start in the triphones they start with in the training
alignments (with their relative frequencies) and end after a triphone whose right context
is the end (phone id 0, as the training targets' context at the edges).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrtrain.core.atomic import atomic_path
from asrtrain.core.errors import InputError
from asrtrain.lang.hmm import Alignment, as_frames
from asrtrain.lang.tree import ContextTree

log = logging.getLogger("asrtrain.train")

Tri = tuple[int, int, int]   # (left, phone, right); 0 is the utterance's edge


@dataclass
class DenGraph:
    """HMM states that emit a pdf each, the transitions between them (the destination
    emits), and where a path may start and end, as probabilities."""

    pdf: np.ndarray       # int64 [S]
    src: np.ndarray       # int64 [A]
    dst: np.ndarray       # int64 [A]
    prob: np.ndarray      # float64 [A]
    initial: np.ndarray   # float64 [S]: the first frame's state
    final: np.ndarray     # float64 [S]: leaving the graph after the last frame
    tree_id: str

    @property
    def num_states(self) -> int:
        return int(self.pdf.size)

    def save(self, path: Path) -> None:
        with atomic_path(Path(path)) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, pdf=self.pdf, src=self.src, dst=self.dst, prob=self.prob,
                     initial=self.initial, final=self.final, tree_id=np.asarray(self.tree_id))

    @classmethod
    def load(cls, path: Path) -> DenGraph:
        try:
            with np.load(Path(path)) as z:
                return cls(pdf=z["pdf"], src=z["src"], dst=z["dst"], prob=z["prob"],
                           initial=z["initial"], final=z["final"], tree_id=str(z["tree_id"]))
        except (OSError, ValueError, KeyError) as exc:
            raise InputError(f"not a denominator graph ({exc})", path) from None


@dataclass
class PhoneTrigrams:
    """What the graph is estimated from: triphone successions of the training alignments."""

    starts: Counter[Tri]
    follows: dict[tuple[int, int], Counter[int]]   # (phone, right) → next right's counts
    utterances: int = 0


def count_trigrams(alignments: Iterable[Alignment]) -> PhoneTrigrams:
    """The start triphones and phone trigrams of every utterance's phone sequence."""
    grams = PhoneTrigrams(Counter(), defaultdict(Counter))
    for item in alignments:
        phones = [p for p, _, _ in as_frames(item).segments()]
        if not phones:
            continue
        grams.utterances += 1
        padded = [0, *phones, 0]
        grams.starts[(0, padded[1], padded[2])] += 1
        for i in range(1, len(padded) - 2):
            grams.follows[(padded[i], padded[i + 1])][padded[i + 2]] += 1
    return grams


def build(grams: PhoneTrigrams, tree: ContextTree) -> DenGraph:
    """The graph of ``grams`` on ``tree``'s states and topology."""
    if not grams.utterances:
        raise InputError("no aligned utterance to estimate the phone trigrams from")
    nodes: dict[tuple, int] = {}        # (phone, right, pdfs) → first state
    states: list[int] = []              # pdf of each state

    def node(tri: Tri) -> int:
        left, phone, right = tri
        n = tree.topo.num_states.get(phone)
        if n is None:
            raise InputError(f"phone id {phone} of the alignments is not in the tree")
        key = (phone, right, tuple(tree.pdf(left, phone, right, s) for s in range(n)))
        if key not in nodes:
            nodes[key] = len(states)
            states.extend(key[2])
        return nodes[key]

    seen: set[int] = set()     # nodes whose transitions are in (a node fixes phone and right)
    todo = list(grams.starts)
    arcs: dict[tuple[int, int], float] = {}
    final: dict[int, float] = {}
    while todo:
        tri = todo.pop()
        first = node(tri)
        if first in seen:
            continue
        seen.add(first)
        exits = _exits(tri, grams)
        n = tree.topo.num_states[tri[1]]
        for s, moves in enumerate(tree.topo.trans[tri[1]]):
            for dest, p in moves.items():
                if dest < n:
                    arcs[(first + s, first + dest)] = p
                    continue
                if not exits:                       # right context is the end
                    final[first + s] = final.get(first + s, 0.0) + p
                for nxt, q in exits.items():
                    arcs[(first + s, node(nxt))] = arcs.get((first + s, node(nxt)), 0.0) + p * q
                    todo.append(nxt)
    return _graph(states, arcs, final, {node(t): c for t, c in grams.starts.items()},
                  grams.utterances, tree.identity())


def _exits(tri: Tri, grams: PhoneTrigrams) -> dict[Tri, float]:
    """The triphones that may follow ``tri``, with the trigram's probabilities."""
    _, phone, right = tri
    if right == 0:
        return {}
    counts = grams.follows.get((phone, right))
    if not counts:
        raise InputError(f"phone {right} after {phone} never continues in the alignments")
    total = sum(counts.values())
    return {(phone, right, nxt): c / total for nxt, c in counts.items()}


def _graph(pdfs: list[int], arcs: dict[tuple[int, int], float], final: dict[int, float],
           starts: dict[int, int], utterances: int, tree_id: str) -> DenGraph:
    size = len(pdfs)
    pairs = np.asarray(sorted(arcs), dtype=np.int64).reshape(-1, 2)
    initial = np.zeros(size)
    for s, c in starts.items():
        initial[s] += c / utterances
    fin = np.zeros(size)
    for s, p in final.items():
        fin[s] = p
    graph = DenGraph(pdf=np.asarray(pdfs, dtype=np.int64), src=pairs[:, 0], dst=pairs[:, 1],
                     prob=np.asarray([arcs[(int(a), int(b))] for a, b in pairs]),
                     initial=initial, final=fin, tree_id=tree_id)
    log.info("denominator graph: %d states, %d transitions, %d pdfs of %d used", size,
             pairs.shape[0], np.unique(graph.pdf).size, max(pdfs) + 1)
    return graph


def make_den_graph(lang: Path, ali_dir: Path, out: Path, targets: str = "auto") -> DenGraph:
    """``out``: the graph of ``ali_dir``'s training alignments on ``lang``'s tree (the tree
    and topology the archive's targets come from)."""
    from asrtrain.lang.pdf_ali import read_split

    tree_file = Path(lang) / "tree"
    if not tree_file.is_file():
        raise InputError("no tree: not a lang dir made by prepare lang", tree_file)
    tree = ContextTree.read(tree_file)
    graph = build(count_trigrams(read_split(Path(ali_dir), "train", targets)), tree)
    graph.save(out)
    return graph

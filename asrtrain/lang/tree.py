"""The context-dependency tree: (left, phone, right, HMM state) → pdf.

Each (phone, state) is a three-level tree: the context-independent root, one biphone
level (the left neighbour for the first half of the states, the right neighbour for the
rest: where coarticulation acts), and triphone leaves. A triphone keeps its own pdf when
it has at least T training frames, a biphone when at least T frames remain after its
triphones; everything rarer ties back towards the context-independent state. T is found
by bisection so the tree has about ``--num-pdfs`` pdfs. Silence is context-independent.
Pdfs never span two phones or two states, so a pdf names its phone and state: the
decoder relies on that for self-loops and word times.

That frame-count tree is ``prepare lang``'s and ``prepare align --tree counts``'s; the
aligner's default is Kaldi's likelihood tree (``questions.py``), kept here as each split
phone state's ``questions`` (a phone state that never splits is its CI pdf).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from asrtrain.lang.hmm import Alignment, Topology, as_frames

log = logging.getLogger("asrtrain.lang.tree")
Key = tuple[int, ...]


@dataclass
class ContextTree:
    """Pdf ids of the CI states, biphone nodes and triphone leaves; plus the topology."""

    topo: Topology
    ci_phones: list[int]
    ci: dict[tuple[int, int], int] = field(default_factory=dict)        # (c, s)
    bi: dict[tuple[int, int, int], int] = field(default_factory=dict)   # (c, s, ctx)
    tri: dict[tuple[int, int, int, int], int] = field(default_factory=dict)  # (l, c, r, s)
    pdf_info: list[tuple[int, int]] = field(default_factory=list)       # pdf → (phone, state)
    #: (c, s) → a likelihood tree's nodes (``questions.py``): ``(side, phones, yes, no)``
    #: asks whether the left (side 0) or right (2) phone is in ``phones``; ``(pdf,)`` a leaf
    questions: dict[tuple[int, int], list[tuple]] = field(default_factory=dict)

    @property
    def num_pdfs(self) -> int:
        return len(self.pdf_info)

    def pdf(self, left: int, phone: int, right: int, state: int) -> int:
        """The pdf of a state of ``phone`` between ``left`` and ``right`` (0: none)."""
        got = self.tri.get((left, phone, right, state))
        if got is not None:
            return got
        ctx = left if _uses_left(state, self.topo.num_states[phone]) else right
        got = self.bi.get((phone, state, ctx))
        if got is not None:
            return got
        nodes = self.questions.get((phone, state))
        if nodes is None:
            return self.ci[(phone, state)]
        node = nodes[0]
        while len(node) > 1:
            side, members, yes, no = node
            node = nodes[yes if (left if side == 0 else right) in members else no]
        return int(node[0])

    def to_json(self) -> dict:
        out = {"topology": self.topo.to_json(), "ci_phones": self.ci_phones,
               "ci": [[*k, v] for k, v in sorted(self.ci.items())],
               "bi": [[*k, v] for k, v in sorted(self.bi.items())],
               "tri": [[*k, v] for k, v in sorted(self.tri.items())],
               "pdf_info": [list(x) for x in self.pdf_info]}
        if self.questions:   # a frame-count tree's JSON (and identity) stays as it was
            out["questions"] = [[c, s, [_node_json(n) for n in nodes]]
                                for (c, s), nodes in sorted(self.questions.items())]
        return out

    @classmethod
    def read(cls, path: Path) -> ContextTree:
        """The tree a file holds (a lang dir's ``tree``, a rung's, a graph's)."""
        from asrtrain.core.textio import read_text

        return cls.from_json(json.loads(read_text(path)))

    @classmethod
    def from_json(cls, data: dict) -> ContextTree:
        return cls(topo=Topology.from_json(data["topology"]), ci_phones=list(data["ci_phones"]),
                   ci={(a, b): v for a, b, v in data["ci"]},
                   bi={(a, b, c): v for a, b, c, v in data["bi"]},
                   tri={(a, b, c, d): v for a, b, c, d, v in data["tri"]},
                   pdf_info=[(int(a), int(b)) for a, b in data["pdf_info"]],
                   questions={(int(c), int(s)): [_node_from_json(n) for n in nodes]
                              for c, s, nodes in data.get("questions", [])})

    def identity(self) -> str:
        """A hash of the tree: graphs, pdf alignments and models carry it to be matched."""
        blob = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def _node_json(node: tuple) -> list:
    if len(node) == 1:
        return [int(node[0])]
    side, members, yes, no = node
    return [int(side), sorted(int(p) for p in members), int(yes), int(no)]


def _node_from_json(node: list) -> tuple:
    if len(node) == 1:
        return (int(node[0]),)
    side, members, yes, no = node
    return (int(side), frozenset(int(p) for p in members), int(yes), int(no))


def _uses_left(state: int, num_states: int) -> bool:
    return state < (num_states + 1) // 2


def context_counts(alignments: Iterable[Alignment], topo: Topology) -> Counter[Key]:
    """Frames per (left, phone, right, state): the aligner's states, or the uniform split."""
    counts: Counter[Key] = Counter()
    for item in alignments:
        ali = as_frames(item)
        segs = ali.segments()
        for i, (phone, start, n) in enumerate(segs):
            s_count = topo.num_states.get(phone)
            if s_count is None:
                continue
            left = segs[i - 1][0] if i > 0 else 0
            right = segs[i + 1][0] if i + 1 < len(segs) else 0
            states = ali.segment_states(phone, start, n, s_count)
            for s, k in zip(*np.unique(states, return_counts=True), strict=True):
                counts[(left, phone, right, int(s))] += int(k)
    return counts


def _select(counts: Counter[Key], topo: Topology, ci_phones: set[int], threshold: float
            ) -> tuple[list[Key], list[Key]]:
    """The triphone leaves and biphone nodes that keep their own pdf at ``threshold``."""
    tri = [k for k, c in counts.items() if c >= threshold and k[1] not in ci_phones]
    residual: Counter[Key] = Counter()
    kept = set(tri)
    for (left, c, right, s), n in counts.items():
        if c in ci_phones or (left, c, right, s) in kept:
            continue
        residual[(c, s, left if _uses_left(s, topo.num_states[c]) else right)] += n
    bi = [k for k, n in residual.items() if n >= threshold]
    return tri, bi


def build_tree(alignments: Iterable[Alignment], topo: Topology, ci_phones: Iterable[int],
               num_pdfs: int) -> tuple[ContextTree, Counter[Key]]:
    """The tree with about ``num_pdfs`` pdfs (at least one per phone state)."""
    counts = context_counts(alignments, topo)
    return tree_from_counts(counts, topo, ci_phones, num_pdfs), counts


def tree_from_counts(counts: Counter[Key], topo: Topology, ci_phones: Iterable[int],
                     num_pdfs: int) -> ContextTree:
    """:func:`build_tree` from the frames per context already counted (alignment jobs
    count theirs, the parent sums them: the tree depends only on the counts)."""
    ci_set = set(ci_phones)
    n_ci = sum(topo.num_states.values())
    lo, hi = 1.0, float(sum(counts.values())) + 1.0   # at hi nothing but the CI states
    best: tuple[list[Key], list[Key]] = ([], [])
    if n_ci < num_pdfs:
        for _ in range(40):  # bisection on the frame threshold (pdfs fall as it rises)
            mid = (lo * hi) ** 0.5
            tri, bi = _select(counts, topo, ci_set, mid)
            if n_ci + len(tri) + len(bi) > num_pdfs:
                lo = mid
            else:
                hi, best = mid, (tri, bi)
            if hi - lo < 0.5:
                break
    tree = ContextTree(topo=topo, ci_phones=sorted(ci_set))
    for phone in sorted(topo.num_states):
        for s in range(topo.num_states[phone]):
            tree.ci[(phone, s)] = len(tree.pdf_info)
            tree.pdf_info.append((phone, s))
    tri, bi = best
    for c, s, ctx in sorted(bi):
        tree.bi[(c, s, ctx)] = len(tree.pdf_info)
        tree.pdf_info.append((c, s))
    for key in sorted(tri):
        tree.tri[key] = len(tree.pdf_info)  # type: ignore[index]
        c, s = key[1], key[3]
        tree.pdf_info.append((c, s))
    log.info("tree: %d pdfs (%d context-independent, %d biphone, %d triphone; asked for %d)",
             tree.num_pdfs, n_ci, len(bi), len(tri), num_pdfs)
    return tree


def pdf_table_text(tree: ContextTree, phone_names: dict[int, str]) -> str:
    """``pdf phone state context`` per line: the tree's human-readable table."""
    name = {**phone_names, 0: "<none>"}
    lines = [""] * tree.num_pdfs
    for (c, s), p in tree.ci.items():
        lines[p] = f"{p} {name[c]} {s} *"
    for (c, s, ctx), p in tree.bi.items():
        side = "left" if _uses_left(s, tree.topo.num_states[c]) else "right"
        lines[p] = f"{p} {name[c]} {s} {side}={name[ctx]}"
    for (left, c, right, s), p in tree.tri.items():
        lines[p] = f"{p} {name[c]} {s} left={name[left]},right={name[right]}"
    for (c, s), nodes in tree.questions.items():
        for pdf, path in _leaf_paths(nodes):
            asked = ",".join(f"{'left' if side == 0 else 'right'}{'' if yes else '!'}"
                             f"={{{'|'.join(sorted(name.get(p, str(p)) for p in members))}}}"
                             for side, members, yes in path)
            lines[pdf] = f"{pdf} {name[c]} {s} {asked or '*'}"
    return "\n".join(lines) + "\n"


def _leaf_paths(nodes: list[tuple]) -> list[tuple[int, list[tuple[int, frozenset, bool]]]]:
    """Each leaf's pdf and the answers that lead to it."""
    out: list[tuple[int, list[tuple[int, frozenset, bool]]]] = []
    stack: list[tuple[int, list[tuple[int, frozenset, bool]]]] = [(0, [])]
    while stack:
        k, path = stack.pop()
        node = nodes[k]
        if len(node) == 1:
            out.append((int(node[0]), path))
            continue
        side, members, yes, no = node
        stack.append((no, [*path, (side, members, False)]))
        stack.append((yes, [*path, (side, members, True)]))
    return out

"""Kaldi's likelihood tree: contexts clustered by the phone-set question that best splits
their frames (``acc-tree-stats``, ``cluster-phones``, ``build-tree``).

The frame-count tree of ``tree.py`` gives a triphone its own pdf when it has enough
frames and ties everything rarer back to its phone state, whatever the frames sound
like: on speechocean762 its triphones barely beat the monophones. Here each phone state
is a root; a leaf's frames (one diagonal Gaussian per context, summed) are split by the
question "is the left (or right) phone in set Q?" that raises their log-likelihood most,
best split first over the whole forest, until the tree has the leaves asked for. The
questions are the nodes of a binary clustering of the phones by their middle states'
Gaussians (Kaldi's automatic questions); an utterance edge (context 0) counts as
silence. Every context, seen or not, answers every question, so no pdf is a back-off
without frames: a word pair never seen in training still reaches a leaf trained on
similar contexts.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from asrtrain.lang.hmm import Topology

if TYPE_CHECKING:
    from asrtrain.lang.tree import ContextTree

log = logging.getLogger("asrtrain.lang.tree")

#: Frames a leaf keeps at least (either side of a split).
MIN_LEAF_FRAMES = 50
#: Variance floor of a cluster's Gaussian, relative to the mean variance of all frames.
VAR_FLOOR_RATIO = 0.01
#: Contexts are packed into one integer: phone ids below 2^14, states below 2^4.
_BITS = 14


@dataclass
class ContextStats:
    """Frames, sums and sums of squares per (left, phone, right, state)."""

    keys: np.ndarray   # [K, 4] int64
    n: np.ndarray      # [K] float64
    sx: np.ndarray     # [K, d]
    sxx: np.ndarray    # [K, d]

    @classmethod
    def empty(cls, dim: int) -> ContextStats:
        return cls(np.zeros((0, 4), np.int64), np.zeros(0), np.zeros((0, dim)), np.zeros((0, dim)))

    def add(self, other: ContextStats) -> ContextStats:
        """The two summed key by key."""
        return ContextStats.total([self, other], self.sx.shape[1])

    @staticmethod
    def total(parts: list[ContextStats], dim: int) -> ContextStats:
        """Every part summed key by key in one pass (the parent sums its jobs')."""
        parts = [p for p in parts if len(p.n)]
        if len(parts) <= 1:
            return parts[0] if parts else ContextStats.empty(dim)
        return _reduce(np.concatenate([_pack(p.keys) for p in parts]),
                       np.concatenate([p.n for p in parts]),
                       np.concatenate([p.sx for p in parts]), np.concatenate([p.sxx for p in parts]))


def _pack(keys: np.ndarray) -> np.ndarray:
    k = keys.astype(np.int64)
    return (((k[:, 0] << _BITS) | k[:, 1]) << _BITS | k[:, 2]) << 4 | k[:, 3]


def _unpack(codes: np.ndarray) -> np.ndarray:
    mask = (1 << _BITS) - 1
    return np.stack([codes >> (4 + 2 * _BITS), (codes >> (4 + _BITS)) & mask,
                     (codes >> 4) & mask, codes & 15], axis=1)


def _reduce(codes: np.ndarray, n: np.ndarray, sx: np.ndarray, sxx: np.ndarray) -> ContextStats:
    """Rows with equal codes summed (sorted by code: the same order on every job count)."""
    if len(codes) == 0:
        return ContextStats(np.zeros((0, 4), np.int64), n[:0], sx[:0], sxx[:0])
    order = np.argsort(codes, kind="stable")
    codes = codes[order]
    starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
    return ContextStats(_unpack(codes[starts]), np.add.reduceat(n[order], starts),
                        np.add.reduceat(sx[order], starts), np.add.reduceat(sxx[order], starts))


def context_stats(items: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
                  dim: int = 0, flush_rows: int = 100_000) -> ContextStats:
    """Stats of utterances given as ``(features, phone per frame, state per frame, the
    frames where phones start)``; a phone's neighbours are its context (0 at the edges).
    The parts are summed whenever they hold ``flush_rows`` rows, so memory follows the
    distinct contexts, not the frames."""
    total = ContextStats.empty(dim)
    parts: list[ContextStats] = []
    rows = 0
    for x, phone, state, starts in items:
        seg_phone = phone[starts]
        lengths = np.diff(np.concatenate([starts, [len(phone)]]))
        left = np.concatenate([[0], seg_phone[:-1]])
        right = np.concatenate([seg_phone[1:], [0]])
        keys = np.stack([np.repeat(left, lengths), phone, np.repeat(right, lengths), state], 1)
        xd = x.astype(np.float64)
        parts.append(_reduce(_pack(keys), np.ones(len(phone)), xd, xd * xd))
        rows += len(parts[-1].n)
        if rows >= flush_rows:
            total, parts, rows = ContextStats.total([total, *parts], dim), [], 0
    return ContextStats.total([total, *parts], dim)


def _loglike(n: np.ndarray, sx: np.ndarray, sxx: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Log-likelihood of each row's frames under their own diagonal Gaussian, up to terms
    that cancel in a split (−½ n Σ log σ²)."""
    safe = np.maximum(n, 1e-10)[..., None]
    mean = sx / safe
    var = np.maximum(sxx / safe - mean * mean, floor)
    return -0.5 * n * np.log(var).sum(-1)


def phone_questions(stats: ContextStats, middle: dict[int, int], sil: Iterable[int],
                    floor: np.ndarray) -> list[frozenset[int]]:
    """The nodes of a top-down binary clustering of the phones (``middle``: each phone's
    middle state) and the utterance edge (0, with silence) by the Gaussian of their middle
    states' frames: Kaldi's ``cluster-phones``."""
    sil = set(sil)
    phones = sorted(middle)
    dim = stats.sx.shape[1]
    n, sx, sxx = {}, {}, {}
    for p in [0, *phones]:
        n[p], sx[p], sxx[p] = 0.0, np.zeros(dim), np.zeros(dim)
    for p in phones:
        rows = (stats.keys[:, 1] == p) & (stats.keys[:, 3] == middle[p])
        n[p] += stats.n[rows].sum()
        sx[p] += stats.sx[rows].sum(0)
        sxx[p] += stats.sxx[rows].sum(0)
    for p in sil:   # the edge sounds like silence
        n[0] += n[p]
        sx[0] = sx[0] + sx[p]
        sxx[0] = sxx[0] + sxx[p]
    items = [0, *phones]
    table = (np.array([n[p] for p in items]), np.stack([sx[p] for p in items]),
             np.stack([sxx[p] for p in items]))
    out: list[frozenset[int]] = []
    _cluster(list(range(len(items))), table, floor, items, out)
    return out


def _cluster(members: list[int], table: tuple[np.ndarray, np.ndarray, np.ndarray],
             floor: np.ndarray, items: list[int], out: list[frozenset[int]]) -> None:
    out.append(frozenset(items[i] for i in members))
    if len(members) < 2:
        return
    a, b = _two_means(members, table, floor)
    _cluster(a, table, floor, items, out)
    _cluster(b, table, floor, items, out)


def _two_means(members: list[int], table: tuple[np.ndarray, np.ndarray, np.ndarray],
               floor: np.ndarray) -> tuple[list[int], list[int]]:
    """Two groups whose Gaussians fit their phones best (k-means on the likelihood,
    started from the most frequent phone and the one it fits worst)."""
    n, sx, sxx = (t[members] for t in table)
    seed = int(np.argmax(n))
    fit = _fit(n, sx, sxx, n[seed:seed + 1], sx[seed:seed + 1], sxx[seed:seed + 1], floor)[:, 0]
    fit[seed] = np.inf
    side = np.zeros(len(members), dtype=bool)
    side[int(np.argmin(fit))] = True
    for _ in range(20):
        cn = np.array([n[~side].sum(), n[side].sum()])
        csx = np.stack([sx[~side].sum(0), sx[side].sum(0)])
        csxx = np.stack([sxx[~side].sum(0), sxx[side].sum(0)])
        new = np.argmax(_fit(n, sx, sxx, cn, csx, csxx, floor), axis=1).astype(bool)
        if new.all() or not new.any():
            break
        if (new == side).all():
            break
        side = new
    if side.all() or not side.any():   # degenerate (equal Gaussians): halve by frequency
        order = np.argsort(-n, kind="stable")
        side = np.zeros(len(members), dtype=bool)
        side[order[len(members) // 2:]] = True
    return ([m for m, s in zip(members, side, strict=True) if not s],
            [m for m, s in zip(members, side, strict=True) if s])


def _fit(n: np.ndarray, sx: np.ndarray, sxx: np.ndarray, cn: np.ndarray, csx: np.ndarray,
         csxx: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """[items, clusters]: log-likelihood of each item's frames under each cluster's Gaussian."""
    safe = np.maximum(cn, 1e-10)[:, None]
    mean = csx / safe
    var = np.maximum(csxx / safe - mean * mean, floor)
    quad = (sxx[:, None, :] - 2 * sx[:, None, :] * mean[None] + n[:, None, None] * mean[None] ** 2)
    return -0.5 * (n[:, None] * np.log(var).sum(-1)[None] + (quad / var[None]).sum(-1))


@dataclass
class _Leaf:
    root: tuple[int, int]
    rows: np.ndarray                # indices into the stats
    node: int                       # its index in the root's node list
    split: tuple[float, int, int, np.ndarray, np.ndarray] | None = None  # gain, side, q, yes, no


def grow_question_tree(stats: ContextStats, topo: Topology, ci_phones: Iterable[int],
                       num_leaves: int, min_frames: int = MIN_LEAF_FRAMES
                       ) -> tuple[dict[tuple[int, int], list[tuple]], list[tuple[int, int]]]:
    """The forest: per (phone, state) root its nodes (``(side, phones, yes, no)`` or
    ``(pdf,)``, node 0 the root; side 0 asks the left phone, 2 the right) and the pdfs'
    (phone, state). Split best gain first until ``num_leaves`` (context-independent
    phones stay one leaf a state)."""
    ci = set(ci_phones)
    phones = sorted(topo.num_states)
    total = stats.n.sum()
    mean_var = (stats.sxx.sum(0) / max(total, 1.0) - (stats.sx.sum(0) / max(total, 1.0)) ** 2)
    floor = VAR_FLOOR_RATIO * np.maximum(mean_var, 1e-10)
    middle = {p: topo.num_states[p] // 2 for p in phones}
    questions = [q for q in phone_questions(stats, middle, ci, floor) if len(q) < len(phones) + 1]
    values = [0, *phones]
    col = {p: i for i, p in enumerate(values)}
    member = np.array([[p in q for p in values] for q in questions], dtype=np.float64)
    lookup = np.zeros(max(values) + 1, dtype=np.int64)
    for p, i in col.items():
        lookup[p] = i
    nodes: dict[tuple[int, int], list[tuple]] = {}
    leaves: list[_Leaf] = []
    heap: list[tuple[float, int]] = []
    for p in phones:
        for s in range(topo.num_states[p]):
            rows = np.flatnonzero((stats.keys[:, 1] == p) & (stats.keys[:, 3] == s))
            nodes[(p, s)] = [()]
            leaf = _Leaf((p, s), rows, 0)
            if p not in ci:
                leaf.split = _best_split(stats, rows, member, lookup, floor, min_frames)
            leaves.append(leaf)
            if leaf.split is not None:
                heapq.heappush(heap, (-leaf.split[0], len(leaves) - 1))
    while len(leaves) < num_leaves and heap:
        _, i = heapq.heappop(heap)
        leaf = leaves[i]
        assert leaf.split is not None
        _, side, q, yes, no = leaf.split
        tree = nodes[leaf.root]
        tree[leaf.node] = (side, questions[q], len(tree), len(tree) + 1)
        children = [_Leaf(leaf.root, yes, len(tree)), _Leaf(leaf.root, no, len(tree) + 1)]
        tree.extend([(), ()])
        leaves[i] = children[0]
        leaves.append(children[1])
        for j, child in ((i, children[0]), (len(leaves) - 1, children[1])):
            child.split = _best_split(stats, child.rows, member, lookup, floor, min_frames)
            if child.split is not None:
                heapq.heappush(heap, (-child.split[0], j))
    pdf_info: list[tuple[int, int]] = []
    for root in sorted(nodes):   # pdfs numbered root by root, nodes in order
        tree = nodes[root]
        for k, node in enumerate(tree):
            if node == ():
                tree[k] = (len(pdf_info),)
                pdf_info.append(root)
    split_roots = sum(len(t) > 1 for t in nodes.values())
    log.info("tree: %d pdfs from %d phone states (%d split by %d phone-set questions; asked "
             "for %d, at least %d frames a leaf)", len(pdf_info), len(nodes), split_roots,
             len(questions), num_leaves, min_frames)
    return nodes, pdf_info


def _best_split(stats: ContextStats, rows: np.ndarray, member: np.ndarray, lookup: np.ndarray,
                floor: np.ndarray, min_frames: int
                ) -> tuple[float, int, int, np.ndarray, np.ndarray] | None:
    """The question (left or right) that raises the leaf's log-likelihood most with at
    least ``min_frames`` on either side; None if none does."""
    n, sx, sxx = stats.n[rows], stats.sx[rows], stats.sxx[rows]
    tn = n.sum()
    if tn < 2 * min_frames:
        return None
    parent = _loglike(tn, sx.sum(0), sxx.sum(0), floor)
    best: tuple[float, int, int] | None = None
    for side in (0, 2):
        ctx = lookup[stats.keys[rows, side]]
        width = member.shape[1]
        an = np.bincount(ctx, weights=n, minlength=width)
        asx = np.zeros((width, sx.shape[1]))
        asxx = np.zeros_like(asx)
        np.add.at(asx, ctx, sx)
        np.add.at(asxx, ctx, sxx)
        yn, ysx, ysxx = member @ an, member @ asx, member @ asxx
        gain = (_loglike(yn, ysx, ysxx, floor) + _loglike(tn - yn, asx.sum(0) - ysx,
                                                           asxx.sum(0) - ysxx, floor) - parent)
        gain[(yn < min_frames) | (tn - yn < min_frames)] = -np.inf
        q = int(np.argmax(gain))
        if np.isfinite(gain[q]) and gain[q] > 0 and (best is None or gain[q] > best[0]):
            best = (float(gain[q]), side, q)
    if best is None:
        return None
    gain, side, q = best
    yes_mask = member[q][lookup[stats.keys[rows, side]]] > 0
    return gain, side, q, rows[yes_mask], rows[~yes_mask]


def question_tree(stats: ContextStats, topo: Topology, ci_phones: Iterable[int],
                  num_pdfs: int, min_frames: int = MIN_LEAF_FRAMES) -> ContextTree:
    """:func:`grow_question_tree` as a :class:`ContextTree` (an unsplit root is its
    context-independent pdf)."""
    from asrtrain.lang.tree import ContextTree

    ci_list = sorted(set(ci_phones))
    nodes, pdf_info = grow_question_tree(stats, topo, ci_list, num_pdfs, min_frames)
    tree = ContextTree(topo=topo, ci_phones=ci_list, pdf_info=pdf_info)
    for root, tree_nodes in nodes.items():
        if len(tree_nodes) == 1:
            tree.ci[root] = int(tree_nodes[0][0])
        else:
            tree.questions[root] = tree_nodes
    return tree

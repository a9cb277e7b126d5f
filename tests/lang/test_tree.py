"""HMM topology from alignments, the context tree, pdf alignments."""

from __future__ import annotations

import numpy as np
import pytest

from asrtrain.core.errors import InputError
from asrtrain.lang.hmm import estimate_topology, segments, state_split
from asrtrain.lang.pdf_ali import phone_to_pdf
from asrtrain.lang.tree import ContextTree, build_tree


def test_uniform_split_and_segments():
    assert state_split(7, 3).tolist() == [0, 0, 0, 1, 1, 2, 2]
    assert state_split(2, 3).tolist() == [0, 1]
    assert segments(np.array([1, 1, 2, 2, 2, 1])) == [(1, 0, 2), (2, 2, 3), (1, 5, 1)]


def test_transition_probabilities_are_counts():
    # phone 2 seen once with 6 frames: states 0 0 1 1 2 2 -> each state: one loop, one move
    topo = estimate_topology([np.array([1, 1, 1, 2, 2, 2, 2, 2, 2, 1])], [1, 2], sil_phones=[1])
    t = topo.trans[2]
    # state 0: self 1+1, next 1+1, early exit 0.05 -> total 4.05
    assert t[0] == pytest.approx({0: 2 / 4.05, 1: 2 / 4.05, 3: 0.05 / 4.05})
    assert t[2] == pytest.approx({2: 0.5, 3: 0.5})
    for rows in topo.trans.values():
        for row in rows:
            assert sum(row.values()) == pytest.approx(1.0)
    assert topo.forward(2, 0) == pytest.approx({1: 2 / 2.05, 3: 0.05 / 2.05})


def _alis(rng, n=200):
    out = []
    for _ in range(n):
        phones = [1] + list(rng.integers(2, 6, size=6)) + [1]
        out.append(np.repeat(phones, rng.integers(3, 9, size=len(phones))).astype(np.int64))
    return out


def test_tree_size_follows_num_pdfs_and_ties_back():
    rng = np.random.default_rng(0)
    alis = _alis(rng)
    topo = estimate_topology(alis, range(1, 6), sil_phones=[1])
    sizes = []
    for target in (15, 60, 150):
        tree, counts = build_tree(alis, topo, ci_phones=[1], num_pdfs=target)
        sizes.append(tree.num_pdfs)
        assert tree.num_pdfs >= 15
        # silence stays context-independent; an unseen context falls back to its CI state
        assert tree.pdf(3, 1, 4, 0) == tree.ci[(1, 0)]
        assert tree.pdf(9, 2, 9, 1) == tree.ci[(2, 1)]
        # pdfs never mix phones or states
        for (left, c, right, s) in counts:
            assert tree.pdf_info[tree.pdf(left, c, right, s)] == (c, s)
    assert sizes[0] == 15 and sizes[0] < sizes[1] < sizes[2]
    assert abs(sizes[1] - 60) <= 6 and abs(sizes[2] - 150) <= 15


def test_tree_roundtrip_and_identity():
    rng = np.random.default_rng(1)
    alis = _alis(rng, 50)
    topo = estimate_topology(alis, range(1, 6), sil_phones=[1])
    tree, _ = build_tree(alis, topo, ci_phones=[1], num_pdfs=40)
    again = ContextTree.from_json(tree.to_json())
    assert again.identity() == tree.identity() and again.tri == tree.tri
    other, _ = build_tree(alis, topo, ci_phones=[1], num_pdfs=25)
    assert other.identity() != tree.identity()


def test_pdf_alignment_follows_states():
    alis = [np.array([1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 1, 1, 1], dtype=np.int64)]
    topo = estimate_topology(alis, [1, 2, 3], sil_phones=[1])
    tree, _ = build_tree(alis, topo, ci_phones=[1], num_pdfs=9)
    pdf = phone_to_pdf(alis[0], tree, "u1")
    states = [tree.pdf_info[p] for p in pdf]
    assert states == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 0), (2, 1), (2, 1), (2, 2), (2, 2),
                      (3, 0), (1, 0), (1, 1), (1, 2)]
    with pytest.raises(InputError, match="utterance u2: phone id 7"):
        phone_to_pdf(np.array([1, 7, 7]), tree, "u2")


def test_ctm_cuts_split_equal_neighbours(mini_corpus):
    from asrtrain.lang.hmm import segments
    from asrtrain.lang.pdf_ali import read_split

    ids = {p: i for i, p in enumerate(["sil", "a", "t", "r", "i", "d"], start=1)}
    seen = 0
    for item in read_split(mini_corpus, "train"):
        ali, cuts = item.phones, item.cuts
        with_cuts, without = segments(ali, cuts), segments(ali)
        assert sum(n for _, _, n in with_cuts) == len(ali)
        doubled = [i for i in range(1, len(with_cuts)) if with_cuts[i][0] == with_cuts[i - 1][0]]
        seen += len(doubled)
        assert all(with_cuts[i][0] == ids["d"] for i in doubled)   # only GOOD DOG: d | d
        assert len(with_cuts) == len(without) + len(doubled)
    assert seen > 0

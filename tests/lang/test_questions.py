"""The likelihood tree (``lang/questions.py``): statistics that the jobs sum as one
process would count them, the split a planted context effect calls for, every context
(seen or not) reaching a leaf, and the tree surviving its JSON."""

from __future__ import annotations

import itertools

import numpy as np

from asrtrain.lang.hmm import Topology
from asrtrain.lang.questions import ContextStats, context_stats, phone_questions, question_tree
from asrtrain.lang.tree import ContextTree

SIL = 1
PHONES = [1, 2, 3, 4, 5, 6, 7]
DIM = 3


def _topo() -> Topology:
    trans = [{s: 0.75, s + 1: 0.25} for s in range(3)]
    return Topology(num_states={p: 3 for p in PHONES}, trans={p: trans for p in PHONES})


def _utterances(rng: np.random.Generator, n: int = 300) -> list[tuple]:
    """Random phone strings between silences, 4 frames a state; a phone's frames have the
    phone's mean, except phone 5's first state after phone 2 or 3, shifted by +4."""
    out = []
    for _ in range(n):
        seq = [SIL, *rng.choice(PHONES[1:], size=int(rng.integers(3, 8))).tolist(), SIL]
        phone, state, x, starts = [], [], [], []
        for i, p in enumerate(seq):
            starts.append(len(phone))
            for s in range(3):
                mean = np.full(DIM, float(p)) + (4.0 if p == 5 and s == 0 and i > 0
                                                 and seq[i - 1] in (2, 3) else 0.0)
                for _ in range(4):
                    phone.append(p)
                    state.append(s)
                    x.append(mean + 0.3 * rng.standard_normal(DIM))
        out.append((np.array(x), np.array(phone), np.array(state), np.array(starts)))
    return out


def test_jobs_summed_equal_one_process_and_count_every_frame() -> None:
    """(One job's part also summed every few rows, as a large share is: the same stats.)"""
    utts = _utterances(np.random.default_rng(0), 60)
    whole = context_stats(utts)
    summed = context_stats(utts[:25], flush_rows=7).add(context_stats(utts[25:]))
    np.testing.assert_array_equal(whole.keys, summed.keys)
    np.testing.assert_allclose(whole.sx, summed.sx)
    np.testing.assert_allclose(whole.sxx, summed.sxx)
    assert whole.n.sum() == sum(len(u[1]) for u in utts)
    # the edges are context 0; a key's frames are its (left, phone, right, state)'s
    first = utts[0]
    key = (0, SIL, int(first[1][first[3][1]]), 0)
    assert any((row == key).all() for row in whole.keys)
    assert context_stats([]).add(whole) is whole
    assert context_stats([], DIM).sx.shape == (0, DIM)


def test_the_planted_context_effect_is_the_first_split_and_unseen_contexts_reach_a_leaf() -> None:
    stats = context_stats(_utterances(np.random.default_rng(1)))
    tree = question_tree(stats, _topo(), ci_phones=[SIL], num_pdfs=22)
    assert tree.num_pdfs == 22
    assert (SIL, 0) in tree.ci and (SIL, 0) not in tree.questions   # silence never splits
    side, members, yes, no = tree.questions[(5, 0)][0]
    assert side == 0 and set(members) & {2, 3} in ({2, 3}, set()), members
    shifted = {tree.pdf(left, 5, right, 0) for left in (2, 3) for right in PHONES}
    plain = {tree.pdf(left, 5, right, 0) for left in (4, 6, 7) for right in PHONES}
    assert not shifted & plain
    for left, c, right, s in itertools.product([0, *PHONES], PHONES, [0, *PHONES], range(3)):
        pdf = tree.pdf(left, c, right, s)   # every context, seen in training or not
        assert tree.pdf_info[pdf] == (c, s)


def test_the_questions_cluster_phones_that_sound_alike() -> None:
    rng = np.random.default_rng(2)
    utts = []
    for (x, phone, state, starts) in _utterances(rng, 100):
        x = x.copy()
        x[np.isin(phone, [6, 7])] += 20.0   # 6 and 7 far from the rest, close to each other
        utts.append((x, phone, state, starts))
    stats = context_stats(utts)
    floor = np.full(DIM, 1e-3)
    questions = phone_questions(stats, {p: 1 for p in PHONES}, [SIL], floor)
    assert frozenset([6, 7]) in questions
    assert frozenset([0, *PHONES]) == questions[0]
    assert any({0, SIL} <= q and len(q) < 4 for q in questions)   # the edge sits with silence


def test_the_tree_survives_json_and_a_count_tree_keeps_its_json() -> None:
    stats = context_stats(_utterances(np.random.default_rng(3), 120))
    tree = question_tree(stats, _topo(), ci_phones=[SIL], num_pdfs=30)
    again = ContextTree.from_json(tree.to_json())
    assert again.identity() == tree.identity()
    for left, c, right in itertools.product([0, *PHONES], PHONES, [0, *PHONES]):
        assert again.pdf(left, c, right, 0) == tree.pdf(left, c, right, 0)
    plain = ContextTree(topo=_topo(), ci_phones=[SIL], ci={(1, 0): 0}, pdf_info=[(1, 0)])
    assert "questions" not in plain.to_json()


def test_a_leaf_keeps_its_minimum_of_frames() -> None:
    stats = context_stats(_utterances(np.random.default_rng(4), 80))
    tree = question_tree(stats, _topo(), ci_phones=[SIL], num_pdfs=500, min_frames=40)
    frames = np.zeros(tree.num_pdfs)
    for (left, c, right, s), n in zip(stats.keys.tolist(), stats.n, strict=True):
        frames[tree.pdf(left, c, right, s)] += n
    assert frames.min() >= 40
    assert tree.num_pdfs < 500   # it stopped where no split kept 40 frames a side


def test_empty_stats_add() -> None:
    empty = ContextStats.empty(DIM)
    assert empty.add(empty).n.shape == (0,)

"""Rescoring lattices with another LM, checked path by path against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hand_lattices import NgramStore, all_paths, random_lattice, words_of

from asrtrain.decode.lattice import WordLattice
from asrtrain.decode.lattice_sweep import best_paths
from asrtrain.decode.rescore import rescore
from asrtrain.lang.lm import estimate

VOCAB = {i: w for i, w in enumerate(["<eps>", *"ABCDEFGHIJKL"]) if i}


def _sentences(seed: int, n: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    names = list(VOCAB.values())
    # a skewed, repetitive text so that higher orders and back-off both matter
    p = 0.6 ** np.arange(len(names))
    return [[names[i] for i in rng.choice(len(names), size=int(rng.integers(1, 7)), p=p / p.sum())]
            for _ in range(n)]


@pytest.fixture(scope="module")
def lms() -> tuple[NgramStore, NgramStore]:
    """A small trigram (the "first pass") and a 4-gram on other text (the "full LM")."""
    small = estimate(_sentences(1, 40), order=3, vocab=VOCAB.values(), min_count="1,1,2")
    full = estimate(_sentences(2, 400), order=4, vocab=VOCAB.values())
    return NgramStore(small, VOCAB), NgramStore(full, VOCAB)


def _lattice(seed: int, deterministic: bool = False) -> WordLattice:
    rng = np.random.default_rng(seed)
    # a deterministic one: at most 6 + 5 arcs out of a state, fewer than the 12 words
    states, extra = (int(rng.integers(3, 8)), int(rng.integers(0, 6))) if deterministic else \
        (int(rng.integers(3, 10)), int(rng.integers(2, 14)))
    lat = random_lattice(rng, states=states, extra_arcs=extra, vocab=len(VOCAB),
                         epsilon=0.0 if deterministic else 0.2)
    if deterministic:  # no state with two arcs of one word: a determinized lattice's shape
        for s in range(lat.num_states):
            arcs = np.flatnonzero(lat.src == s)
            lat.word[arcs] = rng.permutation(np.arange(1, len(VOCAB) + 1))[:arcs.size]
    return lat


def _by_path(lat: WordLattice) -> dict[tuple, list[tuple[float, float]]]:
    """(words, frames' input labels) → sorted (graph, acoustic) totals of its paths."""
    out: dict[tuple, list[tuple[float, float]]] = {}
    for arcs, end in all_paths(lat):
        key = (words_of(lat, arcs),
               tuple(int(x) for a in arcs for x in lat.arc_string(a)) + tuple(lat.final_string(end).tolist()))
        g = float(lat.final_graph[end]) + sum(float(lat.graph[a]) for a in arcs)
        ac = float(lat.final_acoustic[end]) + sum(float(lat.acoustic[a]) for a in arcs)
        out.setdefault(key, []).append((g, ac))
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("seed", range(10))
def test_the_same_lm_changes_no_path(seed, lms):
    lat = _lattice(seed)
    for lm in lms:
        got, stats = rescore(lat, lm, lm)
        before, after = _by_path(lat), _by_path(got)
        assert before.keys() == after.keys()
        for key, paths in before.items():
            assert len(after[key]) == len(paths)
            for (g0, a0), (g1, a1) in zip(paths, after[key], strict=True):
                assert abs(g1 - g0) <= 1e-4 and abs(a1 - a0) <= 1e-4
        assert stats.dropped_arcs == stats.dropped_finals == 0


@pytest.mark.parametrize("seed", range(10))
def test_another_lm_swaps_each_paths_lm_cost(seed, lms):
    """graph' = graph − old(words) + new(words), per path; acoustics and frames kept."""
    old, new = lms
    lat = _lattice(seed)
    got, _ = rescore(lat, old, new)
    before, after = _by_path(lat), _by_path(got)
    assert before.keys() == after.keys()  # every word sequence (and alignment) is kept
    for key, paths in before.items():
        swap = new.sequence_cost(key[0]) - old.sequence_cost(key[0])
        want = sorted((g + swap, a) for g, a in paths)
        for (g0, a0), (g1, a1) in zip(want, after[key], strict=True):
            assert g1 == pytest.approx(g0, abs=1e-3) and a1 == pytest.approx(a0, abs=1e-3)
    # and the sweep on the result picks the brute-force best of the swapped costs
    for w in (2.0, 10.0):
        best = min(g + a / w for paths in after.values() for g, a in paths)
        path = best_paths(got, [(w, 0.0)])[0]
        assert path is not None and path.cost == pytest.approx(best, abs=1e-3)


@pytest.mark.parametrize("seed", range(6))
def test_a_deterministic_lattice_stays_deterministic(seed, lms):
    """One path per word sequence in, one out: no determinization needed after."""
    lat = _lattice(seed, deterministic=True)
    got, stats = rescore(lat, *lms)
    seqs = [words_of(got, arcs) for arcs, _ in all_paths(got)]
    assert len(seqs) == len(set(seqs)) == len({words_of(lat, a) for a, _ in all_paths(lat)})
    for s in range(got.num_states):
        w = got.word[got.src == s]
        assert len(set(w.tolist())) == w.size
    assert np.all(got.src < got.dst) and stats.states_out == got.num_states


def test_histories_are_expanded_only_where_paths_reach(lms):
    """Two paths A B and C B into one state split it by history; a state reached by one
    history stays one; the LM is queried once per (history, word)."""
    lat = WordLattice(
        src=np.array([0, 0, 1, 2, 3], dtype=np.int32), dst=np.array([1, 2, 3, 3, 4], dtype=np.int32),
        word=np.array([1, 3, 2, 2, 4], dtype=np.int32),
        graph=np.ones(5, dtype=np.float32), acoustic=np.full(5, 10.0, dtype=np.float32),
        ilabels=np.arange(1, 6, dtype=np.int32), ilabel_offsets=np.arange(6, dtype=np.int32),
        final_graph=np.array([np.inf] * 4 + [0.5], dtype=np.float32),
        final_acoustic=np.array([np.inf] * 4 + [1.0], dtype=np.float32),
        final_ilabels=np.array([7], dtype=np.int32), final_offsets=np.array([0, 0, 0, 0, 0, 1], dtype=np.int32))
    old, new = lms
    old.queries = new.queries = 0
    got, _ = rescore(lat, old, new)
    assert got.num_states == 7  # 0, A, C, (A B), (C B), (A B D), (C B D)
    assert old.queries == new.queries == 6
    assert sorted(words_of(got, a) for a, _ in all_paths(got)) == [(1, 2, 4), (3, 2, 4)]
    assert got.final_string(got.num_states - 1).tolist() == [7]


def test_words_the_lm_cannot_score_are_counted(lms):
    old, new = lms
    lat = _lattice(3)
    lat.word[0] = 2  # arc 0 → 1: on some path
    blind = NgramStore(new.lm, {**VOCAB, 2: "NOT-IN-LM"})
    got, stats = rescore(lat, old, blind)
    assert stats.dropped_arcs > 0
    want = {k for k in _by_path(lat) if 2 not in k[0]}
    assert set(_by_path(got)) == want


def test_without_a_first_pass_lm_the_new_one_is_added(lms):
    """``lattice-lmrescore-const-arpa`` alone: graph' = graph + new(words)."""
    _, new = lms
    lat = _lattice(4)
    got, _ = rescore(lat, None, new)
    before, after = _by_path(lat), _by_path(got)
    for key, paths in before.items():
        want = sorted((g + new.sequence_cost(key[0]), a) for g, a in paths)
        assert [g for g, _ in after[key]] == pytest.approx([g for g, _ in want], abs=1e-3)

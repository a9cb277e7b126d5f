"""Matchings: perfect, symmetric, alternating on the ring; the spectral gap."""

from __future__ import annotations

import numpy as np
import pytest

from asrtrain.distributed.topology import matching, mixing_matrix, ring_order, spectral_gap


@pytest.mark.parametrize("topology", ["ring", "random-ring"])
@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9])
def test_matchings_are_perfect_and_symmetric(n, topology):
    for r in range(20):
        p = matching(n, r, topology, seed=7)
        for k, q in enumerate(p):
            if q is not None:
                assert q != k and p[q] == k
        sitting = [k for k, q in enumerate(p) if q is None]
        assert len(sitting) == n % 2
        w = mixing_matrix(p)
        assert np.allclose(w.sum(0), 1) and np.allclose(w.sum(1), 1) and np.allclose(w, w.T)


def test_fixed_ring_alternates_left_and_right():
    assert matching(6, 0) == [1, 0, 3, 2, 5, 4]
    assert matching(6, 1) == [5, 2, 1, 4, 3, 0]
    assert matching(6, 2) == matching(6, 0)
    for r in range(10):  # each partner is a ring neighbour, on alternate sides
        p = matching(8, r)
        side = [(q - k) % 8 for k, q in enumerate(p)]
        assert all(s in (1, 7) for s in side)
        assert side[0] == (1 if r % 2 == 0 else 7)


def test_odd_ring_rotates_who_sits_out():
    sat = [matching(5, r).index(None) for r in range(10)]
    assert sat == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]
    edges = {frozenset((k, q)) for r in range(5) for k, q in enumerate(matching(5, r)) if q is not None}
    assert edges == {frozenset((k, (k + 1) % 5)) for k in range(5)}
    assert matching(1, 0) == [None]


def test_random_ring_is_seeded_and_redrawn():
    a = [ring_order(16, r, "random-ring", seed=1, reshuffle_every=4) for r in range(12)]
    assert a[0] == a[3] != a[4] == a[7] != a[8]
    assert a == [ring_order(16, r, "random-ring", seed=1, reshuffle_every=4) for r in range(12)]
    assert a[0] != ring_order(16, 0, "random-ring", seed=2)
    assert sorted(a[0]) == list(range(16))


def test_spectral_gap():
    # 4 nodes: the two alternating matchings average to a ring with 1/4, 1/2, 1/4 weights.
    assert spectral_gap(4, rounds=2) == pytest.approx(0.5)
    assert spectral_gap(1) == 1.0
    ring = spectral_gap(32, "ring")
    rand = spectral_gap(32, "random-ring", seed=0, reshuffle_every=1, rounds=256)
    assert 0 < ring < rand  # the randomized ring mixes faster (ICASSP 2020)

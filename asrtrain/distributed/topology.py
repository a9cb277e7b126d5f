"""Who gossips with whom: one perfect matching of the super-learners per round.

Every learner computes the matching of round ``r`` alone, from ``r`` and a shared
seed, so both sides of a pair are always in the same round and an exchange is one
symmetric send/receive: no coordinator, no deadlock.

Fixed ring (``ring``), ``n`` super-learners at ring positions ``0..n-1``:

* ``n`` even: even rounds pair (0,1)(2,3)…, odd rounds (1,2)(3,4)…(n-1,0), so each
  node alternates between its right and left neighbour.
* ``n`` odd: no perfect matching exists; in round ``r`` the node at position
  ``r mod n`` sits out and the others pair along the ring starting after it,
  ``(s+1,s+2)(s+3,s+4)…``. The node that sits out rotates, so every ring edge is
  used within ``n`` rounds and a node sits out one round in ``n``.
* ``n`` = 1: nobody gossips (SSGD).

Randomized ring (``random-ring``, ICASSP 2020): the ring order is a permutation
drawn from ``(seed, r // reshuffle_every)``, redrawn every ``reshuffle_every``
rounds, and the fixed-ring rule applies to positions in that order.
"""

from __future__ import annotations

import numpy as np

Matching = list[int | None]

#: A learner moves this far towards its partner in a round: ``x ← x + w (partner − snapshot)``.
#: One half is the pairwise average; the pair's two moves cancel, so the mean is kept exactly.
GOSSIP_WEIGHT = 0.5


def ring_order(n: int, rnd: int, topology: str = "ring", seed: int = 0, reshuffle_every: int = 4) -> list[int]:
    """The ring (super-learner ids in ring order) used in round ``rnd``."""
    if topology == "ring":
        return list(range(n))
    if topology == "random-ring":
        epoch_of_ring = rnd // reshuffle_every
        rng = np.random.default_rng([seed, epoch_of_ring, 0x5EED])
        return [int(i) for i in rng.permutation(n)]
    raise ValueError(f"unknown topology {topology!r}")


def _position_pairs(n: int, rnd: int) -> list[tuple[int, int]]:
    """Pairs of ring positions for round ``rnd`` (see the module docstring)."""
    if n < 2:
        return []
    if n % 2 == 0:
        start = rnd % 2
        return [((start + 2 * i) % n, (start + 2 * i + 1) % n) for i in range(n // 2)]
    sit = rnd % n
    return [((sit + 1 + 2 * i) % n, (sit + 2 + 2 * i) % n) for i in range(n // 2)]


def matching(n: int, rnd: int, topology: str = "ring", seed: int = 0, reshuffle_every: int = 4) -> Matching:
    """``partner[k]`` of each super-learner ``k`` in round ``rnd`` (``None``: sits out)."""
    order = ring_order(n, rnd, topology, seed, reshuffle_every)
    partner: Matching = [None] * n
    for a, b in _position_pairs(n, rnd):
        partner[order[a]], partner[order[b]] = order[b], order[a]
    return partner


def mixing_matrix(partner: Matching) -> np.ndarray:
    """The round's mixing matrix: 0.5/0.5 within a pair, 1 for a node that sits out.

    Symmetric and doubly stochastic, so the mean of the weights is kept exactly.
    """
    n = len(partner)
    w = np.zeros((n, n))
    for k, p in enumerate(partner):
        if p is None:
            w[k, k] = 1.0
        else:
            w[k, k] = w[k, p] = 0.5
    return w


def spectral_gap(n: int, topology: str = "ring", seed: int = 0, reshuffle_every: int = 4,
                 rounds: int = 64) -> float:
    """``1 - λ2(E[WᵀW])`` over ``rounds`` rounds: how fast gossip reaches consensus.

    A matching's ``W = (I + P)/2`` with ``P`` an involution is a projection
    (``WᵀW = W``), so this is the gap of the mean mixing matrix. The bigger the gap,
    the faster the spread of the learners' weights shrinks (Lian et al. 2018).
    """
    if n < 2:
        return 1.0
    mean = sum(mixing_matrix(matching(n, r, topology, seed, reshuffle_every)) for r in range(rounds)) / rounds
    eig = np.sort(np.abs(np.linalg.eigvalsh(mean)))[::-1]
    return float(1.0 - eig[1])


def partner_among(nodes: list[int], me: int, rnd: int, topology: str = "ring", seed: int = 0,
                  reshuffle_every: int = 4) -> int | None:
    """``me``'s partner in round ``rnd`` of the ring over ``nodes`` (the super-learners alive, in
    order): the same matching as :func:`matching`, on positions in that list; ``None``: sits out."""
    partner = matching(len(nodes), rnd, topology, seed, reshuffle_every)[nodes.index(me)]
    return None if partner is None else nodes[partner]

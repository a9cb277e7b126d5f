"""Word confidences from the lattice: the posterior of each best-path word.

The lattice holds every word sequence within the lattice beam of the best, so at the
picked LM weight and penalty it defines a distribution over them (arc costs ``graph +
p·word + acoustic / w``, as the sweep scores them). Forward-backward gives each arc's
posterior; a best-path word's confidence is the summed posterior of the lattice arcs
that carry the same word over an overlapping stretch of frames (capped at 1; an arc spans
at least the frame it starts at), the usual approximation of Kaldi's ``lattice-to-ctm-conf``.
"""

from __future__ import annotations

import numpy as np

from asrtrain.decode.ctm import BestPath
from asrtrain.decode.lattice import WordLattice


def best_arcs(lat: WordLattice, lmwt: float, wip: float) -> tuple[list[int], BestPath] | None:
    """The arcs of the best path at (``lmwt``, ``wip``) and the path, as the sweep finds it
    (``lattice_sweep.best_paths``: same DP, same ties); None without a complete path."""
    from asrtrain.decode.lattice_sweep import forward, grid_costs

    if lat.num_states == 0:
        return None
    arc_cost, final_cost = grid_costs(lat, np.asarray([lmwt]), np.asarray([wip]))
    best, back = forward(lat, arc_cost)
    total = best[:, 0] + final_cost[:, 0]
    end = int(np.argmin(total))
    if not np.isfinite(total[end]):
        return None
    arcs: list[int] = []
    s = end
    while s != 0:
        a = int(back[s, 0])
        arcs.append(a)
        s = int(lat.src[a])
    arcs.reverse()
    return arcs, lat.path(arcs, end, float(total[end]))


def arc_posteriors(lat: WordLattice, lmwt: float, wip: float) -> np.ndarray:
    """Posterior of every arc (float64 [A]) by forward-backward in the log semiring."""
    arc_cost, final_cost = lat.costs(lmwt, wip)
    n = lat.num_states
    alpha = np.full(n, -np.inf)
    beta = -final_cost.copy()
    alpha[0] = 0.0
    order = np.argsort(lat.src, kind="stable")
    src, dst, cost = lat.src.tolist(), lat.dst.tolist(), arc_cost.tolist()
    for a in order.tolist():  # sources before their arcs' destinations (topological numbering)
        alpha[dst[a]] = np.logaddexp(alpha[dst[a]], alpha[src[a]] - cost[a])
    for a in order[::-1].tolist():
        beta[src[a]] = np.logaddexp(beta[src[a]], beta[dst[a]] - cost[a])
    total = beta[0]
    if not np.isfinite(total):
        return np.zeros(lat.num_arcs)
    return np.exp(alpha[lat.src] - arc_cost + beta[lat.dst] - total)


def word_confidences(lat: WordLattice, arcs: list[int], lmwt: float, wip: float) -> list[float]:
    """Confidence of each word arc of the best path ``arcs`` (in path order)."""
    post = arc_posteriors(lat, lmwt, wip)
    start = lat.state_times()[lat.src]
    # an arc with the word label and no frames of its own (the word's frames on the arcs
    # after it) covers the frame it starts at: else it overlapped nothing, itself included,
    # and a word the lattice was sure of got confidence 0
    end = start + np.maximum(np.diff(lat.ilabel_offsets), 1)
    out = []
    for a in arcs:
        w = lat.word[a]
        if not w:
            continue
        same = (lat.word == w) & (start < end[a]) & (end > start[a])
        out.append(float(min(1.0, post[same].sum())))
    return out

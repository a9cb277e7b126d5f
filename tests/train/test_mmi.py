"""The MMI lattice forward-backward against brute force: every path of a small lattice enumerated."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from asrtrain.decode.lattice import WordLattice
from asrtrain.train.mmi import LatticeFrames, den_posteriors, mmi_targets

P = 4  # pdfs


def _lattice() -> WordLattice:
    """States 0→{1,2}→3→final, arcs of 1–3 frames with labels pdf+1, a final weight with a
    one-frame string on state 3 and a second final state reached by a parallel arc: 6 frames."""
    arcs = [  # (src, dst, word, graph, acoustic, ilabels)
        (0, 1, 1, 0.5, 0.0, [1, 1]),
        (0, 2, 2, 1.2, 0.0, [2, 3]),
        (1, 3, 3, 0.1, 0.0, [3, 4, 4]),
        (2, 3, 0, 0.7, 0.0, [1, 2, 2]),
        (2, 4, 1, 0.3, 0.0, [4, 4, 4, 4]),
    ]
    finals = {3: (0.2, 0.0, [2]), 4: (0.9, 0.0, [])}
    return WordLattice.from_arcs(5, 0, arcs, finals)


def _paths(lat: WordLattice) -> list[tuple[float, list[int]]]:
    """(graph cost, pdf per frame) of every complete path."""
    out: list[tuple[float, list[int]]] = []

    def walk(s: int, cost: float, labels: list[int]) -> None:
        if np.isfinite(lat.final_graph[s]):
            out.append((cost + float(lat.final_graph[s]), labels + list(lat.final_string(s))))
        for a in np.flatnonzero(lat.src == s):
            walk(int(lat.dst[a]), cost + float(lat.graph[a]), labels + list(lat.arc_string(int(a))))

    walk(0, 0.0, [])
    return [(c, [x - 1 for x in labels]) for c, labels in out]


def test_posteriors_and_total_are_the_sum_over_every_path() -> None:
    lat = _lattice()
    rng = np.random.default_rng(0)
    ll = rng.normal(size=(6, P)).astype(np.float32)
    post, total = den_posteriors(LatticeFrames.of(lat), ll, acwt=0.3)
    paths = _paths(lat)
    assert len(paths) == 3 and all(len(p) == 6 for _, p in paths)
    scores = np.array([0.3 * sum(float(ll[t, s]) for t, s in enumerate(p)) - g for g, p in paths])
    ref_total = float(np.log(np.exp(scores).sum()))
    want = np.zeros((6, P))
    for w, (_, p) in zip(np.exp(scores - ref_total), paths, strict=True):
        want[np.arange(6), p] += w
    assert total == pytest.approx(ref_total, abs=1e-9)
    np.testing.assert_allclose(post, want, atol=1e-6)
    np.testing.assert_allclose(post.sum(axis=1), 1.0, atol=1e-6)


def test_mmi_weights_are_the_gradient_of_the_objective() -> None:
    lat = _lattice()
    ali = np.array([0, 0, 2, 3, 3, 1])  # the first path: a lattice path, every frame kept
    ll = torch.randn(6, P, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    paths = _paths(lat)
    scores = torch.stack([0.2 * ll[torch.arange(6), torch.tensor(p)].sum() - g for g, p in paths])
    objective = 0.2 * ll[torch.arange(6), torch.from_numpy(ali)].sum() - torch.logsumexp(scores, 0)
    objective.backward()
    got = mmi_targets(LatticeFrames.of(lat), ll.detach().numpy(), ali, acwt=0.2)
    assert got.kept.all()
    assert got.objective == pytest.approx(float(objective.detach()), abs=1e-6)
    np.testing.assert_allclose(got.weights, ll.grad.numpy(), atol=1e-6)


def test_frames_whose_reference_the_lattice_never_visits_are_dropped() -> None:
    lat = _lattice()
    ali = np.array([0, 0, 2, 3, 3, 0])  # pdf 0 at the last frame: on no path there
    got = mmi_targets(LatticeFrames.of(lat), np.zeros((6, P), np.float32), ali, acwt=0.1)
    assert got.kept.tolist() == [True] * 5 + [False]
    assert not got.weights[5].any()
    full = mmi_targets(LatticeFrames.of(lat), np.zeros((6, P), np.float32), ali, acwt=0.1, drop_frames=False)
    assert full.weights[5].any()


def test_a_lattice_of_another_length_is_refused() -> None:
    with pytest.raises(ValueError, match="spans 6 frames, the scores 5"):
        den_posteriors(LatticeFrames.of(_lattice()), np.zeros((5, P), np.float32), 0.1)


@pytest.mark.parametrize("perm", list(itertools.islice(itertools.permutations(range(5)), 3)))
def test_arc_order_in_the_arrays_does_not_matter(perm: tuple[int, ...]) -> None:
    lat = _lattice()
    order = np.array(perm)
    shuffled = WordLattice(src=lat.src[order], dst=lat.dst[order], word=lat.word[order],
                           graph=lat.graph[order], acoustic=lat.acoustic[order],
                           ilabels=np.concatenate([lat.arc_string(int(a)) for a in order]).astype(np.int32),
                           ilabel_offsets=np.r_[0, np.cumsum([len(lat.arc_string(int(a))) for a in order])].astype(np.int32),
                           final_graph=lat.final_graph, final_acoustic=lat.final_acoustic,
                           final_ilabels=lat.final_ilabels, final_offsets=lat.final_offsets)
    ll = np.random.default_rng(2).normal(size=(6, P)).astype(np.float32)
    a, ta = den_posteriors(LatticeFrames.of(lat), ll, 0.5)
    b, tb = den_posteriors(LatticeFrames.of(shuffled), ll, 0.5)
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert ta == pytest.approx(tb)

"""The HMM-GMM acoustic model: Viterbi statistics, re-estimation, mixing up."""

from __future__ import annotations

import math

import numpy as np
import torch

from asrtrain.align.am import AcousticModel, by_pdf, split_targets


def _data(seed: int = 0):
    """Two pdfs; pdf 0 a two-component mixture, pdf 1 one Gaussian; 3 dims."""
    g = np.random.default_rng(seed)
    a = np.concatenate([g.normal(-3.0, 0.5, (3000, 3)), g.normal(3.0, 0.5, (3000, 3))])
    b = g.normal([1.0, 2.0, -1.0], [1.0, 0.3, 2.0], (4000, 3))
    x = np.concatenate([a, b]).astype(np.float32)
    pdf = np.concatenate([np.zeros(6000, int), np.ones(4000, int)])
    return x, pdf


def _em(model: AcousticModel, x, pdf, floor):
    stats = model.zero_stats()
    model.accumulate(stats, x, pdf)
    model.update(stats, floor)
    return stats


def test_one_gaussian_per_pdf_is_the_sample_mean_and_variance() -> None:
    x, pdf = _data()
    model = AcousticModel.flat(2, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    _em(model, x, pdf, torch.full((3,), 1e-6))
    for p in (0, 1):
        sel = x[pdf == p].astype(np.float64)
        assert torch.allclose(model.means[p, 0], torch.from_numpy(sel.mean(0)), atol=1e-9)
        assert torch.allclose(model.vars[p, 0], torch.from_numpy(sel.var(0)), atol=1e-9)


def test_em_with_mixing_up_never_lowers_the_likelihood_and_finds_the_two_modes() -> None:
    x, pdf = _data()
    model = AcousticModel.flat(2, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    _em(model, x, pdf, torch.full((3,), 1e-3))
    model.mix_up(4, torch.tensor([6000.0, 4000.0]))
    assert model.num_gauss() == 4
    lls = [_em(model, x, pdf, torch.full((3,), 1e-3)).loglike for _ in range(8)]
    assert all(b >= a - 1e-6 for a, b in zip(lls[1:], lls[2:], strict=False))   # EM: monotone at fixed size
    live0 = torch.isfinite(model.logw[0])
    means0 = sorted(float(m) for m in model.means[0][live0][:, 0])
    assert means0[0] < -2.5 and means0[-1] > 2.5


def test_loglikes_match_a_direct_computation() -> None:
    x, pdf = _data()
    model = AcousticModel.flat(2, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    _em(model, x, pdf, torch.full((3,), 1e-3))
    model.mix_up(5, torch.tensor([6000.0, 4000.0]))
    ll = model.loglikes(x[:50])
    for p in (0, 1):
        live = torch.isfinite(model.logw[p])
        mu, var, lw = model.means[p][live], model.vars[p][live], model.logw[p][live]
        xs = torch.from_numpy(x[:50]).double()[:, None, :]
        comp = lw - 0.5 * (torch.log(2 * math.pi * var).sum(1) + ((xs - mu) ** 2 / var).sum(2))
        assert np.allclose(ll[:, p], torch.logsumexp(comp, 1).numpy(), atol=1e-3)


def test_split_targets_follow_occupancy_to_a_power_and_respect_the_min_count() -> None:
    have = torch.tensor([1, 1, 1, 1])
    occ = torch.tensor([10000.0, 1000.0, 30.0, 0.0])
    want = split_targets(have, occ, 40, 0.2)
    assert int(want.sum()) == 40
    assert want[0] > want[1] > 0
    assert int(want[2]) == 1          # 30 frames: a second Gaussian would have 15 < 20
    assert int(want[3]) == 1          # no data: nothing split


def test_by_pdf_groups_every_frame_once() -> None:
    pdf = torch.tensor([3, 1, 3, 0, 1, 3])
    seen = {p: sorted(idx.tolist()) for p, idx in by_pdf(pdf)}
    assert seen == {0: [3], 1: [1, 4], 3: [0, 2, 5]}


def test_the_sat_models_mixture_holds_every_gaussian_weighted_by_its_pdfs_frames() -> None:
    from asrtrain.align.sat_feats import model_mixture

    x, pdf = _data()
    model = AcousticModel.flat(2, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    _em(model, x, pdf, torch.full((3,), 1e-3))
    model.mix_up(3, torch.tensor([6000.0, 4000.0]))
    mix = model_mixture(model, np.array([6000, 4000]))
    assert mix.num_components == model.num_gauss() == 3
    assert abs(float(mix.weights.sum()) - 1.0) < 1e-12
    pdf0 = torch.isfinite(model.logw[0]).sum()
    assert abs(float(mix.weights[:pdf0].sum()) - 6001 / 10002) < 1e-9

"""The diagonal GMM: EM that climbs, finds a known mixture, and saves what it trained."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asrtrain.adapt.gmm import DiagGMM, accumulate, maximize, subsample_frames, train_gmm
from asrtrain.adapt.stages import Stages
from asrtrain.core.errors import InputError


def two_blobs(n: int = 4000, seed: int = 0) -> tuple[torch.Tensor, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = np.array([[-3.0, 0.0, 1.0], [3.0, 2.0, -1.0]])
    labels = rng.random(n) < 0.3
    x = truth[labels.astype(int)] + rng.normal(0.0, [0.5, 1.0, 0.7], (n, 3))
    return torch.from_numpy(x), truth


def test_component_loglikes_match_scipy_style_formula() -> None:
    x, _ = two_blobs(50)
    gmm = DiagGMM(torch.tensor([0.25, 0.75], dtype=torch.float64),
                  torch.tensor([[0.0, 1.0, 2.0], [1.0, -1.0, 0.5]], dtype=torch.float64),
                  torch.tensor([[1.0, 2.0, 0.5], [0.3, 1.0, 4.0]], dtype=torch.float64))
    got = gmm.component_loglikes(x).numpy()
    xs = x.numpy()
    for c in range(2):
        m, v, w = gmm.means[c].numpy(), gmm.vars[c].numpy(), float(gmm.weights[c])
        want = np.log(w) - 0.5 * (np.log(2 * np.pi * v).sum() + (((xs - m) ** 2) / v).sum(1))
        np.testing.assert_allclose(got[:, c], want, rtol=1e-10)


def test_em_climbs_and_finds_the_mixture() -> None:
    x, truth = two_blobs()
    gmm = train_gmm(x, 2, iters=1)
    lls = []
    for _ in range(8):
        stats = accumulate(gmm, x)
        lls.append(stats.loglike)
        gmm, _ = maximize(stats, torch.full((3,), 1e-4, dtype=torch.float64), 2.0, gmm)
    assert all(b >= a - 1e-8 * abs(a) for a, b in zip(lls, lls[1:], strict=False))
    order = torch.argsort(gmm.means[:, 0])
    np.testing.assert_allclose(gmm.means[order].numpy(), truth, atol=0.1)
    np.testing.assert_allclose(gmm.weights[order].numpy(), [0.7, 0.3], atol=0.03)
    np.testing.assert_allclose(gmm.vars[order][0].numpy(), [0.25, 1.0, 0.49], rtol=0.15)


def test_train_grows_to_the_requested_size_without_dead_components() -> None:
    x, _ = two_blobs(3000)
    gmm = train_gmm(x, 8, iters=4)
    assert gmm.num_components == 8
    assert float(gmm.weights.sum()) == pytest.approx(1.0)
    assert bool((gmm.weights > 1e-3).all()) and bool(torch.isfinite(gmm.vars).all())


def test_too_few_frames_is_an_input_error() -> None:
    with pytest.raises(InputError, match="10 frames cannot train 8 Gaussians"):
        train_gmm(torch.zeros(10, 3, dtype=torch.float64), 8)


def test_save_load_round_trip(tmp_path) -> None:
    x, _ = two_blobs(500)
    gmm = train_gmm(x, 2, iters=2)
    gmm.meta = {"made_by": "test"}
    gmm.save(tmp_path / "g.npz")
    back = DiagGMM.load(tmp_path / "g.npz")
    assert torch.equal(back.means, gmm.means) and back.meta == {"made_by": "test"}
    (tmp_path / "bad.npz").write_bytes(b"not a gmm")
    with pytest.raises(InputError, match="bad.npz: not a GMM"):
        DiagGMM.load(tmp_path / "bad.npz")


def test_subsample_keeps_every_kth_global_frame_within_the_bound() -> None:
    mats = [np.arange(n * 2, dtype=np.float32).reshape(n, 2) + 1000 * i
            for i, n in enumerate([37, 501, 3, 260, 999])]
    frames, seen = subsample_frames(iter(mats), max_frames=100)
    whole = np.concatenate(mats)
    assert seen == len(whole) and len(frames) <= 200
    stride = round(seen / len(frames))
    np.testing.assert_array_equal(frames.numpy(), whole[::stride])


def test_stages_skip_complete_and_redo_after_a_change(tmp_path) -> None:
    out = tmp_path / "o"
    (out).mkdir()
    first = Stages(out)
    assert not first.done("a", {"k": 1}, [out / "a.txt"])
    (out / "a.txt").write_text("x")
    first.finish("a", {"k": 1})
    assert not first.done("b", {}, [out / "b.txt"])
    (out / "b.txt").write_text("y")
    first.finish("b", {})
    again = Stages(out)
    assert again.done("a", {"k": 1}, [out / "a.txt"]) and again.done("b", {}, [out / "b.txt"])
    changed = Stages(out)
    assert not changed.done("a", {"k": 2}, [out / "a.txt"])
    changed.finish("a", {"k": 2})
    assert not changed.done("b", {}, [out / "b.txt"])  # its upstream was redone
    (out / "a.txt").unlink()
    assert not Stages(out).done("a", {"k": 2}, [out / "a.txt"])  # output gone

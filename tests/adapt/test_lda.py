"""Splicing and LDA: the context Kaldi gives, the discriminant directions, whitened classes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asrtrain.adapt.lda import LdaStats, apply_lda, estimate_lda, load_lda, save_lda, splice
from asrtrain.core.errors import InputError


def test_splice_repeats_edge_frames() -> None:
    x = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    y = splice(x, 1)
    assert y.shape == (4, 6)
    assert y[0].tolist() == [0, 1, 0, 1, 2, 3]  # frame -1 is frame 0
    assert y[3].tolist() == [4, 5, 6, 7, 6, 7]  # frame 4 is frame 3
    assert torch.equal(splice(x, 0), x)


def classes_in_two_dims(n: int = 6000, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """5 classes apart only in dims 0 and 1; the other 6 dims are larger, shared noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, n)
    angles = 2 * np.pi * np.arange(5) / 5
    centres = 2.0 * np.stack([np.cos(angles), np.sin(angles)], 1)  # a pentagon
    x = rng.normal(0.0, 1.0, (n, 8)) * np.array([0.5, 0.5, 3, 3, 3, 3, 3, 3])
    x[:, :2] += centres[labels]
    mix = np.linalg.qr(rng.normal(size=(8, 8)))[0]  # hide the subspace by a rotation
    return torch.from_numpy(x @ mix.T), torch.from_numpy(labels)


def test_lda_finds_the_discriminant_subspace_and_whitens_classes() -> None:
    x, labels = classes_in_two_dims()
    stats = LdaStats.empty(5, 8)
    stats.add(x[:3000], labels[:3000])
    stats.add(x[3000:], labels[3000:])
    matrix, values = estimate_lda(stats, 3)
    assert matrix.shape == (3, 8)
    assert values[0] > 1.0 and values[1] > 1.0 and values[2] < 0.05  # two real directions
    y = apply_lda(x, torch.from_numpy(matrix)).numpy()
    lab = labels.numpy()
    within = sum(np.cov((y[lab == k] - y[lab == k].mean(0)).T) * (lab == k).sum()
                 for k in range(5)) / len(lab)
    np.testing.assert_allclose(within, np.eye(3), atol=0.05)
    # nearest class mean in 2 LDA dims classifies about as well as the truth allows
    means = np.stack([y[lab == k, :2].mean(0) for k in range(5)])
    pred = np.argmin(((y[:, None, :2] - means[None]) ** 2).sum(-1), axis=1)
    assert (pred == lab).mean() > 0.85


def test_save_load_and_dimension_mismatch(tmp_path) -> None:
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
    save_lda(tmp_path / "lda.mat", matrix)
    np.testing.assert_array_equal(load_lda(tmp_path / "lda.mat", 4, 3), matrix)
    with pytest.raises(InputError, match="takes 4-dim spliced input, but the features spliced give 9"):
        load_lda(tmp_path / "lda.mat", in_dim=9)
    with pytest.raises(InputError, match="gives 3 dims, but --lda-dim is 40"):
        load_lda(tmp_path / "lda.mat", out_dim=40)


def test_kaldi_offset_column_is_applied() -> None:
    matrix = torch.tensor([[1.0, 0.0, 5.0], [0.0, 2.0, -1.0]], dtype=torch.float64)
    y = apply_lda(torch.tensor([[1.0, 1.0]], dtype=torch.float64), matrix)
    assert y.tolist() == [[6.0, 1.0]]


def test_too_large_an_output_dim_is_refused() -> None:
    x, labels = classes_in_two_dims(200)
    stats = LdaStats.empty(5, 8)
    stats.add(x, labels)
    with pytest.raises(InputError, match="--lda-dim 9 exceeds the spliced feature dimension 8"):
        estimate_lda(stats, 9)


def test_classes_grow_as_labels_appear() -> None:
    x, labels = classes_in_two_dims(600)
    grown = LdaStats.empty(1, 8)
    for i in range(0, 600, 100):
        grown.add(x[i:i + 100], labels[i:i + 100])
    sized = LdaStats.empty(5, 8)
    sized.add(x, labels)
    assert torch.allclose(grown.counts, sized.counts) and torch.allclose(grown.sums, sized.sums)
    np.testing.assert_allclose(estimate_lda(grown, 2)[0], estimate_lda(sized, 2)[0])

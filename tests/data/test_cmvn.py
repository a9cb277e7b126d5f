"""Kaldi CMVN statistics: the 2x(D+1) format and apply-cmvn's arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from asrtrain.data.cmvn import accumulate, apply_cmvn, check_stats, combine


def test_stats_layout_is_kaldis() -> None:
    x = np.array([[1.0, 2.0], [3.0, 6.0]], dtype=np.float32)
    stats = accumulate(x)
    np.testing.assert_array_equal(stats, [[4.0, 8.0, 2.0], [10.0, 40.0, 0.0]])
    assert stats.dtype == np.float64


def test_combine_equals_stats_of_concatenation() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(30, 5)), rng.normal(size=(11, 5))
    np.testing.assert_allclose(combine([accumulate(a), accumulate(b)]),
                               accumulate(np.concatenate([a, b])), rtol=1e-12)


def test_apply_means_and_vars() -> None:
    rng = np.random.default_rng(1)
    x = (rng.normal(size=(500, 4)) * [1, 2, 3, 4] + [10, -5, 0, 3]).astype(np.float32)
    stats = accumulate(x)
    means_only = apply_cmvn(x, stats)
    np.testing.assert_allclose(means_only.mean(axis=0), 0, atol=1e-4)
    np.testing.assert_allclose(means_only.std(axis=0), x.std(axis=0), rtol=1e-4)
    both = apply_cmvn(x, stats, norm_vars=True)
    np.testing.assert_allclose(both.std(axis=0), 1, rtol=1e-4)


def test_bad_stats_are_rejected() -> None:
    with pytest.raises(ValueError, match="2x\\(D\\+1\\)"):
        check_stats(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="dimension 3, features have 5"):
        check_stats(accumulate(np.ones((2, 3))), dim=5)
    with pytest.raises(ValueError, match="frame count"):
        check_stats(np.zeros((2, 4)))

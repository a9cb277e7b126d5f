"""Cepstral mean and variance normalisation in Kaldi's format.

Kaldi keeps CMVN statistics as a 2×(D+1) double matrix per speaker (``cmvn.scp``
keyed by speaker): row 0 holds the per-dimension sums and the frame count in the
last column, row 1 the sums of squares (last column 0). ``apply-cmvn``
subtracts the mean (and, with ``--norm-vars``, divides by the standard
deviation). Keeping the format lets Kaldi tools and ours share the files.
"""

from __future__ import annotations

import numpy as np

#: Kaldi's variance floor in apply-cmvn.
VAR_FLOOR = 1.0e-20


def accumulate(feats: np.ndarray) -> np.ndarray:
    """The 2×(D+1) float64 statistics of one matrix [T, D]."""
    feats = np.asarray(feats)
    if feats.ndim != 2:
        raise ValueError(f"expected a [frames, dim] matrix, got shape {feats.shape}")
    x = feats.astype(np.float64, copy=False)
    stats = np.zeros((2, x.shape[1] + 1), dtype=np.float64)
    stats[0, :-1] = x.sum(axis=0)
    stats[1, :-1] = np.einsum("td,td->d", x, x)
    stats[0, -1] = x.shape[0]
    return stats


def combine(stats: list[np.ndarray]) -> np.ndarray:
    """Sum statistics (e.g. the utterances of one speaker)."""
    if not stats:
        raise ValueError("no statistics to combine")
    return np.sum(np.stack([np.asarray(s, dtype=np.float64) for s in stats]), axis=0)


def check_stats(stats: np.ndarray, dim: int | None = None) -> np.ndarray:
    """Validate a CMVN matrix; return it as float64. Raises ValueError with the reason."""
    stats = np.asarray(stats, dtype=np.float64)
    if stats.ndim != 2 or stats.shape[0] != 2 or stats.shape[1] < 2:
        raise ValueError(f"CMVN stats must be a 2x(D+1) matrix, got shape {stats.shape}")
    if dim is not None and stats.shape[1] != dim + 1:
        raise ValueError(f"CMVN stats are for dimension {stats.shape[1] - 1}, features have {dim}")
    if stats[0, -1] < 1.0:
        raise ValueError(f"CMVN stats have a frame count of {stats[0, -1]:g}")
    return stats


def mean_and_scale(stats: np.ndarray, norm_vars: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The offset and scale apply-cmvn uses: ``(x - mean) * scale``."""
    stats = check_stats(stats)
    count = stats[0, -1]
    mean = stats[0, :-1] / count
    if not norm_vars:
        return mean, np.ones_like(mean)
    var = np.maximum(stats[1, :-1] / count - mean * mean, VAR_FLOOR)
    return mean, 1.0 / np.sqrt(var)


def apply_cmvn(feats: np.ndarray, stats: np.ndarray, norm_vars: bool = False) -> np.ndarray:
    """Normalise ``feats`` [T, D] with speaker statistics, as Kaldi's apply-cmvn does."""
    feats = np.asarray(feats)
    stats = check_stats(stats, feats.shape[1])
    mean, scale = mean_and_scale(stats, norm_vars)
    out = (feats.astype(np.float64) - mean) * scale
    return out.astype(np.float32)

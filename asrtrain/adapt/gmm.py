"""Diagonal-covariance Gaussian mixture models, trained by EM in torch (float64).

Both speaker-adaptation front ends rest on one: the universal background model
(UBM) of the i-vector extractor and the global GMM that fMLLR adapts each speaker
to. The likelihood of N frames under C components is three matrix products, so a
whole EM iteration is a handful of BLAS calls over chunks of frames; statistics
are accumulated in float64 because sums over millions of frames lose float32's
precision.

Training grows the mixture by splitting (as Kaldi's ``gmm-global-*`` tools do):
one Gaussian with the global mean and variance, then each split doubles the
components (means moved ±0.2σ), with a few EM iterations after each split, and
the remaining iterations at the full size. Components that lose their frames are
re-seeded from the heaviest one, and variances are floored relative to the
global variance, so a tiny or degenerate corpus cannot produce a NaN model.

Bounded frame subsampling for training also lives here; reading a data dir's
features is in :mod:`asrtrain.adapt.featio`, resumable stages in
:mod:`asrtrain.adapt.stages`.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from asrtrain.core.atomic import atomic_open
from asrtrain.core.errors import InputError

log = logging.getLogger("asrtrain.adapt.gmm")

LOG_2PI = math.log(2.0 * math.pi)
#: Frames per chunk when accumulating statistics (bounds memory at C x CHUNK floats).
CHUNK = 16384
#: ... and at most this many bytes a [frames, C] float64 matrix: a model of thousands of
#: Gaussians (the aligner's SAT model as one mixture) made 16384 rows 0.8 GB a matrix.
CHUNK_BYTES = 64 << 20


def chunk_rows(components: int, cap: int = CHUNK) -> int:
    """Frames a chunk under a mixture of ``components`` (``cap`` up to 512 components)."""
    return max(1, min(cap, CHUNK_BYTES // (8 * max(components, 1))))


@dataclass
class DiagGMM:
    """Weights [C], means [C, D] and variances [C, D], all float64."""

    weights: torch.Tensor
    means: torch.Tensor
    vars: torch.Tensor
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_components(self) -> int:
        return int(self.weights.shape[0])

    @property
    def dim(self) -> int:
        return int(self.means.shape[1])

    def terms(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(gconst [C], means/vars [C, D], 1/vars [C, D]) so log N(x) is two products."""
        inv = 1.0 / self.vars
        gconst = (torch.log(self.weights)
                  - 0.5 * (self.dim * LOG_2PI + torch.log(self.vars).sum(1)
                           + (self.means * self.means * inv).sum(1)))
        return gconst, self.means * inv, inv

    def component_loglikes(self, x: torch.Tensor) -> torch.Tensor:
        """log(w_c N(x_t; mu_c, var_c)) for frames [N, D]: a matrix [N, C]."""
        gconst, mean_inv, inv = self.terms()
        x = x.to(torch.float64)
        return gconst + x @ mean_inv.T - 0.5 * (x * x) @ inv.T

    def posteriors(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Component posteriors [N, C] and per-frame log-likelihoods [N]."""
        ll = self.component_loglikes(x)
        total = torch.logsumexp(ll, dim=1)
        return torch.exp(ll - total[:, None]), total

    def loglike(self, x: torch.Tensor) -> torch.Tensor:
        """Per-frame log-likelihood [N] (chunked, so any number of frames fits)."""
        step = chunk_rows(self.num_components)
        parts = [torch.logsumexp(self.component_loglikes(x[i:i + step]), dim=1)
                 for i in range(0, x.shape[0], step)]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``.npz`` atomically (weights, means, vars and a JSON ``meta``)."""
        with atomic_open(path, "wb") as fh:
            np.savez(fh, weights=self.weights.numpy(), means=self.means.numpy(),
                     vars=self.vars.numpy(), meta=np.array(json.dumps(self.meta)))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DiagGMM:
        """Read what :meth:`save` wrote; a missing or foreign file is an InputError."""
        try:
            with np.load(path) as data:
                gmm = cls(torch.from_numpy(data["weights"].astype(np.float64)),
                          torch.from_numpy(data["means"].astype(np.float64)),
                          torch.from_numpy(data["vars"].astype(np.float64)),
                          json.loads(str(data["meta"])))
        except FileNotFoundError:
            raise InputError("GMM file not found", path) from None
        except (KeyError, ValueError, OSError) as exc:
            raise InputError(f"not a GMM written by asrtrain ({exc})", path) from None
        return gmm


@dataclass
class GmmStats:
    """Zeroth, first and second order statistics and the total log-likelihood."""

    occ: torch.Tensor
    sum_x: torch.Tensor
    sum_xx: torch.Tensor
    loglike: float = 0.0
    frames: int = 0


def accumulate(gmm: DiagGMM, x: torch.Tensor) -> GmmStats:
    """EM statistics of frames [N, D] under ``gmm``, accumulated chunk by chunk."""
    c, d = gmm.num_components, gmm.dim
    stats = GmmStats(torch.zeros(c, dtype=torch.float64), torch.zeros(c, d, dtype=torch.float64),
                     torch.zeros(c, d, dtype=torch.float64))
    step = chunk_rows(c)
    for i in range(0, x.shape[0], step):
        chunk = x[i:i + step].to(torch.float64)
        post, ll = gmm.posteriors(chunk)
        stats.occ += post.sum(0)
        stats.sum_x += post.T @ chunk
        stats.sum_xx += post.T @ (chunk * chunk)
        stats.loglike += float(ll.sum())
        stats.frames += chunk.shape[0]
    return stats


def maximize(stats: GmmStats, var_floor: torch.Tensor, min_occ: float,
             previous: DiagGMM) -> tuple[DiagGMM, int]:
    """The M-step; components with occupancy below ``min_occ`` are re-seeded.

    Returns the new GMM and how many components were re-seeded.
    """
    occ = stats.occ
    keep = occ >= min_occ
    safe = torch.where(keep, occ, torch.ones_like(occ))[:, None]
    means = torch.where(keep[:, None], stats.sum_x / safe, previous.means)
    var = torch.where(keep[:, None], stats.sum_xx / safe - means * means, previous.vars)
    var = torch.maximum(var, var_floor)
    weights = torch.where(keep, occ, torch.zeros_like(occ))
    dead = (~keep).nonzero().flatten().tolist()
    for index in dead:  # take half of the heaviest component, moved apart
        heavy = int(torch.argmax(weights))
        weights[heavy] *= 0.5
        weights[index] = weights[heavy]
        offset = 0.2 * torch.sqrt(var[heavy])
        means[index] = means[heavy] + offset
        means[heavy] = means[heavy] - offset
        var[index] = var[heavy]
    weights = weights / weights.sum()
    return DiagGMM(weights, means, var, dict(previous.meta)), len(dead)


def split(gmm: DiagGMM, target: int) -> DiagGMM:
    """Split the heaviest components (means ±0.2σ, half the weight each) up to ``target``."""
    count = min(target - gmm.num_components, gmm.num_components)
    order = torch.argsort(gmm.weights, descending=True)[:count]
    offset = 0.2 * torch.sqrt(gmm.vars[order])
    weights = gmm.weights.clone()
    weights[order] *= 0.5
    means = gmm.means.clone()
    means[order] -= offset
    return DiagGMM(torch.cat([weights, weights[order]]),
                   torch.cat([means, gmm.means[order] + offset]),
                   torch.cat([gmm.vars, gmm.vars[order]]), dict(gmm.meta))


def train_gmm(frames: torch.Tensor, num_components: int, iters: int = 10,
              iters_per_split: int = 2, var_floor_ratio: float = 0.01,
              progress: Any = None) -> DiagGMM:
    """Train a diagonal GMM on frames [N, D] by splitting and EM.

    ``iters`` EM iterations run at the final size (after ``iters_per_split`` per
    split). ``progress`` (a :class:`asrtrain.core.progress.Progress`) is advanced
    once per EM iteration when given.
    """
    x = frames.to(torch.float64)
    n, d = x.shape
    if n < 2 * num_components:
        raise InputError(f"{n} frames cannot train {num_components} Gaussians "
                         f"(need at least {2 * num_components}; ask for fewer components)")
    floor, min_occ = _floors(x, var_floor_ratio)
    mean = x.mean(0)
    gmm = DiagGMM(torch.ones(1, dtype=torch.float64), mean[None].clone(),
                  ((x - mean) ** 2).mean(0).clamp_min(1e-10)[None])
    done = 0
    while gmm.num_components < num_components:
        gmm, _ = _em(gmm, x, iters_per_split, floor, min_occ, progress)
        done += iters_per_split
        gmm = split(gmm, num_components)
    gmm, loglike = _em(gmm, x, iters, floor, min_occ, progress)
    gmm.meta = {"frames": n, "loglike_per_frame": loglike, "em_iterations": done + iters}
    log.info("trained a %d-component diagonal GMM on %d frames of dim %d: "
             "log-likelihood per frame %.4f", gmm.num_components, n, d, loglike)
    return gmm


def refine_gmm(gmm: DiagGMM, frames: torch.Tensor, iters: int, var_floor_ratio: float = 0.01,
               progress: Any = None) -> DiagGMM:
    """More EM iterations at the same size, e.g. on speaker-adapted frames (SAT)."""
    x = frames.to(torch.float64)
    floor, min_occ = _floors(x, var_floor_ratio)
    gmm, loglike = _em(gmm, x, iters, floor, min_occ, progress)
    gmm.meta = {"frames": int(x.shape[0]), "loglike_per_frame": loglike, "em_iterations": iters}
    return gmm


def _floors(x: torch.Tensor, var_floor_ratio: float) -> tuple[torch.Tensor, float]:
    """Variance floor (relative to the global variance) and minimum occupancy."""
    var = ((x - x.mean(0)) ** 2).mean(0).clamp_min(1e-10)
    return var_floor_ratio * var, max(2.0, 0.1 * x.shape[1])


def _em(gmm: DiagGMM, x: torch.Tensor, iters: int, floor: torch.Tensor, min_occ: float,
        progress: Any) -> tuple[DiagGMM, float]:
    """``iters`` EM iterations; returns the GMM and the last E-step's log-likelihood per frame."""
    loglike = float("nan")
    for _ in range(iters):
        stats = accumulate(gmm, x)
        gmm, reseeded = maximize(stats, floor, min_occ, gmm)
        loglike = stats.loglike / x.shape[0]
        log.debug("GMM of %d components: log-likelihood per frame %.4f%s", gmm.num_components,
                  loglike, f", {reseeded} re-seeded" if reseeded else "")
        if progress is not None:
            progress.advance(1, components=gmm.num_components, loglike=loglike)
    return gmm, loglike


def em_iterations(num_components: int, iters: int, iters_per_split: int = 2) -> int:
    """How many EM iterations :func:`train_gmm` runs (for a progress total)."""
    splits = max(0, math.ceil(math.log2(max(num_components, 1))))
    return splits * iters_per_split + iters


def subsample_frames(mats: Iterable[np.ndarray], max_frames: int) -> tuple[torch.Tensor, int]:
    """Every k-th frame of a stream of matrices, k doubling whenever more than
    ``2 * max_frames`` are held: memory stays bounded without knowing the total.

    Returns (frames [N, D] float32 with N <= 2 * max_frames, total frames seen).
    """
    kept: list[np.ndarray] = []
    held = seen = 0
    stride = 1
    dim = None
    for mat in mats:
        mat = np.asarray(mat, dtype=np.float32)
        if dim is None:
            dim = mat.shape[1]
        start = (-seen) % stride  # global frame index seen+start is a multiple of stride
        part = mat[start::stride]
        seen += mat.shape[0]
        kept.append(part)
        held += part.shape[0]
        if held > 2 * max_frames:
            # held frames are the global multiples of stride, from frame 0: keep every other
            kept, stride = [np.concatenate(kept)[::2]], stride * 2
            held = kept[0].shape[0]
    if dim is None:
        return torch.zeros(0, 0), 0
    return torch.from_numpy(np.concatenate(kept)), seen


def subsample_stride(counts: Iterable[int], max_frames: int) -> int:
    """The stride :func:`subsample_frames` ends with on matrices of these frame counts:
    it keeps the frames whose index in the whole stream is a multiple of it, so jobs that
    know their matrices' offsets in the stream can each take their own share of them."""
    held = seen = 0
    stride = 1
    for n in counts:
        held += len(range((-seen) % stride, n, stride))
        seen += n
        if held > 2 * max_frames:
            held, stride = (held + 1) // 2, stride * 2
    return stride


def every_kth(mat: np.ndarray, offset: int, stride: int) -> np.ndarray:
    """The rows of a matrix at ``offset`` in a stream whose index is a multiple of ``stride``."""
    return np.asarray(mat, dtype=np.float32)[(-offset) % stride::stride]

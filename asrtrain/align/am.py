"""The HMM-GMM acoustic model: one diagonal Gaussian mixture per pdf, trained by Viterbi EM.

The mixtures are stored padded, ``[pdfs, K, dim]`` with unused slots at log-weight −∞,
so the likelihoods of any set of pdfs are one gather and two matrix products, and
statistics under a frame alignment are one gather per chunk of frames (no call per
frame, no loop over pdfs). Updates follow Kaldi's ``gmm-est``: Gaussians with too
little data keep their parameters, variances are floored, and mixing up gives each
pdf Gaussians in proportion to its occupancy to the power 0.2 and splits the heaviest
component (Kaldi perturbs the two means randomly by 0.01σ·N(0,1); here they move ±0.2σ,
deterministically, so a rerun gives the same model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

LOG_2PI = math.log(2.0 * math.pi)
#: Kaldi's gmm-est defaults.
MIN_GAUSS_OCC = 10.0
MIX_POWER = 0.2
MIN_MIX_COUNT = 20.0
#: How far the two halves of a split component move apart (in standard deviations, each way).
SPLIT_SIGMA = 0.2


@dataclass
class GmmStats:
    """Occupancy [P, K], first [P, K, D] and second [P, K, D] order sums, log-likelihood."""

    occ: torch.Tensor
    sx: torch.Tensor
    sxx: torch.Tensor
    loglike: float = 0.0
    frames: int = 0


class AcousticModel:
    """Diagonal GMMs per pdf, padded to K components (float32 likelihoods, float64 stats)."""

    def __init__(self, means: torch.Tensor, vars_: torch.Tensor, logw: torch.Tensor) -> None:
        self.means = means.to(torch.float64)
        self.vars = vars_.to(torch.float64)
        self.logw = logw.to(torch.float64)
        self._terms: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self._g64: torch.Tensor | None = None

    def invalidate(self) -> None:
        """Forget cached terms (after the parameters change)."""
        self._terms = None
        self._g64 = None

    # --- shape ---
    @property
    def num_pdfs(self) -> int:
        return int(self.means.shape[0])

    @property
    def dim(self) -> int:
        return int(self.means.shape[2])

    def num_gauss(self) -> int:
        return int(torch.isfinite(self.logw).sum())

    @classmethod
    def flat(cls, num_pdfs: int, mean: torch.Tensor, var: torch.Tensor) -> AcousticModel:
        """Every pdf one Gaussian with the global mean and variance (Kaldi's gmm-init-mono)."""
        d = mean.shape[0]
        return cls(mean.reshape(1, 1, d).repeat(num_pdfs, 1, 1),
                   var.reshape(1, 1, d).repeat(num_pdfs, 1, 1),
                   torch.zeros(num_pdfs, 1, dtype=torch.float64))

    # --- likelihoods ---
    def terms(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(gconst [P, K], means/vars [P, K, D], 1/vars [P, K, D]) in float32."""
        if self._terms is None:
            inv = 1.0 / self.vars
            self._terms = (self._gconst64().float(), (self.means * inv).float(), inv.float())
        return self._terms

    def _gconst64(self) -> torch.Tensor:
        if self._g64 is not None:
            return self._g64
        gconst = self.logw - 0.5 * (self.dim * LOG_2PI + torch.log(self.vars).sum(2)
                                    + (self.means ** 2 / self.vars).sum(2))
        self._g64 = torch.where(torch.isfinite(self.logw), gconst,
                                torch.full_like(gconst, -math.inf))
        return self._g64

    def loglikes(self, x: np.ndarray | torch.Tensor, pdfs: np.ndarray | None = None
                 ) -> np.ndarray:
        """log p(x_t | pdf) for frames [T, D] and ``pdfs`` (default all): [T, len(pdfs)].

        Only live components are computed (pdfs differ widely in size; padding to the
        largest would multiply the work): one matrix product over them, then a
        log-sum-exp per pdf by scatter (max, then the sum of exponentials)."""
        gconst, mean_inv, inv = self.terms()
        idx = torch.arange(self.num_pdfs) if pdfs is None else torch.as_tensor(pdfs)
        live = torch.isfinite(gconst[idx])                              # [n, K]
        owner, slot = torch.nonzero(live, as_tuple=True)                # column → pdf, slot
        p = idx[owner]
        xt = torch.as_tensor(x, dtype=torch.float32)
        comp = gconst[p, slot] + xt @ mean_inv[p, slot].T - 0.5 * (xt * xt) @ inv[p, slot].T
        cols = owner.expand(xt.shape[0], -1)
        top = torch.full((xt.shape[0], len(idx)), -math.inf).scatter_reduce(
            1, cols, comp, reduce="amax")
        total = torch.zeros_like(top).scatter_add_(1, cols, torch.exp(comp - top.gather(1, cols)))
        return (top + torch.log(total)).numpy()

    def component_loglikes(self, p: int, x: torch.Tensor) -> torch.Tensor:
        """log w_k N(x_t; μ_k, σ²_k) of frames [n, D] under pdf ``p``'s live components
        (float64): [n, K_p]."""
        k = int(torch.isfinite(self.logw[p]).sum())
        mu, inv = self.means[p, :k], 1.0 / self.vars[p, :k]
        return self._gconst64()[p, :k] + x @ (mu * inv).T - 0.5 * (x * x) @ inv.T

    # --- statistics ---
    def zero_stats(self) -> GmmStats:
        p, k, d = self.means.shape
        return GmmStats(torch.zeros(p, k, dtype=torch.float64),
                        torch.zeros(p, k, d, dtype=torch.float64),
                        torch.zeros(p, k, d, dtype=torch.float64))

    def accumulate(self, stats: GmmStats, x: np.ndarray | torch.Tensor, pdf: np.ndarray,
                   rows: torch.Tensor | None = None) -> None:
        """Add frames [N, D] aligned to ``pdf[N]`` (Viterbi: the pdf is known, the
        component is a posterior). With ``rows``, frame i is ``x[rows[i]]``: each pdf's
        frames are gathered and widened to float64 alone, never the whole of ``x``."""
        xt = torch.as_tensor(x)
        for p, idx in by_pdf(torch.as_tensor(pdf, dtype=torch.long), PDF_BLOCK):
            xs = xt[idx if rows is None else rows[idx]].to(torch.float64)
            comp = self.component_loglikes(p, xs)
            ll = torch.logsumexp(comp, dim=1)
            post = torch.exp(comp - ll[:, None])
            k = post.shape[1]
            stats.occ[p, :k] += post.sum(0)
            stats.sx[p, :k] += post.T @ xs
            stats.sxx[p, :k] += post.T @ (xs * xs)
            stats.loglike += float(ll.sum())
            stats.frames += int(xs.shape[0])

    # --- update ---
    def update(self, stats: GmmStats, var_floor: torch.Tensor,
               min_occ: float = MIN_GAUSS_OCC) -> dict[str, int]:
        """Maximum likelihood re-estimation; returns counts of what was left alone."""
        live = torch.isfinite(self.logw)
        occ = stats.occ
        enough = live & (occ >= min_occ)
        safe = occ.clamp_min(1e-10)[:, :, None]
        mean = stats.sx / safe
        var = torch.maximum(stats.sxx / safe - mean ** 2, var_floor.to(torch.float64))
        self.means = torch.where(enough[:, :, None], mean, self.means)
        self.vars = torch.where(enough[:, :, None], var, self.vars)
        pdf_occ = (occ * live).sum(1, keepdim=True)
        has = pdf_occ[:, 0] > 0
        w = torch.where(live, occ.clamp_min(1e-5) / pdf_occ.clamp_min(1e-10), torch.zeros_like(occ))
        w = w / w.sum(1, keepdim=True).clamp_min(1e-20)
        logw = torch.where(live, torch.log(w.clamp_min(1e-20)), torch.full_like(w, -math.inf))
        self.logw = torch.where(has[:, None], logw, self.logw)
        self.invalidate()
        return {"gaussians_not_updated": int((live & ~enough).sum()),
                "pdfs_without_data": int((~has).sum())}

    def mix_up(self, target: int, pdf_occ: torch.Tensor, power: float = MIX_POWER) -> int:
        """Split components until ``target`` Gaussians, shared out as Kaldi's
        ``GetSplitTargets`` does: one at a time to the pdf whose occupancy**power per
        Gaussian is largest (a pdf never loses any; pdfs without data get none)."""
        want = split_targets(torch.isfinite(self.logw).sum(1), pdf_occ, target, power)
        have = torch.isfinite(self.logw).sum(1)
        kmax = int(want.max())
        if kmax > self.means.shape[1]:
            self._pad(kmax)
        for p in torch.nonzero(want > have).flatten().tolist():
            for _ in range(int(want[p] - have[p])):
                self._split_heaviest(p)
        self.invalidate()
        return self.num_gauss()

    def _pad(self, k: int) -> None:
        p, k0, d = self.means.shape
        extra = k - k0
        self.means = torch.cat([self.means, self.means[:, :1].repeat(1, extra, 1)], 1)
        self.vars = torch.cat([self.vars, self.vars[:, :1].repeat(1, extra, 1)], 1)
        self.logw = torch.cat([self.logw, torch.full((p, extra), -math.inf,
                                                     dtype=torch.float64)], 1)

    def _split_heaviest(self, p: int) -> None:
        live = torch.isfinite(self.logw[p])
        j = int(torch.argmax(torch.where(live, self.logw[p], torch.full_like(self.logw[p],
                                                                              -math.inf))))
        free = int(torch.nonzero(~live)[0])
        delta = SPLIT_SIGMA * torch.sqrt(self.vars[p, j])
        self.means[p, free] = self.means[p, j] + delta
        self.means[p, j] = self.means[p, j] - delta
        self.vars[p, free] = self.vars[p, j]
        half = self.logw[p, j] - math.log(2.0)
        self.logw[p, j] = half
        self.logw[p, free] = half

    # --- io ---
    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"means": self.means, "vars": self.vars, "logw": self.logw}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> AcousticModel:
        return cls(state["means"], state["vars"], state["logw"])

    def copy(self) -> AcousticModel:
        """An independent copy (a rung trains on while the one before keeps its model)."""
        return AcousticModel(self.means.clone(), self.vars.clone(), self.logw.clone())


#: Most frames of one pdf taken at once by the statistics passes: a pdf's frames grow with
#: the job (silence holds a fifth of them), its working memory (frames × Gaussians ×
#: dimension, for MLLT) must not.
PDF_BLOCK = 4096


def by_pdf(pdf: torch.Tensor, block: int | None = None):
    """``(pdf, frame indices)`` for every pdf that has frames (one sort, no Python per
    frame); with ``block``, a pdf's frames in pieces of at most that many, in order."""
    pdf = torch.as_tensor(pdf, dtype=torch.long)
    order = torch.argsort(pdf, stable=True)
    values, counts = torch.unique_consecutive(pdf[order], return_counts=True)
    start = 0
    for v, n in zip(values.tolist(), counts.tolist(), strict=True):
        step = block or n
        for i in range(start, start + n, step):
            yield v, order[i:min(i + step, start + n)]
        start += n


def split_targets(have: torch.Tensor, occ: torch.Tensor, target: int, power: float
                  ) -> torch.Tensor:
    """Gaussians per pdf after mixing up to ``target`` in all."""
    import heapq

    want = have.clone()
    share = occ.clamp_min(0.0).to(torch.float64) ** power
    heap = [(-float(share[p]) / int(want[p]), p) for p in range(len(want)) if occ[p] > 0]
    heapq.heapify(heap)
    total = int(want.sum())
    while total < target and heap:
        _, p = heapq.heappop(heap)
        if (int(want[p]) + 1) * MIN_MIX_COUNT > float(occ[p]):
            continue  # Kaldi's --mix-up min count: every Gaussian keeps 20 frames
        want[p] += 1
        total += 1
        heapq.heappush(heap, (-float(share[p]) / int(want[p]), p))
    return want


def global_stats(feats: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and variance of all frames (float64)."""
    n = 0
    s = ss = torch.zeros(0, dtype=torch.float64)
    for m in feats:
        x = torch.from_numpy(m).to(torch.float64)
        s = x.sum(0) if n == 0 else s + x.sum(0)
        ss = (x * x).sum(0) if n == 0 else ss + (x * x).sum(0)
        n += x.shape[0]
    mean = s / n
    return mean, ss / n - mean * mean

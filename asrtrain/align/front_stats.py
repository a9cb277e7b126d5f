"""What one alignment job computes for the front end's transforms on its own speakers:
LDA's class statistics, MLLT's statistics, each speaker's fMLLR transform.

The jobs run these (``shard.Shard``) and the parent sums or merges what they return
(``parallel.Jobs``); the ladder (``ladder.py``) solves for the transforms. A speaker is
wholly in one job, so its fMLLR is estimated there whole.
"""

from __future__ import annotations

import numpy as np
import torch

from asrtrain.adapt.lda import LdaStats, splice
from asrtrain.align.am import PDF_BLOCK, AcousticModel, by_pdf
from asrtrain.align.corpus import Corpus, aligned_frames
from asrtrain.align.feats import FrontEnd, Utterances
from asrtrain.core.malloc import release_memory

#: Frames whose outer products ξ_t ξ_tᵀ fMLLR's statistics form at once: 41² float64 are
#: 13 KB a frame, 27 MB a block; all of a speaker's at once grew with the speaker.
OUTER_ROWS = 2048


def lda_stats(utts: Utterances, alignments: dict, num_pdfs: int, context: int) -> LdaStats:
    """LDA's statistics of one job: MFCC spliced ±``context``, classes the aligned pdfs."""
    stats = LdaStats.empty(num_pdfs, utts.dim * (2 * context + 1))
    for utt, ali in alignments.items():
        stats.add(splice(torch.from_numpy(utts.feats[utt]), context), torch.from_numpy(ali.pdf))
    return stats


def mllt_stats(model: AcousticModel, corpus: Corpus) -> tuple[torch.Tensor, float]:
    """MLLT's statistics over one job's aligned frames (the jobs' are summed): G_i from
    the frames' deviations from their Gaussians' means weighted by the inverse variances
    of dimension i, and β, the frames."""
    d = model.dim
    g = torch.zeros(d, d, d, dtype=torch.float64)
    beta = 0.0
    if not corpus.alignments:
        return g, beta
    x_all, rows, pdf = aligned_frames(corpus)
    for p, idx in by_pdf(torch.from_numpy(pdf), PDF_BLOCK):
        x = x_all[idx if rows is None else rows[idx]].to(torch.float64)
        comp = model.component_loglikes(p, x)
        post = torch.softmax(comp, dim=1)                         # [n, k]
        k = post.shape[1]
        mu, inv = model.means[p, :k], 1.0 / model.vars[p, :k]
        occ, sx = post.sum(0), post.T @ x
        sxx = torch.einsum("tk,ti,tj->kij", post, x, x)
        scatter = (sxx - mu[:, :, None] * sx[:, None, :] - sx[:, :, None] * mu[:, None, :]
                   + occ[:, None, None] * mu[:, :, None] * mu[:, None, :])
        g += torch.einsum("ki,kjl->ijl", inv, scatter)
        beta += float(occ.sum())
    return g, beta


def estimate_fmllr(model: AcousticModel, utts: Utterances, front: FrontEnd,
                   alignments: dict, current: dict[str, np.ndarray], iters: int = 2
                   ) -> dict[str, np.ndarray]:
    """Every speaker's fMLLR transform against ``model`` under ``alignments`` (Kaldi's
    ``gmm-est-fmllr``: the aligned pdf's Gaussian posteriors, Gales' row update; too
    few frames give a diagonal or bias-only transform, as in ``prepare fmllr``)."""
    from asrtrain.adapt.fmllr import choose_kind, identity, update

    out: dict[str, np.ndarray] = {}
    for spk, spk_utts in utts.speakers().items():
        mine = [u for u in spk_utts if u in alignments]
        if not mine:
            continue
        x = torch.from_numpy(np.concatenate([front.apply(utts.feats[u], with_fmllr=False)
                                             for u in mine])).to(torch.float64)
        pdf = torch.from_numpy(np.concatenate([alignments[u].pdf for u in mine]))
        w = torch.from_numpy(current[spk]) if spk in current else identity(x.shape[1])
        kind = choose_kind(x.shape[0], 400, 100, 10)
        for _ in range(iters if kind != "none" else 0):
            w = update(w, fmllr_stats(model, x, pdf, w), kind)
        out[spk] = w.numpy()
        release_memory()      # this speaker's statistics, freed below the transform kept
    return out


def fmllr_stats(model: AcousticModel, x: torch.Tensor, pdf: torch.Tensor, w: torch.Tensor,
                weight: torch.Tensor | None = None):
    """G_i = Σ_t Σ_k γ_tk ξ_t ξ_tᵀ / σ²_ki and k_i = Σ_t Σ_k γ_tk μ_ki ξ_t / σ²_ki for the
    aligned pdfs' Gaussians, posteriors of the transformed frames; ``weight`` scales each
    frame (a decode's first pass down-weights silence, Kaldi's weight-silence-post)."""
    from asrtrain.adapt.fmllr import FmllrStats
    d = x.shape[1]
    xi = torch.cat([x, torch.ones(x.shape[0], 1, dtype=torch.float64)], 1)
    y = xi @ w.T
    wt = torch.zeros(x.shape[0], d, dtype=torch.float64)      # Σ_k γ_tk / σ²_ki
    kt = torch.zeros(x.shape[0], d, dtype=torch.float64)      # Σ_k γ_tk μ_ki / σ²_ki
    for p, idx in by_pdf(pdf):
        post = torch.softmax(model.component_loglikes(p, y[idx]), dim=1)
        k = post.shape[1]
        inv = 1.0 / model.vars[p, :k]
        wt[idx] = post @ inv
        kt[idx] = post @ (model.means[p, :k] * inv)
    if weight is not None:
        wt, kt = wt * weight[:, None], kt * weight[:, None]
    g = torch.zeros(d, (d + 1) ** 2, dtype=torch.float64)
    for i in range(0, x.shape[0], OUTER_ROWS):     # ξ_t ξ_tᵀ is (d+1)² floats a frame
        xs = xi[i:i + OUTER_ROWS]
        g += wt[i:i + OUTER_ROWS].T @ (xs[:, :, None] * xs[:, None, :]).reshape(-1, (d + 1) ** 2)
    g = g.reshape(d, d + 1, d + 1)
    k_stats = kt.T @ xi
    beta = float(x.shape[0]) if weight is None else float(weight.sum())
    return FmllrStats(beta=beta, g=g, k=k_stats, const=0.0, entropy=0.0, loglike=0.0)

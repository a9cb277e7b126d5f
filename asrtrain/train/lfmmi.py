"""Lattice-free MMI: the denominator's forward-backward over the whole phone-trigram graph.

For an utterance with network scores ``y[t, pdf]`` (log posterior − log prior, scaled by
κ) the denominator is Σ over the paths of ``den_graph.DenGraph`` of the product of its
transition probabilities and ``exp(y[t, pdf(state_t)])``. The recursions run in probability
space, each frame's vector scaled to sum 1 (the scales summed in log space), as Kaldi's
``chain-denominator.cc`` does, with one sparse matrix product per frame. The numerator is
the reference alignment's single path (the archive's targets), so the gradient with
respect to ``y`` is ``δ(pdf = ref_t) − γ_den[t, pdf]``: :func:`lfmmi_targets` returns it
in the form the sequence trainer takes (``mmi.MmiFrames``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from asrtrain.train.den_graph import DenGraph
from asrtrain.train.mmi import MmiFrames, mmi_frames


@dataclass
class DenMatrices:
    """A graph as the recursions use it: float32 CSR, the utterances of a step as columns
    (one product per frame for all of them; 18k states, 230k transitions on speechocean762)."""

    forward: torch.Tensor    # sparse CSR [S, S]: row dst, column src (α_t = F · α_{t-1})
    backward: torch.Tensor   # sparse CSR [S, S]: row src, column dst (β_t = B · (e ⊙ β))
    pdf: torch.Tensor        # int64 [S]
    initial: torch.Tensor    # [S, 1]
    final: torch.Tensor      # [S, 1]
    num_pdfs: int

    def to(self, device: str | torch.device) -> DenMatrices:
        """The same graph on ``device``: on a GPU the recursions run there (cuSPARSE's CSR product)."""
        move = {k: getattr(self, k).to(device) for k in ("forward", "backward", "pdf", "initial", "final")}
        return DenMatrices(**move, num_pdfs=self.num_pdfs)

    @classmethod
    def of(cls, graph: DenGraph, num_pdfs: int) -> DenMatrices:
        size = graph.num_states
        prob = torch.from_numpy(graph.prob.astype(np.float32))
        src, dst = torch.from_numpy(graph.src), torch.from_numpy(graph.dst)

        def csr(rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
            coo = torch.sparse_coo_tensor(torch.stack([rows, cols]), prob, (size, size),
                                          check_invariants=True).coalesce()
            with warnings.catch_warnings():   # "CSR support is in beta": mm is all we use
                warnings.filterwarnings("ignore", message="Sparse CSR tensor support")
                return coo.to_sparse_csr()
        return cls(forward=csr(dst, src), backward=csr(src, dst),
                   pdf=torch.from_numpy(graph.pdf.astype(np.int64)),
                   initial=torch.from_numpy(graph.initial.astype(np.float32))[:, None],
                   final=torch.from_numpy(graph.final.astype(np.float32))[:, None],
                   num_pdfs=num_pdfs)


def den_posteriors(den: DenMatrices, scores: list[np.ndarray]) -> list[tuple[np.ndarray, float]]:
    """(γ_den [T, P] float32, log Σ_paths) of each utterance's ``scores`` [T, P], already
    scaled by κ, computed together. Raises ValueError naming the utterance's index when no
    path of the graph survives its length."""
    lengths = [int(y.shape[0]) for y in scores]
    t_max, batch, dev = max(lengths), len(scores), den.pdf.device
    y = torch.zeros(t_max, batch, den.num_pdfs, device=dev)
    for b, sc in enumerate(scores):
        y[:lengths[b], b] = torch.from_numpy(np.asarray(sc, dtype=np.float32)).to(dev)
    shift = y.max(dim=2, keepdim=True).values
    emit = torch.exp(y - shift)[:, :, den.pdf].transpose(1, 2).contiguous()   # [T, S, B]
    alpha, logc = _forward(den, emit)
    last = torch.tensor(lengths, device=dev) - 1
    z = (alpha[last, :, torch.arange(batch, device=dev)] * den.final.T).sum(1)   # [B]
    for b in range(batch):
        if not z[b] > 0:
            raise ValueError(f"utterance {b} of the step: no path of the denominator graph "
                             f"ends at its frame {lengths[b]}")
    post = _backward(den, emit, alpha, logc, last, z)
    out = []
    for b, n in enumerate(lengths):
        total = float(logc[:n, b].double().sum() + shift[:n, b].double().sum() + torch.log(z[b]).double())
        out.append((post[:n, b].cpu().numpy(), total))
    return out


def _forward(den: DenMatrices, emit: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """α̂ [T, S, B], each frame scaled to sum 1, and the log scales [T, B]."""
    alpha = torch.empty_like(emit)
    logc = torch.empty(emit.shape[0], emit.shape[2], device=emit.device)
    a = den.initial * emit[0]
    for t in range(emit.shape[0]):
        if t:
            a = torch.sparse.mm(den.forward, alpha[t - 1]) * emit[t]
        c = a.sum(0)
        if not bool((c > 0).all()):
            b = int(torch.nonzero(c <= 0)[0])
            raise ValueError(f"utterance {b} of the step: no path of the denominator graph "
                             f"reaches frame {t}")
        alpha[t], logc[t] = a / c, torch.log(c)
    return alpha, logc


def _backward(den: DenMatrices, emit: torch.Tensor, alpha: torch.Tensor, logc: torch.Tensor,
              last: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """The pdf posteriors [T, B, P]: β̂ from each utterance's last frame back, γ = α̂ β̂."""
    t_max, size, batch = emit.shape
    post = torch.zeros(t_max, batch, den.num_pdfs, device=emit.device)
    b = torch.zeros(size, batch, device=emit.device)
    end = den.final / z                                   # [S, B]
    for t in range(t_max - 1, -1, -1):
        if t < t_max - 1:
            b = torch.sparse.mm(den.backward, emit[t + 1] * b) / torch.exp(logc[t + 1])
        ends = last == t
        if bool(ends.any()):
            b[:, ends] = end[:, ends]
        b[:, last < t] = 0.0
        post[t].index_add_(1, den.pdf, (alpha[t] * b).T)
    return post


def lfmmi_targets(den: DenMatrices, loglikes: list[np.ndarray], alis: list[np.ndarray],
                  acwt: float) -> list[MmiFrames]:
    """The MMI gradient weights κ(δ_ref − γ_den) of a step's utterances against their
    reference pdfs ``alis`` [T]; an objective leaves out the reference path's own transition
    and trigram probabilities (the same for every model: a constant of the data)."""
    dens = den_posteriors(den, [acwt * np.asarray(ll, dtype=np.float32) for ll in loglikes])
    return [mmi_frames(post, total, ll, ali, acwt, drop_frames=False)   # every pdf is in the graph
            for (post, total), ll, ali in zip(dens, loglikes, alis, strict=True)]

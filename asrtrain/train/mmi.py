"""The MMI criterion on a denominator lattice: forward-backward with the network's new scores.

Sequence training (Kaldi's ``nnet-train-mmi-sequential``, Veselý et al. 2013) keeps the
word lattices a cross-entropy model's decoding of the training set gave (``decode
--lattices`` on the training archive: every competing word sequence with its best
alignment), replaces their acoustic costs with the scores of the model being trained, and
raises the score of the reference alignment (the numerator) against the sum over the
lattice's paths (the denominator). With acoustic scale κ the objective of an utterance is

    F = κ·Σ_t log p(x_t | s_t^num) − log Σ_paths exp(κ·acoustic − graph)

and its gradient with respect to the log-likelihood of pdf s at frame t is
κ·(δ(s = s_t^num) − γ_den(t, s)), γ_den the lattice's pdf posteriors: that is what
:func:`mmi_targets` returns for the trainer to weight the log-posteriors with. Frames whose
reference pdf the lattice never visits are dropped (Kaldi's ``--drop-frames``): there the
gradient only pushes one pdf up without a competitor to learn from, and it diverges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asrtrain.decode.lattice import WordLattice


@dataclass
class LatticeFrames:
    """A lattice unrolled to its frames: for every label on an arc or a final weight, which
    arc (or final state) it is on, its frame and its pdf. Built once per lattice."""

    lattice: WordLattice
    arc_order: np.ndarray  # int64 [A] arcs sorted by source state (a topological order)
    arc_of: np.ndarray  # int64 [L] the arc each arc label is on
    arc_time: np.ndarray  # int64 [L] its frame
    arc_pdf: np.ndarray  # int64 [L] its pdf
    final_of: np.ndarray  # int64 [F] the final state each final-weight label belongs to
    final_time: np.ndarray
    final_pdf: np.ndarray
    num_frames: int

    @classmethod
    def of(cls, lat: WordLattice, pdf_of_label: np.ndarray | None = None) -> LatticeFrames:
        """Unroll ``lat``; ``pdf_of_label`` maps an input label to its pdf (HCLG's labels are
        pdf+1: the default; a Kaldi graph's transition-ids need the tid→pdf map)."""
        times = lat.state_times()
        arc_len = np.diff(lat.ilabel_offsets).astype(np.int64)
        arc_of = np.repeat(np.arange(lat.num_arcs, dtype=np.int64), arc_len)
        pos = np.arange(arc_of.size, dtype=np.int64) - np.repeat(lat.ilabel_offsets[:-1].astype(np.int64), arc_len)
        fin_len = np.diff(lat.final_offsets).astype(np.int64)
        final_of = np.repeat(np.arange(lat.num_states, dtype=np.int64), fin_len)
        fpos = np.arange(final_of.size, dtype=np.int64) - np.repeat(lat.final_offsets[:-1].astype(np.int64), fin_len)
        to_pdf = (lambda x: x.astype(np.int64) - 1) if pdf_of_label is None else (
            lambda x: np.asarray(pdf_of_label)[x].astype(np.int64))
        return cls(lattice=lat, arc_order=np.argsort(lat.src, kind="stable"),
                   arc_of=arc_of, arc_time=times[lat.src[arc_of]] + pos, arc_pdf=to_pdf(lat.ilabels),
                   final_of=final_of, final_time=times[final_of] + fpos,
                   final_pdf=to_pdf(lat.final_ilabels), num_frames=lat.num_frames)


def _logsumexp(x: np.ndarray) -> float:
    if x.size == 0:
        return -np.inf
    m = float(x.max())
    return m if not np.isfinite(m) else m + float(np.log(np.exp(x - m).sum()))


def _forward_backward(lat: WordLattice, order: np.ndarray, arc_w: np.ndarray, final_w: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, float]:
    """(alpha, beta, log total) over states numbered topologically from 0, in log space."""
    s_count = lat.num_states
    src, dst = lat.src[order].astype(np.int64), lat.dst[order].astype(np.int64)
    w = arc_w[order]
    bounds = np.searchsorted(src, np.arange(s_count + 1))
    alpha = np.full(s_count, -np.inf)
    alpha[0] = 0.0
    for s in range(s_count):  # every arc into s comes from a smaller state: alpha[s] is done
        a, b = bounds[s], bounds[s + 1]
        if a < b and np.isfinite(alpha[s]):
            np.logaddexp.at(alpha, dst[a:b], alpha[s] + w[a:b])
    beta = final_w.astype(np.float64).copy()
    for s in range(s_count - 1, -1, -1):
        a, b = bounds[s], bounds[s + 1]
        if a < b:
            beta[s] = np.logaddexp(beta[s], _logsumexp(w[a:b] + beta[dst[a:b]]))
    total = _logsumexp(alpha + final_w)
    return alpha, beta, total


def den_posteriors(frames: LatticeFrames, loglikes: np.ndarray, acwt: float
                   ) -> tuple[np.ndarray, float]:
    """(γ_den [T, P] float32, log Σ_paths) of the lattice rescored with ``loglikes`` [T, P]
    (log p(x|s) up to a constant: log posterior − log prior) at acoustic scale ``acwt``;
    the graph costs stay the lattice's. Raises ValueError when the lattice's length is not
    the utterance's or no path has a finite score."""
    lat = frames.lattice
    t_count, p_count = loglikes.shape
    if frames.num_frames != t_count:
        raise ValueError(f"the lattice spans {frames.num_frames} frames, the scores {t_count}")
    ll = loglikes.astype(np.float64)
    arc_ac = np.bincount(frames.arc_of, weights=ll[frames.arc_time, frames.arc_pdf], minlength=lat.num_arcs)
    fin_ac = np.bincount(frames.final_of, weights=ll[frames.final_time, frames.final_pdf], minlength=lat.num_states)
    arc_w = acwt * arc_ac - lat.graph.astype(np.float64)
    final_w = acwt * fin_ac - lat.final_graph.astype(np.float64)  # inf graph cost: not final
    alpha, beta, total = _forward_backward(lat, frames.arc_order, arc_w, final_w)
    if not np.isfinite(total):
        raise ValueError("no path of the lattice has a finite score")
    gamma_arc = np.exp(alpha[lat.src] + arc_w + beta[lat.dst] - total)
    gamma_fin = np.exp(alpha + final_w - total)
    post = np.zeros((t_count, p_count))
    np.add.at(post, (frames.arc_time, frames.arc_pdf), gamma_arc[frames.arc_of])
    if frames.final_of.size:
        np.add.at(post, (frames.final_time, frames.final_pdf), gamma_fin[frames.final_of])
    return post.astype(np.float32), total


@dataclass
class MmiFrames:
    """One utterance's MMI weights for the trainer, and what it reports."""

    weights: np.ndarray  # float32 [T, P]: κ(γ_num − γ_den), zero on dropped frames
    objective: float  # F of the utterance over every frame (dropping frames changes the gradient only)
    kept: np.ndarray  # bool [T]: frames the gradient uses
    num_post: float  # mean γ_den of the reference pdf on the kept frames (how much the lattice agrees)


def mmi_targets(frames: LatticeFrames, loglikes: np.ndarray, ali: np.ndarray, acwt: float,
                drop_frames: bool = True) -> MmiFrames:
    """The MMI gradient weights of one utterance against its reference pdfs ``ali`` [T]."""
    post, total = den_posteriors(frames, loglikes, acwt)
    return mmi_frames(post, total, loglikes, ali, acwt, drop_frames)


def mmi_frames(post: np.ndarray, total: float, loglikes: np.ndarray, ali: np.ndarray, acwt: float,
               drop_frames: bool) -> MmiFrames:
    """κ(γ_num − γ_den) and the objective from a denominator's posteriors ``post`` [T, P] and
    log total (a lattice's or the lattice-free graph's), the numerator the reference path."""
    t = np.arange(ali.size)
    ref = post[t, ali]
    kept = ref > 1e-6 if drop_frames else np.ones(ali.size, dtype=bool)
    weights = -post
    weights[t, ali] += 1.0
    weights[~kept] = 0.0
    num = acwt * float(np.asarray(loglikes)[t, ali].astype(np.float64).sum())
    return MmiFrames(weights=(acwt * weights).astype(np.float32), objective=num - total, kept=kept,
                     num_post=float(ref[kept].mean()) if kept.any() else 0.0)

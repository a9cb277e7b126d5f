"""fMLLR features for the network from the SAT model (Kaldi's way for nnet input).

The SAT rung leaves the LDA+MLLT transform and, for every training speaker, an fMLLR
transform estimated against the SAT model under its alignment: those are the training
features. A speaker the network will be tested on has no transcript to align, so its
transform is estimated without one: against the SAT model as a single mixture (every
pdf's Gaussians, weighted by the pdf's share of the training frames), by the same EM
that ``prepare fmllr`` runs on its global GMM (``adapt.fmllr.estimate``). Kaldi's
``decode_fmllr.sh`` gets test posteriors from a first-pass decode instead; the mixture
is its transcript-free, graph-free stand-in, and dev speakers are treated as test ones.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from asrtrain.adapt.featio import copy_tables
from asrtrain.adapt.fmllr import COPIED, estimate
from asrtrain.adapt.gmm import DiagGMM
from asrtrain.align.am import AcousticModel
from asrtrain.align.feats import FrontEnd, Utterances
from asrtrain.core.atomic import write_text
from asrtrain.core.textio import read_text

log = logging.getLogger("asrtrain.align")


def model_mixture(model: AcousticModel, pdf_frames: np.ndarray) -> DiagGMM:
    """All live Gaussians of the model as one mixture, pdfs weighted by their frames."""
    prior = torch.as_tensor(pdf_frames, dtype=torch.float64) + 1.0
    prior = prior / prior.sum()
    live = torch.isfinite(model.logw)
    weights = (prior[:, None] * torch.exp(torch.where(live, model.logw,
                                                      torch.zeros_like(model.logw))))[live]
    return DiagGMM(weights / weights.sum(), model.means[live].clone(), model.vars[live].clone())


def held_out_transforms(mixture: DiagGMM, utts: Utterances, front: FrontEnd
                        ) -> dict[str, np.ndarray]:
    """Each speaker's fMLLR against the mixture, no transcript used."""
    out: dict[str, np.ndarray] = {}
    for spk, mine in utts.speakers().items():
        x = torch.from_numpy(np.concatenate([front.apply(utts.feats[u], with_fmllr=False)
                                             for u in mine]))
        result = estimate(mixture, x)
        log.info("SAT fMLLR of held-out speaker %s (%s, %d frames): log-likelihood per frame "
                 "%.3f -> %.3f", spk, result.kind, result.frames,
                 result.loglikes[0] if result.loglikes else float("nan"), result.loglikes[-1])
        out[spk] = result.transform.numpy()
    return out


def write_part(out: Path, utts: Utterances, front: FrontEnd, part: int) -> dict[str, str]:
    """One job's utterances, adapted, into ``out/data/feats.<part>.ark``; their scp
    entries (``write_scp`` makes ``feats.scp`` of every part once all are complete)."""
    import kaldiio

    ark = (out / "data" / f"feats.{part}.ark").resolve()
    ark.parent.mkdir(parents=True, exist_ok=True)
    scp = ark.with_suffix(".scp.part")
    with kaldiio.WriteHelper(f"ark,scp:{ark},{scp}") as writer:
        for utt, mat in utts.feats.items():
            writer(utt, front.apply(mat, utts.utt2spk[utt]))
    entries = dict(line.split(" ", 1) for line in read_text(scp).splitlines())
    scp.unlink()
    return entries


def write_scp(out: Path, data: Path, entries: list[tuple[str, str]]) -> int:
    """``out/feats.scp`` (atomically, in this order) and the data dir's tables."""
    copy_tables(data, out, COPIED)
    write_text(out / "feats.scp", "".join(f"{u} {where}\n" for u, where in entries))
    return len(entries)

"""One rung of the ladder: Viterbi EM of an HMM-GMM on a fixed front end.

Each iteration realigns the corpus (at the iterations the stage says), accumulates
Gaussian statistics under the alignment, re-estimates the Gaussians and the self-loop
probabilities, and mixes up towards the stage's number of Gaussians (Kaldi's
``train_mono.sh``/``train_deltas.sh`` loop: realignment at set iterations, a fixed
number of Gaussians added per iteration until the target).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from asrtrain.align.am import AcousticModel
from asrtrain.align.backoff import backed_off, fill_backoffs
from asrtrain.align.corpus import Beams, Failures
from asrtrain.align.hmm import MonoPdfs, Transitions, TreePdfs

if TYPE_CHECKING:
    from asrtrain.align.parallel import Jobs

log = logging.getLogger("asrtrain.align")


@dataclass
class StageSpec:
    """How one rung trains: iterations, where to realign, how many Gaussians."""

    name: str
    iters: int
    realign_iters: tuple[int, ...]
    gauss: int
    mix_iters: int = 0          # Gaussians grow over this many iterations (0: iters − 2)


def train_stage(spec: StageSpec, jobs: Jobs, model: AcousticModel, pdfs: MonoPdfs | TreePdfs,
                trans: Transitions, beams: Beams, failures: Failures, var_floor: torch.Tensor,
                hook: Callable[[int, AcousticModel], None] | None = None) -> AcousticModel:
    """Run ``spec.iters`` iterations of Viterbi EM over the jobs' utterances (each job
    realigns and accumulates its own; the statistics are summed here and the model
    updated); ``hook(it, model)`` runs before each iteration's accumulation (the place
    for MLLT and fMLLR updates)."""
    start_gauss = model.num_gauss()
    mix_iters = spec.mix_iters or max(spec.iters - 2, 1)
    step = max((spec.gauss - start_gauss) / mix_iters, 0.0)
    target = float(start_gauss)
    backoffs = backed_off(pdfs.tree) if isinstance(pdfs, TreePdfs) else {}
    t0 = time.time()
    for it in range(1, spec.iters + 1):
        if it in spec.realign_iters:
            jobs.realign(model, pdfs, trans, beams, failures, f"{spec.name} align {it}")
        if hook is not None:
            hook(it, model)
        stats, frames, visits = jobs.accumulate(model)
        model.update(stats, var_floor)
        filled = fill_backoffs(model, stats, backoffs, var_floor)
        trans.reestimate(frames, visits)
        if it <= mix_iters:
            target = min(target + step, spec.gauss)
            # a pdf's occupancy is its aligned frames, a whole number: rounded, pdfs with
            # equal counts tie exactly (broken by index), not by the order of float sums
            # (which differs with --nj and would send a Gaussian elsewhere)
            model.mix_up(int(round(target)), stats.occ.sum(1).round())
        log.info("%s iteration %d/%d: log-likelihood per frame %.3f over %d frames, "
                 "%d Gaussians, %d utterances aligned, %d back-off pdfs pooled", spec.name, it,
                 spec.iters, stats.loglike / max(stats.frames, 1), stats.frames,
                 model.num_gauss(), jobs.aligned, filled)
    log.info("%s: %d iterations in %.1f s", spec.name, spec.iters, time.time() - t0)
    return model

"""Kaldi's ladder, each rung aligning the data for the next: monophones from a flat
start → triphones on asrtrain's tree → LDA+MLLT → SAT (per-speaker fMLLR).

- **mono**: every pdf starts as one Gaussian with the global mean and variance;
  the first statistics come from equal alignments (the transcript's first
  pronunciations between two silences, frames shared evenly by the states).
- **tri**: the tree (Kaldi's likelihood tree, ``lang/questions.py``; or the frame-count
  tree of ``lang/tree.py``) is built on the monophone alignments; each triphone pdf
  starts as one Gaussian from its frames under them, then mixes up.
- **lda**: MFCC spliced ±3 frames, LDA to 40 dimensions with the tree's pdfs as
  classes, then MLLT re-estimated at set iterations (the model's means rotated with it).
- **sat**: a per-speaker fMLLR transform estimated against the model at set
  iterations, the model trained on the adapted features.

Every rung's per-frame work (alignment, statistics, MLLT's and fMLLR's statistics) is
done by the training speakers' jobs (``parallel.Jobs``); the parent sums and updates.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from asrtrain.align.am import AcousticModel
from asrtrain.align.corpus import Beams, Failures
from asrtrain.align.feats import FrontEnd, Utterances
from asrtrain.align.hmm import MonoPdfs, Transitions, TreePdfs
from asrtrain.align.train import StageSpec, train_stage

if TYPE_CHECKING:
    from asrtrain.align.parallel import Jobs
    from asrtrain.lang.hmm import Topology

log = logging.getLogger("asrtrain.align")

STAGES = ("mono", "tri", "lda", "sat")
#: Variance floor relative to the global variance (Kaldi floors at 1e-3 absolute on
#: normalised features; relative is safer across front ends).
VAR_FLOOR_RATIO = 0.01


@dataclass
class LadderConfig:
    """Sizes and schedules of every rung (Kaldi's defaults scaled to small corpora)."""

    stages: tuple[str, ...] = STAGES
    mono_gauss: int = 1000
    mono_iters: int = 25
    tri_leaves: int = 1000
    tri_gauss: int = 8000
    tri_iters: int = 20
    tree: str = "questions"     # questions (Kaldi's likelihood tree) or counts (tree.py's)
    retree: bool = False        # LDA+MLLT grows its own question tree on its features (Kaldi's)
    mono_utts: int = 0          # train the monophones on this many shortest utterances (0: all)
    lda_dim: int = 40
    splice: int = 3
    mllt_iters: tuple[int, ...] = (2, 4, 6, 12)
    fmllr_iters: tuple[int, ...] = (2, 4, 6, 12)
    beams: Beams = field(default_factory=Beams)
    nj: int = 1                 # jobs (processes), the training speakers split among them

    def spec(self, stage: str) -> StageSpec:
        if stage == "mono":
            n = self.mono_iters
            realign = tuple(i for i in range(1, n + 1) if i <= 10 or i % 3 == 0)
            return StageSpec("mono", n, realign, self.mono_gauss)
        n = self.tri_iters
        return StageSpec(stage, n, tuple(i for i in range(1, n + 1) if i % 5 == 0 or i == 1),
                         self.tri_gauss)


@dataclass
class Rung:
    """What a finished rung leaves: its front end, pdf map, model and transitions."""

    name: str
    front: FrontEnd
    pdfs: MonoPdfs | TreePdfs
    model: AcousticModel
    trans: Transitions


def var_floor(jobs: Jobs) -> torch.Tensor:
    _, var = jobs.global_stats()
    return VAR_FLOOR_RATIO * var


def train_mono(utts: Utterances, jobs: Jobs, phones: list[int], sil: int, cfg: LadderConfig,
               failures: Failures) -> Rung:
    front = FrontEnd(deltas=True)
    jobs.use_front(front)
    pdfs = MonoPdfs(phones)
    mean, var = jobs.global_stats()
    model = AcousticModel.flat(pdfs.num_pdfs, mean, var)
    floor = VAR_FLOOR_RATIO * var
    trans = Transitions.initial(phones)
    for utt in jobs.equal_alignments(pdfs):
        failures.add(utt, "too short for its phones")
    log.info("mono: %d pdfs, equal alignment of %d utterances", pdfs.num_pdfs, jobs.aligned)
    stats, _, _ = jobs.accumulate(model)  # iteration 0: the equal alignments' statistics
    model.update(stats, floor)
    model = train_stage(cfg.spec("mono"), jobs, model, pdfs, trans, cfg.beams, failures, floor)
    return Rung("mono", front, pdfs, model, trans)


def shortest(transcribed: list[str], utts: Utterances, n: int) -> list[str]:
    """The ``n`` shortest utterances, by frame count (Kaldi's ``subset_data_dir.sh
    --shortest``: a flat start learns fastest where each utterance has few phones to
    place), sorted."""
    return sorted(sorted(transcribed, key=lambda u: (utts.frames(u), u))[:n])


def train_mono_subset(utts: Utterances, jobs: Jobs, phones: list[int], sil: int,
                      cfg: LadderConfig, failures: Failures) -> Rung:
    """Monophones on the ``cfg.mono_utts`` shortest utterances (jobs of their own), then
    every utterance aligned with them (the next rung needs them all)."""
    if not cfg.mono_utts or cfg.mono_utts >= len(jobs.transcribed):
        return train_mono(utts, jobs, phones, sil, cfg, failures)
    keep = shortest(jobs.transcribed, utts, cfg.mono_utts)
    with jobs.spawn(utts.subset(keep), keep, cfg.nj, "monophones") as subset:
        rung = train_mono(utts, subset, phones, sil, cfg, failures)
    log.info("mono: trained on the %d shortest of %d utterances; aligning all", cfg.mono_utts,
             len(jobs.transcribed))
    jobs.use_front(rung.front)
    jobs.realign(rung.model, rung.pdfs, rung.trans, cfg.beams, failures, "mono: all utterances",
                 keep_previous=False)
    return rung


def train_tri(prev: Rung, jobs: Jobs, phones: list[int], sil: int,
              cfg: LadderConfig, failures: Failures) -> Rung:
    """Triphones on a context tree grown from the monophone alignments (the jobs count
    their moves and contexts, summed here: Kaldi's acc-tree-stats and sum-tree-stats):
    by the likelihood of the contexts' frames (``cfg.tree`` questions) or their counts."""
    from asrtrain.lang.hmm import states_per_phone
    from asrtrain.lang.tree import tree_from_counts

    topo = jobs.topology(states_per_phone(phones, states=3, sil_phones=[sil], sil_states=3))
    if cfg.tree == "questions":
        pdfs = _question_pdfs(jobs, topo, [sil], cfg)
    else:
        pdfs = TreePdfs(tree_from_counts(jobs.contexts(topo), topo, ci_phones=[sil],
                                         num_pdfs=cfg.tri_leaves))
        jobs.relabel(pdfs)
    model = single_gaussians(pdfs.num_pdfs, jobs)   # Kaldi's gmm-init-model, then mix up
    model = train_stage(cfg.spec("tri"), jobs, model, pdfs, prev.trans, cfg.beams, failures,
                        var_floor(jobs))
    return Rung("tri", prev.front, pdfs, model, prev.trans)


def train_lda(utts: Utterances, prev: Rung, jobs: Jobs, cfg: LadderConfig,
              failures: Failures) -> Rung:
    """Splice ±3, LDA to 40 with the tree's pdfs as classes, MLLT during training."""
    from asrtrain.adapt.lda import estimate_lda

    lda, _ = estimate_lda(jobs.lda_stats(prev.pdfs.num_pdfs, cfg.splice), cfg.lda_dim)
    front = FrontEnd(deltas=False, context=cfg.splice, lda=lda)
    jobs.use_front(front)
    pdfs = prev.pdfs
    if cfg.retree and cfg.tree == "questions" and isinstance(pdfs, TreePdfs):
        pdfs = _question_pdfs(jobs, pdfs.tree.topo, pdfs.tree.ci_phones, cfg)
    model = single_gaussians(pdfs.num_pdfs, jobs)
    floor = var_floor(jobs)

    def mllt(it: int, model: AcousticModel) -> None:
        if it in cfg.mllt_iters:
            a = solve_mllt(*jobs.mllt_stats(model))
            front.lda = a @ front.lda
            jobs.use_front(front)
            model.means = torch.einsum("ij,pkj->pki", torch.from_numpy(a), model.means)
            model.invalidate()

    model = train_stage(cfg.spec("lda"), jobs, model, pdfs, prev.trans, cfg.beams,
                        failures, floor, hook=mllt)
    return Rung("lda", front, pdfs, model, prev.trans)


def _question_pdfs(jobs: Jobs, topo: Topology, ci_phones: list[int],
                   cfg: LadderConfig) -> TreePdfs:
    """The triphones' tree (with ``retree``, LDA+MLLT's, as Kaldi's ``train_lda_mllt.sh``
    builds its tree on the LDA features)."""
    return question_pdfs(jobs, topo, ci_phones, cfg.tri_leaves)


def question_pdfs(jobs: Jobs, topo: Topology, ci_phones: list[int], num_pdfs: int) -> TreePdfs:
    """A question tree of about ``num_pdfs`` leaves from the current alignments under the
    current front end, the alignments relabelled with it."""
    from asrtrain.lang.questions import question_tree

    pdfs = TreePdfs(question_tree(jobs.context_stats(), topo, ci_phones=ci_phones,
                                  num_pdfs=num_pdfs))
    jobs.relabel(pdfs)
    return pdfs


def single_gaussians(num_pdfs: int, jobs: Jobs) -> AcousticModel:
    """One Gaussian per pdf from the frames the current alignments give it."""
    mean, var = jobs.global_stats()
    model = AcousticModel.flat(num_pdfs, mean, var)
    stats, _, _ = jobs.accumulate(model)
    model.update(stats, VAR_FLOOR_RATIO * var, min_occ=1.0)
    return model


def solve_mllt(g: torch.Tensor, beta: float, iters: int = 10) -> np.ndarray:
    """A square transform A maximising β log|det A| − ½ Σ_i a_i G_i a_iᵀ (Gales' semi-tied
    covariance, Kaldi's ``est-mllt``)."""
    from asrtrain.adapt.fmllr import row_sweeps

    d = g.shape[0]
    return row_sweeps(np.eye(d), g.numpy(), np.zeros((d, d)), beta, iters)


def train_sat(utts: Utterances, prev: Rung, jobs: Jobs, cfg: LadderConfig,
              failures: Failures) -> Rung:
    """Speaker-adaptive training: per-speaker fMLLR against the model, re-estimated at
    set iterations (each job its own speakers), the model trained on the adapted features."""
    front = FrontEnd(deltas=False, context=prev.front.context, lda=prev.front.lda)
    model = prev.model.copy()
    floor = var_floor(jobs)

    def fmllr(it: int, model: AcousticModel) -> None:
        if it in cfg.fmllr_iters:
            front.fmllr = jobs.fmllr(model, front, front.fmllr)
            jobs.use_front(front)

    model = train_stage(cfg.spec("sat"), jobs, model, prev.pdfs, prev.trans, cfg.beams,
                        failures, floor, hook=fmllr)
    return Rung("sat", front, prev.pdfs, model, prev.trans)

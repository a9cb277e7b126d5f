"""A job's corpus and the two passes Viterbi EM makes over it: realign every
utterance, accumulate Gaussian statistics under the alignments.

Each alignment job runs these on its own speakers (``shard.Shard``); the parent sums
what they return (``parallel.Jobs``) and updates the model (``train.train_stage``).
They sit below both, so neither side imports the other to reach them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import astuple, dataclass, field

import numpy as np
import torch

from asrtrain.align.aligner import ACWT, BEAM, LAST_BEAM, RETRY_BEAM, Alignment, align
from asrtrain.align.am import AcousticModel, GmmStats
from asrtrain.align.graph import PhoneDag, expand
from asrtrain.align.hmm import MonoPdfs, Transitions, TreePdfs, count_states
from asrtrain.core.malloc import release_memory
from asrtrain.core.progress import Progress

log = logging.getLogger("asrtrain.align")

#: Frames or visits per (phone, HMM state): what the transitions are re-estimated from.
Counts = dict[tuple[int, int], int]

#: Utterances realigned between two hand-backs of freed heap (core/malloc.py): each leaves
#: its likelihood matrices freed below the alignment it keeps.
RELEASE_EVERY = 256


@dataclass
class Failures:
    """Utterances left out, by reason (never silently)."""

    reasons: dict[str, str] = field(default_factory=dict)

    def add(self, utt: str, reason: str) -> None:
        self.reasons[utt] = reason

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for reason in self.reasons.values():
            out[reason] = out.get(reason, 0) + 1
        return out


@dataclass
class Beams:
    acwt: float = ACWT
    beam: float = BEAM
    retry_beam: float = RETRY_BEAM
    last_beam: float = LAST_BEAM    # final alignments only; 0: none (Kaldi stops at retry)


@dataclass
class Corpus:
    """Features of one front end, the phone DAG of every transcript, and the alignments."""

    feats: Mapping[str, np.ndarray]     # a job's: a FrameBlock
    dags: dict[str, PhoneDag]
    alignments: dict[str, Alignment] = field(default_factory=dict)


@dataclass
class Realigned:
    """What one pass of alignment did, counted (summed over jobs for the log line)."""

    aligned: int = 0
    retried: int = 0
    last: int = 0
    kept: int = 0
    failed: int = 0

    def __add__(self, other: Realigned) -> Realigned:
        return Realigned(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def log(self, what: str, beams: Beams) -> None:
        log.info("%s: %d aligned, %d at the retry beam %g, %d at the last beam %g, %d kept "
                 "their previous alignment, %d failed", what, self.aligned - self.kept,
                 self.retried - self.last, beams.retry_beam, self.last, beams.last_beam,
                 self.kept, self.failed)


def realign(corpus: Corpus, model: AcousticModel, pdfs: MonoPdfs | TreePdfs,
            trans: Transitions, beams: Beams, failures: Failures, what: str | None,
            keep_previous: bool = True) -> tuple[dict[str, Alignment], Realigned]:
    """Align every utterance with a DAG; utterances that fail are recorded, not kept.

    During training an utterance that fails keeps its previous alignment (early models
    are poor, and the first realignments after a flat start prune many paths); only the
    final alignments (``keep_previous=False``) leave it out, after a last try at
    ``beams.last_beam``: speakers unlike any in training (a dev or test split) can need it.
    ``what`` names a progress bar (None: none, as in a job's process).
    """
    out: dict[str, Alignment] = {}
    n = Realigned()
    with Progress(what or "realign", float(len(corpus.dags)), unit="utts",
                  enabled=None if what else False) as bar:
        for i, (utt, dag) in enumerate(corpus.dags.items(), 1):
            graph = expand(dag, pdfs, trans.self_loop)
            x = corpus.feats[utt]
            if x.shape[0] < graph.min_frames:
                failures.add(utt, "too short for its phones")
            else:
                got = align(graph, dag, model.loglikes(x, np.unique(graph.pdf)), beams.acwt,
                            beams.beam, beams.retry_beam,
                            last_beam=0.0 if keep_previous else beams.last_beam)
                if got is None and keep_previous and utt in corpus.alignments:
                    out[utt] = corpus.alignments[utt]
                    n.kept += 1
                elif got is None:
                    failures.add(utt, "no path at the last beam")
                else:
                    failures.reasons.pop(utt, None)
                    n.retried += got.retried
                    n.last += got.last
                    out[utt] = got
            bar.advance()
            if i % RELEASE_EVERY == 0:
                release_memory()
    n.aligned, n.failed = len(out), len(corpus.dags) - len(out)
    return out, n


def accumulate(model: AcousticModel, corpus: Corpus) -> tuple[GmmStats, Counts, Counts]:
    """Gaussian statistics and per-state frame/visit counts under the current alignments."""
    stats = model.zero_stats()
    frames: dict[tuple[int, int], int] = {}
    visits: dict[tuple[int, int], int] = {}
    for ali in corpus.alignments.values():
        count_states(ali.phone, ali.state, ali.starts, frames, visits)
    if corpus.alignments:
        x, rows, pdf = aligned_frames(corpus)
        model.accumulate(stats, x, pdf, rows)
    return stats, frames, visits


def aligned_frames(corpus: Corpus) -> tuple[torch.Tensor, torch.Tensor | None, np.ndarray]:
    """Every aligned frame as ``(x, rows, pdf)``: frame i is ``x[rows[i]]`` (``x[i]``
    where ``rows`` is None), in the alignments' order, with its pdf ``pdf[i]``. A job's
    frames are indexed in place (see ``frames.FrameBlock``); others are concatenated."""
    from asrtrain.align.frames import FrameBlock

    pdf = np.concatenate([a.pdf for a in corpus.alignments.values()])
    if isinstance(corpus.feats, FrameBlock):
        rows = corpus.feats.rows(corpus.alignments)
        return torch.from_numpy(corpus.feats.data), torch.from_numpy(rows), pdf
    x = np.concatenate([corpus.feats[u] for u in corpus.alignments])
    return torch.from_numpy(x), None, pdf

"""``prepare align``: from audio features, transcripts and a lexicon to phone alignments.

Trains the ladder on the training split, then aligns every split with the last rung
(a SAT model first aligns a split speaker-independently with the rung before it,
estimates each speaker's fMLLR against the SAT model, and realigns: Kaldi's
``align_fmllr.sh``). Utterances that cannot be aligned are counted by reason and
listed; a split that loses more than ``max_lost`` of its utterances is an error.
"""

from __future__ import annotations

import json
import logging
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrtrain.align import ladder
from asrtrain.align.corpus import Failures
from asrtrain.align.evaluate import Reference
from asrtrain.align.feats import FrontEnd, Utterances, load_utterances
from asrtrain.align.ladder import LadderConfig, Rung
from asrtrain.align.output import check_out_path
from asrtrain.align.parallel import Clock, Jobs
from asrtrain.align.remote import Launch, Workers
from asrtrain.align.transcripts import Prons, map_oovs, pron_table, transcribed
from asrtrain.core.atomic import write_text
from asrtrain.core.errors import InputError
from asrtrain.lang.lexicon import EPS, Lexicon, read_dict_dir

log = logging.getLogger("asrtrain.align")

#: MFCC frames per hour of audio (Kaldi's 10 ms shift).
FRAMES_PER_HOUR = 360_000


@dataclass
class AlignJob:
    """The inputs of ``prepare align``."""

    dict_dir: Path
    out: Path
    splits: dict[str, Path]           # the first is the training split
    config: LadderConfig = field(default_factory=LadderConfig)
    oov: str | None = None
    phones: Path | None = None        # keep these phone ids (e.g. a corpus' phones.txt)
    max_lost: float = 0.05
    reference: Path | None = None     # a corpus dir with exact phone.ctm/ali.scp to compare
    launch: Launch | None = None      # jobs on other hosts (--job-cmd); None: forkserver
    held_out_sat_feats: bool = True   # fmllr/<split> of the held-out splits too (transcript-free)
    extra: frozenset[str] = frozenset()   # splits that are training data (their SAT features from
                                          # the transforms their transcripts gave, as train's)


@dataclass
class Split:
    name: str
    utts: Utterances
    text: dict[str, list[str]]
    transcribed: list[str]            # the utterances with words (each job builds their DAGs)
    prons: Prons
    failures: Failures

    def hours(self) -> float:
        """Audio hours of the utterances with a transcript (10 ms frames)."""
        return sum(self.utts.frames(u) for u in self.transcribed) / FRAMES_PER_HOUR

    def jobs(self, nj: int, workers: Workers | None, what: str | None = None) -> Jobs:
        """The split's utterances in ``nj`` jobs, each building its own DAGs."""
        return Jobs(self.utts, self.transcribed, self.prons, nj, workers, what or self.name)


def load_split(name: str, data: Path, lex: Lexicon, prons: dict[str, list[tuple[int, ...]]],
               oov: str | None) -> Split:
    """Frame counts (every job reads its own speakers' features and builds their DAGs:
    the parent's memory stays per-utterance metadata), transcripts with OOVs handled;
    empty or missing transcripts failed."""
    utts = load_utterances(data, in_memory=False)
    text, _ = map_oovs(utts.text, prons, oov, data / "text")
    failures = Failures()
    for utt in utts.missing_text:
        failures.add(utt, "no transcript")
    empty: list[str] = []
    with_words = transcribed(text, empty)
    for utt in empty:
        failures.add(utt, "empty transcript")
    return Split(name, utts, text, with_words, Prons(prons, lex.phones[lex.silence], oov),
                 failures)


def prepare_align(job: AlignJob) -> dict[str, Any]:
    """Train the ladder, align every split, write the alignment directory; the figures.

    Torch runs on one thread here: the work is many small products (one pdf's frames,
    one utterance), where a second OpenMP thread only waits; on 2 busy cores it made an
    EM pass 17x slower (0.29 s against 4.9 s for 100k frames, 500 pdfs of 8 Gaussians).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _prepare_align(job)
    finally:
        torch.set_num_threads(threads)


def _prepare_align(job: AlignJob) -> dict[str, Any]:
    check_out_path(job.out)
    lex = read_dict_dir(job.dict_dir, job.phones)
    workers: AbstractContextManager[Workers | None] = (
        nullcontext(None) if job.launch is None else Workers(job.launch))
    with workers as started:
        return _align_all(job, lex, started)


def _align_all(job: AlignJob, lex: Lexicon, workers: Workers | None) -> dict[str, Any]:
    """The ladder on the training split, every split aligned and written, the report."""
    names = {i: p for p, i in lex.phones.items()}
    phones = sorted(lex.phones.values())
    sil = lex.phones[lex.silence]
    prons = pron_table(lex)
    splits = {name: load_split(name, d, lex, prons, job.oov) for name, d in job.splits.items()}
    train = next(iter(splits.values()))
    report: dict[str, Any] = {"stages": {}, "splits": {}}
    ref = _reference(job.reference, lex) if job.reference else None
    cfg = job.config
    with train.jobs(cfg.nj, workers) as jobs:
        log.info("%d jobs (processes) of the training speakers", jobs.nj)
        rungs = _train(job, train, jobs, phones, sil, names, ref, report)
        from asrtrain.lang.lexicon import write_symbols

        # the ids of every ali.scp: written before them, so no split is ever without its table
        write_symbols(job.out / "phones.txt", {EPS: 0, **lex.phones})
        _align_split(job, train, rungs, jobs, names, ref, report)
        pdf_frames = jobs.pdf_frames(rungs[-1].pdfs.num_pdfs) if jobs.aligned else None
    transforms: dict[str, dict[str, np.ndarray]] = {train.name: dict(rungs[-1].front.fmllr)}
    for split in list(splits.values())[1:]:
        with split.jobs(cfg.nj, workers) as jobs:
            fmllr = _align_split(job, split, rungs, jobs, names, ref, report)
        if split.name in job.extra:
            transforms[split.name] = fmllr
    if rungs[-1].name == "sat" and pdf_frames is not None:
        clock = Clock()
        wanted = splits
        if not job.held_out_sat_feats:
            log.info("SAT features of the training data only (--no-held-out-sat-feats)")
            wanted = {n: s for n, s in splits.items() if n == train.name or n in job.extra}
        report["sat_fmllr"] = write_sat_features(job.out / "fmllr", rungs[-1], wanted,
                                                 transforms, pdf_frames, cfg.nj, workers)
        report["sat_fmllr_time"] = clock.figures(sum(s.hours() for s in wanted.values()))
    write_text(job.out / "report.json", json.dumps(report, indent=1) + "\n")
    return report


def write_sat_features(out: Path, sat: Rung, splits: dict[str, Split],
                       transforms: dict[str, dict[str, np.ndarray]], pdf_frames: np.ndarray,
                       nj: int, workers: Workers | None = None) -> dict[str, int]:
    """``out/<split>/feats.scp``: LDA+MLLT+fMLLR features from the SAT model; the splits in
    ``transforms`` (train: its SAT transforms; training copies: those their transcripts
    gave) with theirs, the others estimated without transcripts (in ``nj`` jobs of whole
    speakers: a speaker's EM against every Gaussian is the costly part), each job writing
    its speakers' features."""
    from asrtrain.align import sat_feats

    mixture = sat_feats.model_mixture(sat.model, pdf_frames)
    written = {}
    for split in splits.values():
        front = FrontEnd(deltas=False, context=sat.front.context, lda=sat.front.lda)
        with split.jobs(nj, workers, f"{split.name} SAT features") as jobs:
            if split.name in transforms:
                front.fmllr = dict(transforms[split.name])
            else:
                front.fmllr = jobs.held_out_fmllr(mixture, front)
                log.info("%s: SAT fMLLR of %d held-out speakers estimated in %d jobs",
                         split.name, len(front.fmllr), jobs.nj)
            written[split.name] = jobs.write_features(out / split.name, front)
    return written


def _train(job: AlignJob, train: Split, jobs: Jobs, phones: list[int], sil: int,
           names: dict[int, str], ref: Reference | None, report: dict[str, Any]) -> list[Rung]:
    """Every rung of the ladder on the training jobs; each saved, timed and measured."""
    rungs: list[Rung] = []
    for stage in job.config.stages:
        clock = Clock()
        rung = _climb(stage, train, rungs, jobs, phones, sil, job.config)
        rungs.append(rung)
        save_rung(job.out / "models" / f"{stage}.pt", rung, names)
        figures: dict[str, Any] = {**clock.figures(train.hours()), "jobs": jobs.nj,
                                   "pdfs": rung.pdfs.num_pdfs,
                                   "gaussians": rung.model.num_gauss()}
        if ref is not None:
            figures["agreement"] = jobs.agreement(ref, train.name)
        report["stages"][stage] = figures
        log.info("%s: %s", stage, json.dumps(figures))
    return rungs


def _climb(stage: str, train: Split, rungs: list[Rung], jobs: Jobs, phones: list[int],
           sil: int, cfg: LadderConfig) -> Rung:
    if stage == "mono":
        return ladder.train_mono_subset(train.utts, jobs, phones, sil, cfg, train.failures)
    if not rungs:
        raise InputError(f"stage {stage!r} needs the stages before it (mono first)")
    if stage == "tri":
        return ladder.train_tri(rungs[-1], jobs, phones, sil, cfg, train.failures)
    if stage == "lda":
        return ladder.train_lda(train.utts, rungs[-1], jobs, cfg, train.failures)
    if stage == "sat":
        return ladder.train_sat(train.utts, rungs[-1], jobs, cfg, train.failures)
    raise InputError(f"unknown stage {stage!r} (stages: {', '.join(ladder.STAGES)})")


def _align_split(job: AlignJob, split: Split, rungs: list[Rung], jobs: Jobs,
                 names: dict[int, str], ref: Reference | None, report: dict[str, Any]
                 ) -> dict[str, np.ndarray]:
    """A split's final alignments, written, timed and measured; the speakers' fMLLR
    transforms they were made with (none below SAT)."""
    clock = Clock()
    is_train = split.name == next(iter(job.splits))
    fmllr = align_split(split, rungs, job.config, jobs, is_train)
    lost = _finish_split(job, split, jobs, names)
    figures = {"aligned": jobs.aligned, "lost": lost, **clock.figures(split.hours()),
               "jobs": jobs.nj}
    if split.name in job.extra:
        figures["training_copy"] = True
    if ref is not None and not is_train:
        figures["agreement"] = jobs.agreement(ref, split.name)
    report["splits"][split.name] = figures
    return fmllr


def align_split(split: Split, rungs: list[Rung], cfg: LadderConfig, jobs: Jobs, is_train: bool
                ) -> dict[str, np.ndarray]:
    """Final alignments of a split with the last rung (fMLLR first where it is SAT), held
    by the jobs; the speakers' transforms they used (Kaldi's ``align_fmllr.sh``: from the
    speaker-independent pass's alignment of the transcripts)."""
    last = rungs[-1]
    if last.name == "sat" and not is_train:
        si = rungs[-2]
        jobs.use_front(si.front)
        jobs.realign(si.model, si.pdfs, si.trans, cfg.beams, split.failures,
                     f"{split.name}: speaker-independent pass", keep_previous=False)
        front = FrontEnd(deltas=False, context=last.front.context, lda=last.front.lda)
        front.fmllr = jobs.fmllr(last.model, front, {})
        jobs.use_front(front)
    else:
        front = last.front
        jobs.use_front(front)
    jobs.realign(last.model, last.pdfs, last.trans, cfg.beams, split.failures,
                 f"{split.name}: final alignment", keep_previous=False)
    return dict(front.fmllr)


def _finish_split(job: AlignJob, split: Split, jobs: Jobs, names: dict[int, str]
                  ) -> dict[str, int]:
    """Write the split, or refuse it when too much was lost (the list is written either way)."""
    lost = split.failures.counts()
    total = len(split.utts.feats) + len(split.utts.missing_text)
    n_lost = sum(lost.values())
    if n_lost:
        log.warning("%s: %d of %d utterances not aligned: %s (listed in %s)", split.name,
                    n_lost, total, ", ".join(f"{r}: {n}" for r, n in sorted(lost.items())),
                    job.out / split.name / "failed.txt")
    if n_lost > job.max_lost * total:
        (job.out / split.name).mkdir(parents=True, exist_ok=True)
        write_text(job.out / split.name / "failed.txt",
                   "".join(f"{u} {r}\n" for u, r in sorted(split.failures.reasons.items())))
        raise InputError(f"{n_lost} of {total} utterances of {split.name} could not be aligned "
                         f"(more than --max-lost {job.max_lost:g}); see "
                         f"{job.out / split.name / 'failed.txt'}", job.splits[split.name])
    jobs.write_alignments(job.out, split.name, names, split.text, split.failures.reasons)
    return lost


def save_rung(path: Path, rung: Rung, names: dict[int, str]) -> None:
    """A rung's model, pdfs, transitions and front end (for realigning, fMLLR, inspection)."""
    from asrtrain.core.atomic import atomic_open
    from asrtrain.lang.tree import ContextTree

    path.parent.mkdir(parents=True, exist_ok=True)
    tree = getattr(rung.pdfs, "tree", None)
    state = {"name": rung.name, "model": rung.model.state_dict(),
             "pdf_info": rung.pdfs.info(), "phones": names,
             "tree": tree.to_json() if isinstance(tree, ContextTree) else None,
             "self_loop": {f"{p} {s}": v for (p, s), v in rung.trans.self_loop.items()},
             "front": {"deltas": rung.front.deltas, "context": rung.front.context,
                       "lda": None if rung.front.lda is None else rung.front.lda.tolist(),
                       "fmllr": {k: v.tolist() for k, v in rung.front.fmllr.items()}}}
    with atomic_open(path, "wb") as fh:
        torch.save(state, fh)


def _reference(root: Path, lex: Lexicon) -> Reference:
    from asrtrain.lang.lexicon import read_symbols

    ids = read_symbols(root / "phones.txt")
    if any(ids.get(p) != i for p, i in lex.phones.items()):
        raise InputError("the reference's phone ids differ from the alignment's: pass its "
                         "phones.txt with --phones", root / "phones.txt")
    return Reference(root, ids, lex.phones[lex.silence])


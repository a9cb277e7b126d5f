"""One alignment job's side: its share of the utterances, and the calls it answers.

A job is a :class:`Shard`: its speakers' MFCC and transcripts (read by the job itself),
their DAGs (built by the job from the lexicon's pronunciations, never by the parent),
features under the current front end (one float32 matrix, ``frames.FrameBlock``) and
alignments, kept in memory across iterations; the parent gets counts and statistics
from them, never the alignments (``ali_parts``). The parent
(``parallel.Jobs``) sends ``(key, method, args)``; :func:`serve` looks ``method`` up on
the shard (the shard's methods are the whole protocol, so nothing above is named in
a message) and answers with the result. A forkserver job starts in
:func:`serve_forked`; a job on another host (``remote.run_worker``) is told a
:class:`Share` and reads its features and transcripts itself. Nothing here imports the parent's side.
"""

from __future__ import annotations

import logging
import pickle
import time
import traceback
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrtrain.adapt.gmm import DiagGMM
from asrtrain.adapt.lda import LdaStats
from asrtrain.align import ali_parts
from asrtrain.align.am import AcousticModel, GmmStats
from asrtrain.align.corpus import Beams, Corpus, Counts, Failures, Realigned, accumulate, realign
from asrtrain.align.evaluate import Agreement, Reference
from asrtrain.align.feats import FrontEnd, Utterances, load_utterances
from asrtrain.align.frames import FrameBlock
from asrtrain.align.front_stats import estimate_fmllr, lda_stats, mllt_stats
from asrtrain.align.graph import PhoneDag
from asrtrain.align.hmm import MonoPdfs, Transitions, TreePdfs
from asrtrain.align.transcripts import Prons
from asrtrain.core.errors import AsrtrainError
from asrtrain.core.malloc import peak_mb, release_memory
from asrtrain.lang.hmm import Topology
from asrtrain.lang.questions import ContextStats

log = logging.getLogger("asrtrain.align")


@dataclass
class Share:
    """What one job is told: its data dir, its utterances in order, those with words (in
    that order: the ones it aligns) and the pronunciations it builds their DAGs from; no
    DAGs (the parent builds none: 10 KB an utterance)."""

    data: Path
    utts: list[str]
    transcribed: list[str]
    prons: Prons

    def dags(self, utts: Utterances) -> dict[str, PhoneDag]:
        """The DAGs of the utterances with words, from their transcripts in ``utts``."""
        return self.prons.dags(utts.text, self.transcribed, self.data / "text")


class Shard:
    """One job's utterances and what each iteration asks of them (runs in its process)."""

    def __init__(self, utts: Utterances, dags: dict[str, PhoneDag], progress: bool) -> None:
        self.utts = utts
        self.corpus = Corpus({}, dags)
        self.failures = Failures()
        self.progress = progress      # show a bar per pass (only in the parent's process)

    @classmethod
    def load(cls, share: Share) -> Shard:
        """A remote job's shard: its utterances' features read here, by the parent's code,
        in the parent's order (the order of float sums)."""
        utts = _read(share)
        log.info("align-worker: %d utterances of %d speakers, %d frames, from %s",
                 len(share.utts), len(utts.speakers()),
                 sum(utts.frames(u) for u in share.utts), share.data)
        return cls(utts, share.dags(utts), False)

    @classmethod
    def of(cls, share: Share, progress: bool, utts: Utterances | None = None) -> Shard:
        """A local or forkserver job's shard: its features read here (the parent holds
        only frame counts) unless given in memory, its DAGs built here."""
        utts = _read(share) if utts is None else utts
        return cls(utts, share.dags(utts), progress)

    def use_front(self, front: FrontEnd) -> None:
        """The features under ``front``, in one float32 matrix (the old one reused)."""
        old = self.corpus.feats
        self.corpus.feats = FrameBlock.build(
            self.corpus.dags, self.utts.frames,
            lambda u: front.apply(self.utts.feats[u], self.utts.utt2spk[u]),
            front.dim(self.utts.dim), old if isinstance(old, FrameBlock) else None)

    def global_sums(self) -> tuple[int, torch.Tensor, torch.Tensor]:
        n, s, ss = 0, torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.float64)
        for m in self.corpus.feats.values():
            x = torch.from_numpy(m).to(torch.float64)
            n, s, ss = n + x.shape[0], s + x.sum(0), ss + (x * x).sum(0)
        return n, s, ss

    # --- the alignments: held here, never sent whole (see ali_parts) ---
    def equal_alignments(self, pdfs: MonoPdfs) -> list[str]:
        self.corpus.alignments, short = ali_parts.equal_alignments(self.corpus.dags,
                                                                   self.utts.frames, pdfs)
        return short

    def relabel(self, pdfs: MonoPdfs | TreePdfs) -> None:
        ali_parts.relabel(self.corpus.alignments, pdfs)

    def moves(self, num_states: dict[int, int]) -> dict[int, np.ndarray]:
        return ali_parts.moves(self.corpus.alignments, num_states)

    def contexts(self, topo: Topology) -> Counter:
        return ali_parts.contexts(self.corpus.alignments, topo)

    def context_stats(self) -> ContextStats:
        return ali_parts.context_stats(self.corpus.alignments, self.corpus.feats)

    def pdf_frames(self, num_pdfs: int) -> np.ndarray:
        return ali_parts.pdf_frames(self.corpus.alignments, num_pdfs)

    def agreement(self, ref: Reference, split: str) -> Agreement | None:
        return ref.measure(self.corpus.alignments, split)

    def write_alignments(self, out: Path, split: str, part: int, names: dict[int, str]) -> None:
        from asrtrain.align.output import write_part

        write_part(out, split, part, self.corpus.alignments, names)

    def realign(self, model: dict, pdfs: MonoPdfs | TreePdfs, trans: Transitions, beams: Beams,
                keep_previous: bool, what: str) -> tuple[int, dict[str, str], Realigned]:
        got, counts = realign(self.corpus, AcousticModel.from_state(model), pdfs, trans, beams,
                              self.failures, what if self.progress else None, keep_previous)
        self.corpus.alignments = got
        return len(got), dict(self.failures.reasons), counts

    def accumulate(self, model: dict) -> tuple[GmmStats, Counts, Counts]:
        return accumulate(AcousticModel.from_state(model), self.corpus)

    def lda_stats(self, num_pdfs: int, context: int) -> LdaStats:
        return lda_stats(self.utts, self.corpus.alignments, num_pdfs, context)

    def mllt_stats(self, model: dict) -> tuple[torch.Tensor, float]:
        return mllt_stats(AcousticModel.from_state(model), self.corpus)

    def fmllr(self, model: dict, front: FrontEnd, current: dict[str, np.ndarray]
              ) -> dict[str, np.ndarray]:
        return estimate_fmllr(AcousticModel.from_state(model), self.utts, front,
                              self.corpus.alignments, current)

    def held_out_fmllr(self, mixture: DiagGMM, front: FrontEnd) -> dict[str, np.ndarray]:
        from asrtrain.align.sat_feats import held_out_transforms

        return held_out_transforms(mixture, self.utts, front)

    def write_features(self, out: Path, front: FrontEnd, part: int) -> dict[str, str]:
        from asrtrain.align.sat_feats import write_part

        return write_part(out, self.utts, front, part)


def _read(share: Share) -> Utterances:
    return load_utterances(share.data, only=set(share.utts)).subset(share.utts)


def serve_forked(conn: Any, share: Share, utts: Utterances | None) -> None:
    """A forkserver worker: read its features and build its DAGs (see ``Shard.of``), then
    answer the parent's calls on its shard until it closes the pipe."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's: it ends the jobs
    torch.set_num_threads(1)   # many small products: a second thread only waits (DESIGN.md)
    try:
        shard = Shard.of(share, False, utts)
    except BaseException as exc:  # noqa: BLE001 - told to the parent at its first call
        _refuse(conn, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        return
    serve(conn, {0: shard})


def _refuse(conn: Any, detail: str) -> None:
    """Answer every call with the error that kept this job from starting."""
    while True:
        try:
            conn.recv()
        except EOFError:
            return
        conn.send(("error", detail, time.process_time(), peak_mb()))


def serve(conn: Any, shards: dict[int, Shard],
          during: Callable[[], AbstractContextManager[Any]] = nullcontext,
          remote: bool = False) -> None:
    """Answer ``(key, method, args)`` calls on ``shards[key]`` until the parent closes the
    connection. A remote job holds one shard per ``Jobs`` of the parent: ``load`` reads
    one, ``drop`` frees it. ``during()`` wraps each call (a remote job's watch on its
    parent). A failure is answered, not raised: with its traceback for a forkserver
    job, whose parent prints it; a remote job writes the traceback to its log and
    answers one line. A remote job answers in plain pickles: ``Connection.send`` would
    pass torch tensors as shared-memory handles, which mean nothing on another host."""
    def send(answer: tuple[str, Any, float, float]) -> None:
        if remote:
            conn.send_bytes(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
        else:
            conn.send(answer)

    while True:
        try:
            key, method, args = conn.recv()
        except EOFError:
            return
        try:
            with during():
                result = _one_call(shards, key, method, args)
            release_memory()     # what the call freed, back before the next (core/malloc.py)
            send(("ok", result, time.process_time(), peak_mb()))
        except BaseException as exc:  # noqa: BLE001 - the parent raises it with the job named
            if not remote:
                detail = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
            elif isinstance(exc, AsrtrainError):
                detail = str(exc)
            else:
                log.error("%s failed:\n%s", method, traceback.format_exc())
                detail = f"{type(exc).__name__}: {exc}"
            send(("error", detail, time.process_time(), peak_mb()))


def _one_call(shards: dict[int, Shard], key: int, method: str, args: tuple) -> Any:
    if method == "load":
        shards[key] = Shard.load(*args)
        return len(shards[key].corpus.dags)
    if method == "drop":
        del shards[key]
        return None
    return getattr(shards[key], method)(*args)

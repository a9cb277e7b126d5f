"""Alignment jobs: the speakers split into N jobs, each held by a process of its own.

Kaldi splits the data with ``split_data.sh --per-spk``, runs ``compile-train-graphs``,
``gmm-align-compiled`` and ``gmm-acc-stats-ali`` per job and sums the statistics
(``gmm-sum-accs``) before ``gmm-est``. Here a job is a ``shard.Shard`` that keeps its
speakers' MFCC, transcript DAGs, features under the current front end and alignments in
memory across iterations; the parent sends it the model and gets back alignments or
statistics, sums them and updates. The parent holds no features (only frame counts) and
no DAGs (only which utterances have words): each job reads its own features and
transcripts and builds its own DAGs. A speaker is wholly in one job, so its fMLLR is
estimated there too. With one job the shard lives in the calling process (nothing
pickled): ``--nj 1`` is the single-process run, and ``--nj N`` differs from it only in
the order of float sums.

Workers are ``forkserver`` processes (as the synthesizer's) talking through one pipe
each (no queues: their semaphores outlive a killed process group), torch on one thread.
With ``--job-cmd`` they are processes on other hosts, started by a job command and
connected over TCP (``remote.py``); they read their speakers' features themselves and
answer the same calls, so ``Jobs`` and the ladder do not know the difference.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from asrtrain.adapt.gmm import DiagGMM
from asrtrain.adapt.lda import LdaStats
from asrtrain.align.ali_parts import add_counts
from asrtrain.align.am import AcousticModel, GmmStats
from asrtrain.align.corpus import Beams, Counts, Failures, Realigned
from asrtrain.align.evaluate import Reference, agreement
from asrtrain.align.feats import DiskFeats, FrontEnd, Utterances
from asrtrain.align.hmm import MonoPdfs, Transitions, TreePdfs
from asrtrain.align.remote import Workers
from asrtrain.align.shard import Shard, Share, serve_forked
from asrtrain.align.transcripts import Prons
from asrtrain.core.errors import AsrtrainError
from asrtrain.core.malloc import peak_mb, release_memory
from asrtrain.lang.hmm import Topology
from asrtrain.lang.questions import ContextStats

log = logging.getLogger("asrtrain.align")


def split_speakers(utts: Utterances, nj: int) -> list[list[str]]:
    """Utterances in ``nj`` jobs, each speaker wholly in one, jobs balanced by frames
    (``data.speaker_jobs``: the rule of every per-speaker ``--nj``)."""
    from asrtrain.data.speaker_jobs import speaker_jobs

    return speaker_jobs(utts.feats, utts.utt2spk, utts.frames, nj)


class JobHandle(Protocol):
    """What ``Jobs`` holds of a job: a forkserver process or a remote one."""

    conn: Any
    cpu: float

    def lost(self) -> str: ...

    def failed(self, message: str) -> str: ...

    def end(self, grace: float = 10.0) -> None: ...


@dataclass
class _Remote:
    """A forkserver job."""

    conn: Any
    proc: Any
    name: str
    cpu: float = 0.0

    def lost(self) -> str:
        self.proc.join(timeout=5)
        return f"{self.name} died (exit status {self.proc.exitcode})"

    def failed(self, message: str) -> str:
        return f"{self.name}: {message}"

    def end(self, grace: float = 10.0) -> None:
        self.proc.join(timeout=grace)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join()


class Jobs:
    """The parent's side: every call goes to each job; the answers are merged here.

    The alignments stay in the jobs (``aligned`` counts them): the parent sums what the
    tree, the topology and the report need, and the jobs write them. ``cpu_seconds``
    counts the workers' CPU time (the parent's own is ``time.process_time()``), ``peak_mb``
    the largest peak resident memory any worker has reported (what one job needs)."""

    cpu_seconds = 0.0   # all workers of all Jobs, finished or not
    peak_mb = 0.0

    def __init__(self, utts: Utterances, transcribed: list[str], prons: Prons, nj: int,
                 workers: Workers | None = None, what: str = "") -> None:
        self.transcribed = transcribed   # the utterances with words: the jobs align them
        self.prons = prons
        self.workers = workers
        self.data, self.order = utts.data, list(utts.feats)
        shares = [utts.subset(part) for part in split_speakers(utts, nj)]
        self.parts = [[u for u in transcribed if u in share.feats] for share in shares]
        self.aligned = 0              # utterances with an alignment, all jobs
        self._local: Shard | None = None
        self._remote: list[JobHandle] = []
        self._key = 0                 # which of a remote job's shards these are
        if workers is not None:   # even one job: the features are there, not here
            self._key, remote = workers.start(len(shares), what)
            self._remote = list(remote)
            for i, (share, part) in enumerate(zip(shares, self.parts, strict=True)):
                self._send(i, self._message("load", self._share(share, part)))
            self._gather()
        elif len(shares) == 1:
            self._local = Shard.of(self._share(shares[0], self.parts[0]), True,
                                   _in_memory(shares[0]))
        else:
            self._start(shares)

    @property
    def nj(self) -> int:
        return len(self.parts)

    def spawn(self, utts: Utterances, transcribed: list[str], nj: int, what: str) -> Jobs:
        """Jobs of other utterances, run where these run."""
        return Jobs(utts, transcribed, self.prons, nj, self.workers, what)

    def _share(self, share: Utterances, part: list[str]) -> Share:
        """What a job is told: where its features and transcripts are (read there, not
        held here), which of them to align, the pronunciations of their words."""
        words = (w for u in part for w in share.text[u])
        return Share(share.data, list(share.feats), part, self.prons.only(words))

    def _start(self, shares: list[Utterances]) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["asrtrain.align.shard"])
        for share, part in zip(shares, self.parts, strict=True):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=serve_forked,
                               args=(child, self._share(share, part), _in_memory(share)),
                               daemon=True)
            proc.start()
            child.close()
            self._remote.append(_Remote(parent, proc,
                                        f"alignment job {len(self._remote) + 1} of {self.nj}"))

    def call(self, method: str, *args: Any) -> list[Any]:
        """``method(*args)`` on every job's shard (all at once); the answers in job order."""
        if self._local is not None:
            answer = getattr(self._local, method)(*args)
            release_memory()     # as a job does after each call (shard.serve)
            return [answer]
        if self.workers is not None:
            self.workers.check()
        message = self._message(method, *args)
        for i in range(self.nj):
            self._send(i, message)     # pickled once for all (the model is large)
        return self._gather()

    def _message(self, method: str, *args: Any) -> bytes:
        return pickle.dumps((self._key, method, args), protocol=pickle.HIGHEST_PROTOCOL)

    def _gather(self) -> list[Any]:
        return [self._answer(i) for i in range(self.nj)]

    def _send(self, i: int, message: bytes) -> None:
        job = self._remote[i]
        try:
            job.conn.send_bytes(message)
        except OSError:
            raise AsrtrainError(job.lost()) from None

    def _answer(self, i: int) -> Any:
        job = self._remote[i]
        try:
            kind, payload, cpu, peak = job.conn.recv()
        except (EOFError, OSError):
            raise AsrtrainError(job.lost()) from None
        Jobs.cpu_seconds += cpu - job.cpu
        Jobs.peak_mb = max(Jobs.peak_mb, peak)
        job.cpu = cpu
        if kind == "error":
            raise AsrtrainError(job.failed(payload))
        return payload

    def close(self, failed: bool = False) -> None:
        """End the jobs; a remote job only frees these shards (it serves the next
        ``Jobs`` too), unless something failed: then ``Workers`` ends it."""
        if self.workers is not None:
            if not failed:
                self.call("drop")
        else:
            for job in self._remote:
                job.conn.close()
            for job in self._remote:
                job.end()
        self._remote = []

    def __enter__(self) -> Jobs:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(failed=exc_type is not None)

    # --- what the ladder asks, merged ---
    def use_front(self, front: FrontEnd) -> None:
        """Every job's features from its MFCC under ``front`` (a new rung, MLLT, fMLLR)."""
        self.call("use_front", front)

    def global_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and variance of every frame under the current front end (float64)."""
        sums = self.call("global_sums")
        n = sum(s[0] for s in sums)
        mean = sum(s[1] for s in sums) / n
        return mean, sum(s[2] for s in sums) / n - mean * mean

    def equal_alignments(self, pdfs: MonoPdfs) -> list[str]:
        """Every job's equal alignments (``ali_parts.equal_alignments``); the utterances
        too short for them."""
        short = [u for part in self.call("equal_alignments", pdfs) for u in part]
        self.aligned = len(self.transcribed) - len(short)
        return short

    def relabel(self, pdfs: MonoPdfs | TreePdfs) -> None:
        """Every frame of the jobs' alignments given its pdf under ``pdfs``."""
        self.call("relabel", pdfs)

    def topology(self, num_states: dict[int, int]) -> Topology:
        """The topology from the jobs' alignments (their moves summed)."""
        from asrtrain.lang.hmm import topology_from_moves

        moves: dict[int, np.ndarray] = {}
        for part in self.call("moves", num_states):
            add_counts(moves, part)
        return topology_from_moves(moves, num_states)

    def contexts(self, topo: Topology) -> Counter:
        """Frames per (left, phone, right, state) of the jobs' alignments, summed."""
        total: Counter = Counter()
        for part in self.call("contexts", topo):
            add_counts(total, part)
        return total

    def context_stats(self) -> ContextStats:
        """Frames, sums and squares per (left, phone, right, state) under the current front
        end, the jobs' summed (Kaldi's acc-tree-stats and sum-tree-stats)."""
        parts = self.call("context_stats")
        return ContextStats.total(parts, parts[0].sx.shape[1])

    def pdf_frames(self, num_pdfs: int) -> np.ndarray:
        return sum(self.call("pdf_frames", num_pdfs))

    def agreement(self, ref: Reference, split: str) -> dict[str, float]:
        """The jobs' alignments against the reference's (``evaluate.agreement``)."""
        return agreement(self.call("agreement", ref, split))

    def write_alignments(self, out: Path, split: str, names: dict[int, str],
                         text: dict[str, list[str]], failed: dict[str, str]) -> int:
        """The split's alignment tables: each job writes its part, then the merged scp
        files (``output.write_split``); the utterances written."""
        from asrtrain.align.output import write_split

        if self._local is not None:
            self._local.write_alignments(out, split, 1, names)
        else:
            for i in range(self.nj):
                self._send(i, self._message("write_alignments", out, split, i + 1, names))
            self._gather()
        return write_split(out, split, self.nj, text, failed)

    def realign(self, model: AcousticModel, pdfs: MonoPdfs | TreePdfs, trans: Transitions,
                beams: Beams, failures: Failures, what: str, keep_previous: bool = True) -> None:
        """Realign every job (see ``corpus.realign``); ``failures`` gets each job's reasons."""
        got = self.call("realign", model.state_dict(), pdfs, trans, beams, keep_previous, what)
        total = Realigned()
        self.aligned = 0
        for part, (aligned, reasons, counts) in zip(self.parts, got, strict=True):
            self.aligned += aligned
            for utt in part:
                failures.reasons.pop(utt, None)
            failures.reasons.update(reasons)
            total += counts
        total.log(what, beams)

    def accumulate(self, model: AcousticModel) -> tuple[GmmStats, Counts, Counts]:
        """Statistics under the current alignments, summed over jobs (``gmm-sum-accs``)."""
        got = self.call("accumulate", model.state_dict())
        stats, frames, visits = got[0]
        for s, f, v in got[1:]:
            stats.occ += s.occ
            stats.sx += s.sx
            stats.sxx += s.sxx
            stats.loglike += s.loglike
            stats.frames += s.frames
            for into, add in ((frames, f), (visits, v)):
                for key, n in add.items():
                    into[key] = into.get(key, 0) + n
        return stats, frames, visits

    def lda_stats(self, num_pdfs: int, context: int) -> LdaStats:
        """LDA's class statistics of the spliced MFCC under the alignments, summed."""
        got = self.call("lda_stats", num_pdfs, context)
        total = got[0]
        for stats in got[1:]:
            total.counts += stats.counts
            total.sums += stats.sums
            total.scatter += stats.scatter
        return total

    def mllt_stats(self, model: AcousticModel) -> tuple[torch.Tensor, float]:
        got = self.call("mllt_stats", model.state_dict())
        return sum(g for g, _ in got), sum(b for _, b in got)

    def fmllr(self, model: AcousticModel, front: FrontEnd, current: dict[str, np.ndarray]
              ) -> dict[str, np.ndarray]:
        """Every speaker's fMLLR (each job's own speakers), see ``front_stats.estimate_fmllr``."""
        return _merged(self.call("fmllr", model.state_dict(), front, current))

    def held_out_fmllr(self, mixture: DiagGMM, front: FrontEnd) -> dict[str, np.ndarray]:
        """Every speaker's fMLLR without transcripts, see ``sat_feats.held_out_transforms``."""
        return _merged(self.call("held_out_fmllr", mixture, front))


    def write_features(self, out: Path, front: FrontEnd) -> int:
        """Every utterance's features under ``front``: each job writes its own ark (in
        parallel: a large corpus' features are too many to write from one process),
        then ``out/feats.scp`` in the data dir's order, once every part is complete."""
        from asrtrain.align.sat_feats import write_scp

        (out / "feats.scp").unlink(missing_ok=True)   # never pointing into arks being rewritten
        if self._local is not None:
            parts = [self._local.write_features(out, front, 1)]
        else:
            for i in range(self.nj):
                self._send(i, self._message("write_features", out, front, i + 1))
            parts = self._gather()
        entries = {u: where for part in parts for u, where in part.items()}
        return write_scp(out, self.data, [(u, entries[u]) for u in self.order])


def _in_memory(share: Utterances) -> Utterances | None:
    """A job's features where the caller holds them in memory (else the job reads them)."""
    return None if isinstance(share.feats, DiskFeats) else share


def _merged(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: v for part in parts for k, v in part.items()}


class Clock:
    """Wall and CPU seconds since it was made: every alignment job's CPU (workers report
    theirs with each answer) and this process's, so a report can say CPU seconds per
    hour of audio whatever ``--nj`` was, and how much of it stayed serial here; and the
    peak memory of a job and of this process so far (a stage that raises them is the one
    that needs it: what a cluster job must be given)."""

    def __init__(self) -> None:
        self.wall = time.time()
        self.own = time.process_time()
        self.jobs = Jobs.cpu_seconds

    def figures(self, hours: float) -> dict[str, float]:
        own = time.process_time() - self.own
        return {"seconds": round(time.time() - self.wall, 1),
                "cpu_seconds": round(own + Jobs.cpu_seconds - self.jobs, 1),
                "parent_cpu_seconds": round(own, 1), "audio_hours": round(hours, 4),
                "job_peak_mb": round(Jobs.peak_mb, 1), "parent_peak_mb": round(peak_mb(), 1)}

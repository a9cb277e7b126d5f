"""Alignment jobs: the speakers split into N jobs, each held by a process of its own.

Kaldi splits the data with ``split_data.sh --per-spk``, runs ``gmm-align-compiled`` and
``gmm-acc-stats-ali`` per job and sums the statistics (``gmm-sum-accs``) before
``gmm-est``. Here a job is a :class:`Shard` that keeps its speakers' MFCC, transcript
DAGs, features under the current front end and alignments in memory across iterations;
the parent sends it the model and gets back alignments or statistics, sums them and
updates. A speaker is wholly in one job, so its fMLLR is estimated there too. With one
job the shard lives in the calling process (nothing pickled): ``--nj 1`` is the
single-process run, and ``--nj N`` differs from it only in the order of float sums.

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
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from asrtrain.adapt.gmm import DiagGMM
from asrtrain.adapt.lda import LdaStats
from asrtrain.align.aligner import Alignment
from asrtrain.align.am import AcousticModel, GmmStats
from asrtrain.align.feats import FrontEnd, Utterances
from asrtrain.align.graph import PhoneDag
from asrtrain.align.hmm import MonoPdfs, Transitions, TreePdfs
from asrtrain.align.remote import Share, Workers
from asrtrain.align.train import Beams, Corpus, Failures, Realigned, accumulate, realign
from asrtrain.core.errors import AsrtrainError

log = logging.getLogger("asrtrain.align")

Counts = dict[tuple[int, int], int]


def split_speakers(utts: Utterances, nj: int) -> list[list[str]]:
    """Utterances in ``nj`` jobs, each speaker wholly in one, jobs balanced by frames
    (heaviest speaker first to the lightest job); each job keeps the utterances' order."""
    frames: dict[str, int] = {}
    for utt in utts.feats:
        spk = utts.utt2spk[utt]
        frames[spk] = frames.get(spk, 0) + utts.frames(utt)
    load = [0] * max(1, min(nj, len(frames)))
    job_of: dict[str, int] = {}
    for spk in sorted(frames, key=lambda s: (-frames[s], s)):
        j = load.index(min(load))
        job_of[spk] = j
        load[j] += frames[spk]
    return [[u for u in utts.feats if job_of[utts.utt2spk[u]] == j] for j in range(len(load))]


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
        from asrtrain.align.feats import load_utterances

        utts = load_utterances(share.data, only=set(share.utts)).subset(share.utts)
        log.info("align-worker: %d utterances of %d speakers, %d frames, from %s",
                 len(share.utts), len(utts.speakers()),
                 sum(utts.frames(u) for u in share.utts), share.data)
        return cls(utts, share.dags, False)

    def use_front(self, front: FrontEnd) -> None:
        self.corpus.feats = {u: front.apply(self.utts.feats[u], self.utts.utt2spk[u])
                             for u in self.corpus.dags}

    def global_sums(self) -> tuple[int, torch.Tensor, torch.Tensor]:
        n, s, ss = 0, torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.float64)
        for m in self.corpus.feats.values():
            x = torch.from_numpy(m).to(torch.float64)
            n, s, ss = n + x.shape[0], s + x.sum(0), ss + (x * x).sum(0)
        return n, s, ss

    def set_alignments(self, alignments: dict[str, Alignment]) -> None:
        self.corpus.alignments = alignments

    def realign(self, model: dict, pdfs: MonoPdfs | TreePdfs, trans: Transitions, beams: Beams,
                keep_previous: bool, what: str
                ) -> tuple[dict[str, Alignment], dict[str, str], Realigned]:
        got, counts = realign(self.corpus, AcousticModel.from_state(model), pdfs, trans, beams,
                              self.failures, what if self.progress else None, keep_previous)
        self.corpus.alignments = got
        return got, dict(self.failures.reasons), counts

    def accumulate(self, model: dict) -> tuple[GmmStats, Counts, Counts]:
        return accumulate(AcousticModel.from_state(model), self.corpus)

    def lda_stats(self, num_pdfs: int, context: int) -> LdaStats:
        from asrtrain.align.ladder import lda_stats

        return lda_stats(self.utts, self.corpus.alignments, num_pdfs, context)

    def mllt_stats(self, model: dict) -> tuple[torch.Tensor, float]:
        from asrtrain.align.ladder import mllt_stats

        return mllt_stats(AcousticModel.from_state(model), self.corpus)

    def fmllr(self, model: dict, front: FrontEnd, current: dict[str, np.ndarray]
              ) -> dict[str, np.ndarray]:
        from asrtrain.align.ladder import estimate_fmllr

        return estimate_fmllr(AcousticModel.from_state(model), self.utts, front,
                              self.corpus.alignments, current)

    def held_out_fmllr(self, mixture: DiagGMM, front: FrontEnd) -> dict[str, np.ndarray]:
        from asrtrain.align.sat_feats import held_out_transforms

        return held_out_transforms(mixture, self.utts, front)

    def write_features(self, out: Path, front: FrontEnd, part: int) -> dict[str, str]:
        from asrtrain.align.sat_feats import write_part

        return write_part(out, self.utts, front, part)


def _serve(conn: Any, utts: Utterances, dags: dict[str, PhoneDag]) -> None:
    """A forkserver worker: answer the parent's calls on its shard until it closes the pipe."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's: it ends the jobs
    torch.set_num_threads(1)   # many small products: a second thread only waits (DESIGN.md)
    serve(conn, {0: Shard(utts, dags, False)})


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
    def send(answer: tuple[str, Any, float]) -> None:
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
            send(("ok", result, time.process_time()))
        except BaseException as exc:  # noqa: BLE001 - the parent raises it with the job named
            if not remote:
                detail = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
            elif isinstance(exc, AsrtrainError):
                detail = str(exc)
            else:
                log.error("%s failed:\n%s", method, traceback.format_exc())
                detail = f"{type(exc).__name__}: {exc}"
            send(("error", detail, time.process_time()))


def _one_call(shards: dict[int, Shard], key: int, method: str, args: tuple) -> Any:
    if method == "load":
        shards[key] = Shard.load(*args)
        return len(shards[key].corpus.dags)
    if method == "drop":
        del shards[key]
        return None
    return getattr(shards[key], method)(*args)


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

    ``alignments`` is the parent's copy of every job's current alignments (the tree,
    LDA and the output read it); ``cpu_seconds`` counts the workers' CPU time (the
    parent's own is ``time.process_time()``)."""

    cpu_seconds = 0.0   # all workers of all Jobs, finished or not

    def __init__(self, utts: Utterances, dags: dict[str, PhoneDag], nj: int,
                 workers: Workers | None = None, what: str = "") -> None:
        self.dags = dags
        self.workers = workers
        self.data, self.order = utts.data, list(utts.feats)
        shares = [utts.subset(part) for part in split_speakers(utts, nj)]
        self.parts = [[u for u in dags if u in share.feats] for share in shares]
        self.alignments: dict[str, Alignment] = {}
        self._local: Shard | None = None
        self._remote: list[JobHandle] = []
        self._key = 0                 # which of a remote job's shards these are
        if workers is not None:   # even one job: the features are there, not here
            self._key, remote = workers.start(len(shares), what)
            self._remote = list(remote)
            for i, (share, part) in enumerate(zip(shares, self.parts, strict=True)):
                self._send(i, self._message("load", Share(utts.data, list(share.feats),
                                                          {u: dags[u] for u in part})))
            self._gather()
        elif len(shares) == 1:
            self._local = Shard(shares[0], dags, True)
        else:
            self._start(shares)

    @property
    def nj(self) -> int:
        return len(self.parts)

    def spawn(self, utts: Utterances, dags: dict[str, PhoneDag], nj: int, what: str) -> Jobs:
        """Jobs of other utterances, run where these run."""
        return Jobs(utts, dags, nj, self.workers, what)

    def _start(self, shares: list[Utterances]) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["asrtrain.align.parallel"])
        for share, part in zip(shares, self.parts, strict=True):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(child, share, {u: self.dags[u] for u in part}),
                               daemon=True)
            proc.start()
            child.close()
            self._remote.append(_Remote(parent, proc,
                                        f"alignment job {len(self._remote) + 1} of {self.nj}"))

    def call(self, method: str, *args: Any) -> list[Any]:
        """``method(*args)`` on every job's shard (all at once); the answers in job order."""
        if self._local is not None:
            return [getattr(self._local, method)(*args)]
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

    def _one(self, i: int, method: str, *args: Any) -> Any:
        """``method(*args)`` on job ``i`` alone."""
        if self._local is not None:
            return getattr(self._local, method)(*args)
        self._send(i, self._message(method, *args))
        return self._answer(i)

    def _answer(self, i: int) -> Any:
        job = self._remote[i]
        try:
            kind, payload, cpu = job.conn.recv()
        except (EOFError, OSError):
            raise AsrtrainError(job.lost()) from None
        Jobs.cpu_seconds += cpu - job.cpu
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

    def set_alignments(self, alignments: dict[str, Alignment]) -> None:
        """Alignments made or relabelled here, each job given its own."""
        self.alignments = alignments
        for i, part in enumerate(self.parts):
            mine = {u: alignments[u] for u in part if u in alignments}
            self._one(i, "set_alignments", mine)

    def realign(self, model: AcousticModel, pdfs: MonoPdfs | TreePdfs, trans: Transitions,
                beams: Beams, failures: Failures, what: str, keep_previous: bool = True) -> None:
        """Realign every job (see ``train.realign``); ``failures`` gets each job's reasons."""
        got = self.call("realign", model.state_dict(), pdfs, trans, beams, keep_previous, what)
        merged: dict[str, Alignment] = {}
        total = Realigned()
        for part, (alis, reasons, counts) in zip(self.parts, got, strict=True):
            merged.update(alis)
            for utt in part:
                failures.reasons.pop(utt, None)
            failures.reasons.update(reasons)
            total += counts
        self.alignments = {u: merged[u] for u in self.dags if u in merged}
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
        """Every speaker's fMLLR (each job's own speakers), see ``ladder.estimate_fmllr``."""
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


def _merged(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: v for part in parts for k, v in part.items()}


class Clock:
    """Wall and CPU seconds since it was made: every alignment job's CPU (workers report
    theirs with each answer) and this process's, so a report can say CPU seconds per
    hour of audio whatever ``--nj`` was, and how much of it stayed serial here."""

    def __init__(self) -> None:
        self.wall = time.time()
        self.own = time.process_time()
        self.jobs = Jobs.cpu_seconds

    def figures(self, hours: float) -> dict[str, float]:
        own = time.process_time() - self.own
        return {"seconds": round(time.time() - self.wall, 1),
                "cpu_seconds": round(own + Jobs.cpu_seconds - self.jobs, 1),
                "parent_cpu_seconds": round(own, 1), "audio_hours": round(hours, 4)}

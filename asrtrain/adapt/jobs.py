"""``--nj`` of the adaptation commands: their per-utterance and per-speaker work in jobs.

``prepare ivectors`` and ``prepare fmllr`` split a data dir's utterances into N jobs as
``prepare align`` does (``data.speaker_jobs``: a speaker wholly in one job, the jobs
balanced by frames). A job is a function of its utterances that reads their features
itself and returns what is small (statistics, transforms, scp entries of the ark it
wrote); the parent sums or merges the answers in job order. With one job the function
runs in the calling process: ``--nj 1`` is the single-process command. Otherwise each
job is a local ``forkserver`` process (as the aligner's and the synthesizer's; at most
one a core at a time), torch on one thread, its log in ``OUT/log/<stage>.<job>.log``; a
failed job ends the others and is one error line naming it and its log
(``core.workers``). With ``--job-cmd`` each job
is a command started by it, on any host (``adapt.job_cmd``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("asrtrain.adapt")

#: What the forkserver imports once, so that a job starts without importing anything.
PRELOAD = ("asrtrain.adapt.fmllr", "asrtrain.adapt.fmllr_jobs", "asrtrain.adapt.ivector",
           "asrtrain.adapt.ivector_jobs", "asrtrain.adapt.featio", "asrtrain.adapt.lda",
           "asrtrain.core.runlog", "asrtrain.data.kaldi_read", "kaldiio")


def split_jobs(data: Path, table: Any, utts: list[str], utt2spk: dict[str, str],
               nj: int) -> list[list[str]]:
    """``utts`` in at most ``nj`` jobs by speaker (one job: all, without counting frames)."""
    from asrtrain.adapt.featio import frame_counts
    from asrtrain.data.speaker_jobs import speaker_jobs

    if nj <= 1:
        return [list(utts)]
    frames = frame_counts(data, table, utts)
    return speaker_jobs(utts, utt2spk, frames.__getitem__, nj)


def run_jobs(what: str, stage: str, target: Callable[..., Any], jobs: Sequence[tuple[Any, ...]],
             log_dir: Path, total: int, unit: str = "", job_cmd: str | None = None) -> list[Any]:
    """``target(*job, report=…)`` for every job (``report(n)``: n more items done, for the
    progress of ``what``); the answers in job order. ``stage`` names the jobs' logs. With
    ``job_cmd`` each job is that command's (``adapt.job_cmd``), even a single one."""
    from asrtrain.core.progress import Progress
    from asrtrain.core.workers import run_workers

    if job_cmd is not None:
        from asrtrain.adapt.job_cmd import run_commands

        with Progress(what, len(jobs), unit=" jobs") as bar:
            return run_commands(job_cmd, what, stage, target, jobs, log_dir,
                                lambda _j: bar.advance(1))
    with Progress(what, total, unit=unit) as bar:
        if len(jobs) == 1:
            return [target(*jobs[0], report=bar.advance)]
        log_dir.mkdir(parents=True, exist_ok=True)
        logs = [(log_dir / f"{stage}.{j + 1}.log").resolve() for j in range(len(jobs))]
        names = [f"{what}: job {j + 1} of {len(jobs)} (log {logs[j]})"
                 for j in range(len(jobs))]
        log.info("%s: %d jobs, logs %s", what, len(jobs), log_dir / f"{stage}.*.log")
        return run_workers(_job, [(target, logs[j], args) for j, args in enumerate(jobs)],
                           min(len(jobs), os.cpu_count() or 1),
                           on_message=lambda _job, n: bar.advance(n), names=names,
                           method="forkserver", preload=[*PRELOAD, target.__module__])


def _job(target: Callable[..., Any], log_path: Path, args: tuple[Any, ...],
         report: Callable[[int], None]) -> Any:
    """One worker: torch on one thread, the ``asrtrain`` log (and any traceback) into
    its own file, then ``target``."""
    import traceback

    import torch

    from asrtrain.core.runlog import LOG_FORMAT

    torch.set_num_threads(1)   # many small products: a second thread only waits (DESIGN.md)
    handler = logging.FileHandler(log_path, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger("asrtrain")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        return target(*args, report=report)
    except BaseException:
        root.error("job failed:\n%s", traceback.format_exc())
        raise
    finally:
        root.removeHandler(handler)
        handler.close()


def stream_offsets(utts: list[str], counts: dict[str, int], max_frames: int
                   ) -> tuple[int, dict[str, int], int]:
    """For jobs that each take their share of ``gmm.subsample_frames`` of the utterances in
    this order: its final stride, each utterance's offset in the stream, the frames in all."""
    from asrtrain.adapt.gmm import subsample_stride

    offsets, seen = {}, 0
    for u in utts:
        offsets[u], seen = seen, seen + counts[u]
    return subsample_stride((counts[u] for u in utts), max_frames), offsets, seen


def share(utt: str, mat: np.ndarray, offset: int, count: int, stride: int, data: Path
          ) -> np.ndarray:
    """An utterance's rows of the subsample (``gmm.every_kth``); ``count`` (utt2num_frames')
    must be the matrix's own, or the shares would not be the stream's."""
    from asrtrain.adapt.gmm import every_kth
    from asrtrain.core.errors import InputError

    if mat.shape[0] != count:
        raise InputError(f"says {utt!r} has {count} frames, feats.scp has {mat.shape[0]}: "
                         "rewrite it (prepare features) or remove it", data / "utt2num_frames")
    return every_kth(mat, offset, stride)

"""A data dir's utterances split into jobs by speaker, as Kaldi's ``split_data.sh --per-spk``.

One rule for every command with ``--nj`` whose jobs work per speaker (alignment, fMLLR,
i-vectors): a speaker is wholly in one job, so its statistics and transforms need
nothing from another job, and the jobs are balanced by frames.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


def speaker_jobs(utts: Iterable[str], utt2spk: dict[str, str], frames: Callable[[str], int],
                 nj: int) -> list[list[str]]:
    """``utts`` in at most ``nj`` jobs (no empty one), each speaker wholly in one, the
    heaviest speaker first to the lightest job; each job keeps the utterances' order."""
    order = list(utts)
    load_of: dict[str, int] = {}
    for utt in order:
        spk = utt2spk[utt]
        load_of[spk] = load_of.get(spk, 0) + frames(utt)
    load = [0] * max(1, min(nj, len(load_of)))
    job_of: dict[str, int] = {}
    for spk in sorted(load_of, key=lambda s: (-load_of[s], s)):
        j = load.index(min(load))
        job_of[spk] = j
        load[j] += load_of[spk]
    return [[u for u in order if job_of[utt2spk[u]] == j] for j in range(len(load))]

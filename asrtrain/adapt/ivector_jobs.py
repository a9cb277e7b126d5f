"""The jobs of ``prepare ivectors --nj``: a job's utterances through the UBM or extractor.

Each function reads its utterances' features itself (``scp``, checked to ``dim``),
loads the model from where the parent saved it and returns plain numpy (a torch tensor
sent through a pipe is a shared-memory handle that dies with the job): the Baum-Welch
statistics of the extractor's training utterances, or the scp entries of the ark of
i-vectors it wrote. ``adapt.ivector`` runs them (``adapt.jobs``) and merges the answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

Report = Callable[[int], None]


def _frames(scp: Path, utts: list[str], dim: int, report: Report) -> Iterator[torch.Tensor]:
    """Each utterance's matrix, checked, one at a time."""
    from asrtrain.adapt.featio import read_matrix
    from asrtrain.data.kaldi_read import open_scp

    table = open_scp(scp)
    for utt in utts:
        yield torch.from_numpy(read_matrix(table, utt, scp, dim))
        report(1)


def sample_part(scp: Path, utts: list[str], dim: int, offsets: dict[str, int],
                frames: dict[str, int], stride: int, report: Report) -> dict[str, np.ndarray]:
    """Each utterance's rows of the UBM's subsample of the stream (``jobs.share``)."""
    from asrtrain.adapt.jobs import share

    return {u: share(u, x.numpy(), offsets[u], frames[u], stride, scp.parent)
            for u, x in zip(utts, _frames(scp, utts, dim, report), strict=True)}


def stats_part(scp: Path, utts: list[str], dim: int, ubm_path: Path, posterior_scale: float,
               report: Report) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``ivector.collect_stats`` of ``utts`` under the UBM: (utts, N [U, C], F [U, C, D])."""
    from asrtrain.adapt.gmm import DiagGMM
    from asrtrain.adapt.ivector import collect_stats

    ubm = DiagGMM.load(ubm_path)
    n_all, f_all = collect_stats(ubm, _frames(scp, utts, dim, report), len(utts),
                                 posterior_scale)
    return utts, n_all.numpy(), f_all.numpy()


def extract_part(scp: Path, utts: list[str], dim: int, extractor_dir: Path, period: int | None,
                 ark: Path, report: Report) -> dict[str, str]:
    """The i-vectors of ``utts`` (online rows every ``period`` frames, or one per
    utterance when None) into ``ark``; their scp entries."""
    from asrtrain.adapt.featio import write_part
    from asrtrain.adapt.ivector import IvectorExtractor

    extractor = IvectorExtractor.load(extractor_dir)

    def vectors() -> Iterator[tuple[str, np.ndarray]]:
        for utt, x in zip(utts, _frames(scp, utts, dim, report), strict=True):
            value = extractor.extract(x) if period is None else extractor.extract_online(x, period)
            yield utt, value.numpy()

    return write_part(ark, vectors())

"""The jobs of ``prepare fmllr --nj``: the corpus split into them, and each pass over it
for one job's speakers.

``Corpus`` is the parent's view (the split, and the GMM's subsample gathered from the
jobs). Every other function here takes a job's utterances (whole speakers), reads their features
itself and returns plain numpy (no torch tensors cross a process boundary: a tensor
sent through a pipe is a shared-memory handle that dies with the job): the LDA's class
statistics, the frames a GMM is trained on, the speakers' transforms, or the scp
entries of the ark of adapted features it wrote. ``adapt.fmllr`` runs them
(``adapt.jobs``) and merges the answers in job order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrtrain.adapt.gmm import DiagGMM
from asrtrain.core.errors import InputError

Report = Callable[[int], None]


@dataclass
class Source:
    """DATA's features (opened where they are read) and the LDA that maps them to the
    GMM's space; what a job is sent of the corpus besides its utterances."""

    scp: Path
    dim: int
    context: int
    lda: np.ndarray | None = None
    _table: Any = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_table": None}   # a job opens its own

    def table(self) -> Any:
        if self._table is None:
            from asrtrain.data.kaldi_read import open_scp
            self._table = open_scp(self.scp)
        return self._table

    def raw(self, utt: str) -> torch.Tensor:
        from asrtrain.adapt.featio import read_matrix
        return torch.from_numpy(read_matrix(self.table(), utt, self.scp, self.dim))

    def projected(self, utt: str) -> torch.Tensor:
        from asrtrain.adapt.lda import apply_lda, splice
        assert self.lda is not None
        return apply_lda(splice(self.raw(utt), self.context), torch.from_numpy(self.lda))


@dataclass
class Corpus:
    """DATA's features and speakers, and their split into ``--nj`` jobs (whole speakers)."""

    data: Path
    src: Source
    utts: list[str]
    spk2utt: dict[str, list[str]]
    parts: list[list[str]]           # each job's utterances, in feats.scp's order
    log_dir: Path
    job_cmd: str | None = None       # each job a command (``adapt.job_cmd``); None: local
    _frames: dict[str, int] | None = None

    @property
    def utt2spk(self) -> dict[str, str]:
        return {u: s for s, us in self.spk2utt.items() for u in us}

    def speakers(self, part: list[str]) -> dict[str, list[str]]:
        """The speakers of a job's utterances, in spk2utt's order."""
        inside = set(part)
        return {s: us for s, us in self.spk2utt.items() if us[0] in inside}

    def run(self, what: str, stage: str, target: Any, jobs: list[tuple[Any, ...]], total: int,
            unit: str = "") -> list[Any]:
        from asrtrain.adapt.jobs import run_jobs
        return run_jobs(what, stage, target, jobs, self.log_dir, total, unit, self.job_cmd)

    def sample(self, max_frames: int, transforms: dict[str, np.ndarray] | None
               ) -> tuple[torch.Tensor, int]:
        """``gmm.subsample_frames`` of every utterance's projected frames (adapted by its
        speaker's transform when given): with one job in this process, streamed; with
        more, each job takes its utterances' share (``gmm.subsample_stride``)."""
        from asrtrain.adapt.featio import frame_counts
        from asrtrain.adapt.fmllr import apply_transform
        from asrtrain.adapt.gmm import subsample_frames
        from asrtrain.adapt.jobs import stream_offsets

        utt2spk = self.utt2spk
        if len(self.parts) == 1 and self.job_cmd is None:
            def frames() -> Any:
                for u in self.utts:
                    x = self.src.projected(u)
                    if transforms is not None:
                        x = apply_transform(torch.from_numpy(transforms[utt2spk[u]]), x)
                    yield x.numpy()
            return subsample_frames(frames(), max_frames)
        if self._frames is None:
            self._frames = frame_counts(self.data, self.src.table(), self.utts)
        counts = self._frames
        stride, offsets, seen = stream_offsets(self.utts, counts, max_frames)
        jobs = [(self.src, {u: offsets[u] for u in part}, {u: counts[u] for u in part}, stride,
                 transforms, {u: utt2spk[u] for u in part}) for part in self.parts]
        what = "GMM frames" if transforms is None else "adapted GMM frames"
        rows: dict[str, np.ndarray] = {}
        for answer in self.run(what, "fmllr-frames", sample_part, jobs, len(self.utts)):
            rows.update(answer)
        return torch.from_numpy(np.concatenate([rows[u] for u in self.utts])), seen


def gmm_arrays(gmm: DiagGMM) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return gmm.weights.numpy(), gmm.means.numpy(), gmm.vars.numpy()


def _gmm(arrays: tuple[np.ndarray, np.ndarray, np.ndarray]) -> DiagGMM:
    weights, means, variances = arrays
    return DiagGMM(torch.from_numpy(weights), torch.from_numpy(means), torch.from_numpy(variances))


def lda_part(src: Source, utts: list[str], ali: Path, report: Report
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Class counts, sums and total scatter of the spliced frames of ``utts`` (those with
    an alignment); the utterances whose frame count differs from their alignment's."""
    from asrtrain.adapt.lda import LdaStats, splice
    from asrtrain.data.kaldi_read import load_entry, open_scp

    table = open_scp(ali, "alignment scp")
    stats = LdaStats.empty(1, (2 * src.context + 1) * src.dim)
    mismatched = []
    for utt in utts:
        try:
            labels = np.asarray(load_entry(table, utt, ali)).astype(np.int64).reshape(-1)
        except (ValueError, OSError, EOFError) as exc:
            raise InputError(f"cannot read the alignment of {utt!r}: {exc}", ali) from None
        if labels.size and labels.min() < 0:
            raise InputError(f"{utt!r} has a negative class label {labels.min()}", ali)
        x = src.raw(utt)
        report(1)
        if x.shape[0] != len(labels):
            mismatched.append(f"{utt} ({x.shape[0]} frames, {len(labels)} labels)")
            continue
        stats.add(splice(x, src.context), torch.from_numpy(labels))
    return stats.counts.numpy(), stats.sums.numpy(), stats.scatter.numpy(), mismatched


def sample_part(src: Source, offsets: dict[str, int], frames: dict[str, int], stride: int,
                transforms: dict[str, np.ndarray] | None, utt2spk: dict[str, str],
                report: Report) -> dict[str, np.ndarray]:
    """Each utterance's frames (projected, and adapted by its speaker's transform when
    ``transforms``) at the stream positions a multiple of ``stride`` (``gmm.every_kth``);
    ``frames`` (from utt2num_frames) must be the matrices' own counts."""
    from asrtrain.adapt.fmllr import apply_transform
    from asrtrain.adapt.jobs import share

    rows = {}
    for utt, offset in offsets.items():
        x = src.projected(utt)
        if transforms is not None:
            x = apply_transform(torch.from_numpy(transforms[utt2spk[utt]]), x)
        rows[utt] = share(utt, x.numpy(), offset, frames[utt], stride, src.scp.parent)
        report(1)
    return rows


def transforms_part(src: Source, spk2utt: dict[str, list[str]],
                    gmm: tuple[np.ndarray, np.ndarray, np.ndarray], params: dict[str, Any],
                    report: Report) -> dict[str, dict[str, Any]]:
    """Each speaker's transform against the GMM (``fmllr.estimate``), as plain values."""
    from asrtrain.adapt.fmllr import estimate

    model = _gmm(gmm)
    results = {}
    for spk, utts in spk2utt.items():
        x = torch.cat([src.projected(u) for u in utts])
        res = estimate(model, x, params["iters"], params["passes"], params["min_full"],
                       params["min_diag"])
        results[spk] = {"transform": res.transform.numpy(), "kind": res.kind,
                        "frames": res.frames, "loglikes": res.loglikes, "aux": res.aux,
                        "mean": res.mean.numpy()}
        report(1)
    return results


def features_part(src: Source, utt2spk: dict[str, str], trans_scp: Path, ark: Path,
                  report: Report) -> dict[str, str]:
    """The adapted features of the job's utterances (their speaker's transform) into
    ``ark``; their scp entries."""
    from asrtrain.adapt.featio import write_part
    from asrtrain.adapt.fmllr import apply_transform
    from asrtrain.data.kaldi_read import open_scp

    trans = open_scp(trans_scp, "fMLLR transforms scp")

    def adapted():
        for utt, spk in utt2spk.items():
            w = torch.from_numpy(trans[spk].astype("float64"))
            yield utt, apply_transform(w, src.projected(utt)).numpy()
            report(1)

    return write_part(ark, adapted())

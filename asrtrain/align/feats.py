"""The aligner's features: MFCC with per-speaker mean normalisation, then one of the
ladder's front ends (Δ+ΔΔ; splice+LDA+MLLT; that with per-speaker fMLLR).

A job's share of the corpus is small enough to hold in memory as float32 (1 h of
13-dim MFCC is 19 MB), which lets every EM pass be a few large matrix products
instead of one read per utterance per pass. Each job holds only its speakers'
matrices (read with ``only``, by the job itself) and the parent keeps frame counts
(:class:`DiskFeats`), so no process holds the whole corpus; both read through
:class:`FeatTables`, so the values are the same.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrtrain.adapt.featio import open_feats, read_matrix
from asrtrain.adapt.lda import splice
from asrtrain.core.errors import InputError
from asrtrain.data.cmvn import apply_cmvn
from asrtrain.data.features import add_deltas


class FeatTables:
    """A data dir's ``feats.scp`` and ``cmvn.scp`` opened once: every reader of the
    aligner's MFCC (in memory, on demand, a remote job) reads and normalises here."""

    def __init__(self, data: Path, utt2spk: dict[str, str],
                 opened: tuple[Path, Any] | None = None) -> None:
        from asrtrain.data.kaldi_read import open_scp

        self.data = Path(data)
        self.scp, self.table = opened or open_feats(self.data)
        self.cmvn_path = self.data / "cmvn.scp"
        self.cmvn = open_scp(self.cmvn_path, "CMVN scp") if self.cmvn_path.is_file() else None
        self.utt2spk = utt2spk

    def keys(self) -> Iterator[str]:
        return iter(self.table)

    def read(self, utt: str, dim: int | None = None, cmn: bool = True) -> np.ndarray:
        """One utterance's MFCC, checked, with its speaker's CMN (Kaldi's default for GMM
        training: means only)."""
        from asrtrain.data.kaldi_read import load_entry

        mat = read_matrix(self.table, utt, self.scp, dim)
        if utt not in self.utt2spk:
            raise InputError(f"utterance {utt!r} of feats.scp has no speaker",
                             self.data / "utt2spk")
        if cmn and self.cmvn is not None:
            mat = apply_cmvn(mat, load_entry(self.cmvn, self.utt2spk[utt], self.cmvn_path))
        return mat


class DiskFeats(Mapping[str, np.ndarray]):
    """Utterances' matrices read from the data dir when asked; only their frame counts
    are held (the parent of jobs on other hosts: the corpus is in the jobs)."""

    def __init__(self, tables: FeatTables, frames: dict[str, int]) -> None:
        self.tables = tables
        self.frames = frames

    def __getitem__(self, utt: str) -> np.ndarray:
        if utt not in self.frames:
            raise KeyError(utt)
        return self.tables.read(utt)

    def __iter__(self) -> Iterator[str]:
        return iter(self.frames)

    def __len__(self) -> int:
        return len(self.frames)

    def __contains__(self, utt: object) -> bool:
        return utt in self.frames

    def subset(self, names: list[str]) -> DiskFeats:
        return DiskFeats(self.tables, {u: self.frames[u] for u in names})


@dataclass
class Utterances:
    """Per-speaker mean-normalised MFCC of a data dir, with its transcripts and speakers."""

    data: Path
    feats: Mapping[str, np.ndarray]     # a dict in memory, or DiskFeats
    text: dict[str, list[str]]
    utt2spk: dict[str, str]
    missing_text: list[str] = field(default_factory=list)

    @property
    def utts(self) -> list[str]:
        return list(self.feats)

    @property
    def dim(self) -> int:
        return next(iter(self.feats.values())).shape[1]

    def frames(self, utt: str) -> int:
        """An utterance's frame count (without reading it where it is on disk)."""
        feats = self.feats
        return feats.frames[utt] if isinstance(feats, DiskFeats) else feats[utt].shape[0]

    def subset(self, names: list[str]) -> Utterances:
        """These utterances alone, in this order (a job's share; the monophones' shortest)."""
        feats = self.feats
        return Utterances(self.data, feats.subset(names) if isinstance(feats, DiskFeats)
                          else {u: feats[u] for u in names},
                          {u: self.text[u] for u in names if u in self.text},
                          {u: self.utt2spk[u] for u in names})

    def speakers(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for utt in self.feats:
            out.setdefault(self.utt2spk[utt], []).append(utt)
        return out


def load_utterances(data: Path, only: Collection[str] | None = None,
                    in_memory: bool = True) -> Utterances:
    """Read ``DATA/{feats,cmvn}.scp``, ``text`` and ``utt2spk``; CMN per speaker.

    ``only``: these utterances alone (a remote job's share; the others are not read).
    ``in_memory=False``: every matrix is read and checked once, then only its frame
    count kept (:class:`DiskFeats`)."""
    from asrtrain.data.kaldi_dir import read_text, read_utt2spk

    data = Path(data)
    opened = open_feats(data)   # no feats.scp is the first thing to say
    for name in ("text", "utt2spk"):
        if not (data / name).is_file():
            raise InputError(f"no {name}: the aligner needs transcripts and speakers", data)
    text = read_text(data / "text")
    tables = FeatTables(data, read_utt2spk(data / "utt2spk"), opened)
    feats: dict[str, np.ndarray] = {}
    frames: dict[str, int] = {}
    missing: list[str] = []
    dim: int | None = None
    for utt in tables.keys():
        if only is not None and utt not in only:
            continue
        mat = tables.read(utt, dim, cmn=utt in text)
        dim = mat.shape[1]
        if utt not in text:
            missing.append(utt)
        elif in_memory:
            feats[utt] = mat
        else:
            frames[utt] = mat.shape[0]
    if not feats and not frames:
        raise InputError("no utterance has both features and a transcript", data)
    kept = feats if in_memory else frames
    if only is not None and len(kept) < len(only):
        lost = sorted(set(only) - set(kept))
        raise InputError(f"{len(lost)} utterances asked for have no features or no "
                         f"transcript (first: {lost[0]!r})", data / "feats.scp")
    return Utterances(data, feats if in_memory else DiskFeats(tables, frames),
                      {u: text[u] for u in kept}, tables.utt2spk, missing)


@dataclass
class FrontEnd:
    """How the ladder's current stage turns normalised MFCC into model features.

    ``deltas``: append Δ and ΔΔ. ``lda``: a [d, (2c+1)·D] matrix applied to spliced
    frames (LDA, then MLLT folded in). ``fmllr``: per speaker a [d, d+1] transform.
    """

    deltas: bool = True
    context: int = 0
    lda: np.ndarray | None = None
    fmllr: dict[str, np.ndarray] = field(default_factory=dict)

    def apply(self, mat: np.ndarray, spk: str | None = None, with_fmllr: bool = True
              ) -> np.ndarray:
        if self.lda is not None:
            x = splice(torch.from_numpy(mat), self.context).numpy() @ self.lda.T
        elif self.deltas:
            x = add_deltas(mat, 2, 2)
        else:
            x = mat
        if with_fmllr and spk is not None and spk in self.fmllr:
            w = self.fmllr[spk]
            x = x @ w[:, :-1].T + w[:, -1]
        return np.ascontiguousarray(x, dtype=np.float32)

    def dim(self, mfcc_dim: int) -> int:
        """The dimension :meth:`apply` gives MFCC of ``mfcc_dim``."""
        if self.lda is not None:
            return int(self.lda.shape[0])
        return mfcc_dim * 3 if self.deltas else mfcc_dim

    def features(self, utts: Utterances, with_fmllr: bool = True) -> dict[str, np.ndarray]:
        return {u: self.apply(m, utts.utt2spk[u], with_fmllr) for u, m in utts.feats.items()}

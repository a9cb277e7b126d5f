"""The aligner's features: MFCC with per-speaker mean normalisation, then one of the
ladder's front ends (Δ+ΔΔ; splice+LDA+MLLT; that with per-speaker fMLLR).

A corpus for alignment is small enough to hold in memory as float32 (1 h of 13-dim
MFCC is 19 MB; 100 h is 1.9 GB), which lets every EM pass be a few large matrix
products instead of one read per utterance per pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from asrtrain.adapt.featio import open_feats, read_matrix
from asrtrain.adapt.lda import splice
from asrtrain.core.errors import InputError
from asrtrain.data.cmvn import apply_cmvn
from asrtrain.data.features import add_deltas


@dataclass
class Utterances:
    """Per-speaker mean-normalised MFCC of a data dir, with its transcripts and speakers."""

    data: Path
    feats: dict[str, np.ndarray]
    text: dict[str, list[str]]
    utt2spk: dict[str, str]
    missing_text: list[str] = field(default_factory=list)

    @property
    def utts(self) -> list[str]:
        return list(self.feats)

    @property
    def dim(self) -> int:
        return next(iter(self.feats.values())).shape[1]

    def subset(self, names: list[str]) -> Utterances:
        """These utterances alone (a job's share; the monophones' shortest)."""
        return Utterances(self.data, {u: self.feats[u] for u in names},
                          {u: self.text[u] for u in names if u in self.text},
                          {u: self.utt2spk[u] for u in names})

    def speakers(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for utt in self.feats:
            out.setdefault(self.utt2spk[utt], []).append(utt)
        return out


def load_utterances(data: Path) -> Utterances:
    """Read ``DATA/{feats,cmvn}.scp``, ``text`` and ``utt2spk``; CMN per speaker (Kaldi's
    default for GMM training: means only)."""
    from asrtrain.data.kaldi_dir import read_text, read_utt2spk
    from asrtrain.data.kaldi_read import load_entry, open_scp

    data = Path(data)
    scp, table = open_feats(data)
    for name in ("text", "utt2spk"):
        if not (data / name).is_file():
            raise InputError(f"no {name}: the aligner needs transcripts and speakers", data)
    text = read_text(data / "text")
    utt2spk = read_utt2spk(data / "utt2spk")
    cmvn_path = data / "cmvn.scp"
    cmvn = open_scp(cmvn_path, "CMVN scp") if cmvn_path.is_file() else None
    feats: dict[str, np.ndarray] = {}
    missing: list[str] = []
    dim: int | None = None
    for utt in table:
        mat = read_matrix(table, utt, scp, dim)
        dim = mat.shape[1]
        if utt not in utt2spk:
            raise InputError(f"utterance {utt!r} of feats.scp has no speaker", data / "utt2spk")
        if utt not in text:
            missing.append(utt)
            continue
        if cmvn is not None:
            mat = apply_cmvn(mat, load_entry(cmvn, utt2spk[utt], cmvn_path))
        feats[utt] = mat
    if not feats:
        raise InputError("no utterance has both features and a transcript", data)
    return Utterances(data, feats, {u: text[u] for u in feats}, utt2spk, missing)


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

    def features(self, utts: Utterances, with_fmllr: bool = True) -> dict[str, np.ndarray]:
        return {u: self.apply(m, utts.utt2spk[u], with_fmllr) for u, m in utts.feats.items()}

"""Acoustic scores of an aligner rung: GMM log-likelihoods of its features, per frame and pdf.

``asrtrain decode`` takes a rung (``prepare align``'s ``models/<stage>.pt``) with a
features dir (``prepare features --type mfcc``: ``feats.scp``, ``cmvn.scp``,
``utt2spk``) in place of a network and an archive: the rung's front end turns the MFCC
into its features (Δ+ΔΔ; splice+LDA+MLLT), a SAT rung's with each test speaker's fMLLR
transform from a first pass (``first_pass.py``), and its GMMs score every pdf. The
training speakers' transforms saved in the rung are never applied: a decoded speaker
gets a transform only from its own first pass.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import InputError

log = logging.getLogger("asrtrain.decode")


class GmmScorer:
    """log p(x_t | pdf) of a rung's GMMs on a features dir's utterances."""

    def __init__(self, model_path: Path, feats_dir: Path, num_pdfs: int | None,
                 transforms: dict[str, np.ndarray] | None = None, rung: Any = None) -> None:
        """``rung``: the model file already loaded (``load_rung``; its front end's speaker
        transforms are replaced by ``transforms``), so a caller scoring many features dirs
        with one model reads it once."""
        from asrtrain.align.feats import FeatTables
        from asrtrain.align.saved import load_rung
        from asrtrain.data.kaldi_dir import read_utt2spk

        self.model_path = Path(model_path)
        self.rung = rung if rung is not None else load_rung(self.model_path)
        self.num_pdfs = self.rung.model.num_pdfs
        if num_pdfs is not None and num_pdfs != self.num_pdfs:
            raise InputError(f"the model has {self.num_pdfs} pdfs, the graph {num_pdfs}: graph "
                             "and model come from different trees", model_path)
        feats_dir = Path(feats_dir)
        if not (feats_dir / "utt2spk").is_file():
            raise InputError("a features dir needs utt2spk (the speakers' CMN and fMLLR)",
                             feats_dir)
        self.tables = FeatTables(feats_dir, read_utt2spk(feats_dir / "utt2spk"))
        self.front = self.rung.front
        self.front.fmllr = dict(transforms or {})
        self._frames = _frame_counts(feats_dir, self.tables)

    def tree_id(self) -> str:
        return self.rung.tree_id

    def utterances(self) -> list[tuple[str, int]]:
        """(utt, frames) in feats.scp order."""
        return list(self._frames.items())

    def features(self, utt: str, with_fmllr: bool = True) -> np.ndarray:
        """The rung's features of ``utt`` (with its speaker's transform where there is one,
        unless ``with_fmllr`` is False)."""
        return self.front.apply(self.tables.read(utt), self.tables.utt2spk[utt], with_fmllr)

    def __call__(self, utt: str) -> np.ndarray:
        x = self.features(utt)
        if x.shape[1] != self.rung.model.dim:
            raise InputError(f"utterance {utt}: the model's front end gives dim {x.shape[1]}, "
                             f"its GMMs take {self.rung.model.dim} (features of another kind "
                             f"than the aligner's MFCC?)", self.tables.scp)
        return self.rung.model.loglikes(x).astype(np.float32)


def _frame_counts(feats_dir: Path, tables) -> dict[str, int]:
    """utt → frames from ``utt2num_frames`` (written by ``prepare features``), else read."""
    from asrtrain.core.textio import read_lines

    path = feats_dir / "utt2num_frames"
    keys = list(tables.keys())
    if path.is_file():
        counts = {}
        for line in read_lines(path):
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                counts[parts[0]] = int(parts[1])
        if all(u in counts for u in keys):
            return {u: counts[u] for u in keys}
    return {u: int(tables.read(u, cmn=False).shape[0]) for u in keys}


def is_features_dir(data: Path) -> bool:
    """A features dir (GMM decoding) rather than an archive (the network's)."""
    return Path(data).is_dir() and (Path(data) / "feats.scp").is_file()

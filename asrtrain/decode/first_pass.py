"""Speaker transforms from a first decoding pass (Kaldi's ``decode_fmllr.sh``).

A SAT model was trained on speaker-normalised features; a test speaker has no
transcript to align, so a speaker-independent model decodes it first (``decode
--lattices`` with the LDA+MLLT rung on the same tree). Its best path at LM weight
``lmwt`` gives every frame a pdf; each speaker's fMLLR transform is then estimated
against the SAT model under those pdfs, silence frames weighted by ``SILENCE_WEIGHT``
(a wrong silence label costs little, Kaldi's ``weight-silence-post 0.01``), and the
second pass decodes with it. Too few frames for a full transform give a diagonal or
bias-only one, or none (identity): each such speaker is named in the log and counted.
Utterances the first pass left without a path add no frames, also counted.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import InputError

log = logging.getLogger("asrtrain.decode")

#: Weight of silence frames in the transform's statistics (Kaldi's decode_fmllr.sh).
SILENCE_WEIGHT = 0.01
#: Frames (weighted) a transform needs: full, diagonal, bias; below: identity.
MIN_FRAMES = (400, 100, 10)
#: EM iterations of each speaker's transform.
ITERS = 4
PDF_MAP_FILE = "pdf_map_id"


def pdf_map_id(tree: Any) -> str:
    """A hash of what a pdf label means (the tree without its transition probabilities):
    rungs that share a tree (LDA+MLLT, SAT) share it."""
    data = tree.to_json()
    data.pop("topology", None)
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass
class FirstPass:
    """What the estimation met: transforms by kind, utterances without a first-pass path."""

    kinds: Counter = field(default_factory=Counter)
    no_path: list[str] = field(default_factory=list)
    length_mismatch: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        return {"transforms": dict(self.kinds), "no_path": len(self.no_path),
                "length_mismatch": len(self.length_mismatch)}


def first_pass_paths(decode_dir: Path, lmwt: float, want: set[str]) -> dict[str, np.ndarray]:
    """The pdf of every frame on the best path of each lattice of ``decode_dir``."""
    from asrtrain.decode.lattice_io import read_archive

    archives = sorted(Path(decode_dir).glob("lat/lat.*.gz"),
                      key=lambda p: int(p.name.split(".")[1]))
    if not archives:
        raise InputError("the first pass has no lattices (decode it with --lattices)", decode_dir)
    out: dict[str, np.ndarray] = {}
    for path in archives:
        for utt, lat in read_archive(path):
            if utt not in want:
                continue
            pdfs = path_pdfs(lat, lmwt)
            if pdfs is not None:
                out[utt] = pdfs
    return out


def path_pdfs(lat: Any, lmwt: float) -> np.ndarray | None:
    """The pdf of every frame on a lattice's best path at LM weight ``lmwt`` (None: no path)."""
    best = lat.best_path(lmwt)
    if best is None or not best.pdfs:
        return None
    return np.asarray(best.pdfs, dtype=np.int64)


def decoded_pdf_map_id(decode_dir: Path, why: str = "not a decode dir of this asrtrain") -> str:
    """What the pdf labels of a decode dir's lattices mean (``pdf_map_id``, written by decode
    on asrtrain's graphs; a Kaldi graph's transition-ids have none): ``why`` says what its
    absence means to the caller."""
    from asrtrain.core.textio import read_text

    marker = Path(decode_dir) / PDF_MAP_FILE
    if not marker.exists():
        raise InputError(f"no {PDF_MAP_FILE}: {why}", decode_dir)
    return read_text(marker).strip()


def check_first_pass(decode_dir: Path, tree: Any) -> None:
    """Refuse a first pass decoded on a graph of another tree (its pdf labels would mean
    other states)."""
    theirs, ours = decoded_pdf_map_id(decode_dir), pdf_map_id(tree)
    if theirs != ours:
        raise InputError(f"the first pass was decoded on a graph of tree {theirs}, the model's "
                         f"pdfs are those of tree {ours} (decode the first pass with the "
                         "LDA+MLLT model of the same alignment)", decode_dir)


def estimate_transforms(scorer: Any, decode_dir: Path, lmwt: float
                        ) -> tuple[dict[str, np.ndarray], FirstPass]:
    """Every speaker's fMLLR transform against the scorer's SAT model from the first pass."""
    check_first_pass(decode_dir, scorer.rung.tree)
    paths = first_pass_paths(decode_dir, lmwt, {u for u, _ in scorer.utterances()})
    transforms, report = transforms_from_paths(scorer, paths)
    log_report(report, decode_dir)
    return transforms, report


def transforms_from_paths(scorer: Any, paths: dict[str, np.ndarray]
                          ) -> tuple[dict[str, np.ndarray], FirstPass]:
    """Every speaker's fMLLR transform against the scorer's SAT model, each utterance's
    frames labelled by ``paths`` (utt → pdf per frame; an utterance without one adds no
    frames). ``transcribe`` hands the paths of its own first pass here."""
    import torch

    from asrtrain.adapt.fmllr import choose_kind, identity, update
    from asrtrain.align.front_stats import fmllr_stats

    rung = scorer.rung
    frames = dict(scorer.utterances())
    sil = rung.silence_pdfs
    report = FirstPass()
    by_spk: dict[str, list[str]] = {}
    for utt in frames:
        by_spk.setdefault(scorer.tables.utt2spk[utt], []).append(utt)
    transforms: dict[str, np.ndarray] = {}
    for spk, utts in sorted(by_spk.items()):
        xs, pdfs = [], []
        for utt in utts:
            if utt not in paths:
                report.no_path.append(utt)
                continue
            x = scorer.features(utt, with_fmllr=False)
            if x.shape[0] != paths[utt].shape[0]:
                report.length_mismatch.append(utt)
                continue
            xs.append(x)
            pdfs.append(paths[utt])
        w = identity(rung.model.dim)
        kind = "none"
        if xs:
            x = torch.from_numpy(np.concatenate(xs)).to(torch.float64)
            pdf = torch.from_numpy(np.concatenate(pdfs))
            weight = torch.from_numpy(np.where(sil[pdf.numpy()], SILENCE_WEIGHT, 1.0))
            kind = choose_kind(int(weight.sum()), *MIN_FRAMES)
            for _ in range(ITERS if kind != "none" else 0):
                w = update(w, fmllr_stats(rung.model, x, pdf, w, weight), kind)
        if kind != "full":
            log.info("speaker %s: %s fMLLR transform (%d utterances with a first-pass path "
                     "of %d)", spk, kind if kind != "none" else "no (identity)",
                     len(xs), len(utts))
        report.kinds[kind] += 1
        transforms[spk] = w.numpy()
    return transforms, report


def log_report(report: FirstPass, decode_dir: Path) -> None:
    """The counts in the log (a warning for utterances without a path); a length mismatch
    (a first pass of other features) is an InputError."""
    log.info("fMLLR from the first pass %s: transforms %s", decode_dir, dict(report.kinds))
    if report.no_path:
        log.warning("%d utterances have no path in the first pass (their frames add nothing to "
                    "their speaker's transform), e.g. %s", len(report.no_path),
                    ", ".join(report.no_path[:3]))
    if report.length_mismatch:
        raise InputError(f"{len(report.length_mismatch)} utterances have another length in the "
                         f"first pass than in the features (e.g. {report.length_mismatch[0]}): "
                         "decoded from other features", decode_dir)


def write_transforms(out: Path, transforms: dict[str, np.ndarray]) -> Path:
    """``out/trans.scp``: speaker → [d, d+1] (Kaldi's ``trans.*`` of decode_fmllr)."""
    from asrtrain.adapt.featio import write_matrices

    out.mkdir(parents=True, exist_ok=True)
    write_matrices(out / "trans.scp", sorted(transforms.items()))
    return out / "trans.scp"


def read_transforms(scp: Path) -> dict[str, np.ndarray]:
    """Speaker transforms written by :func:`write_transforms` (or Kaldi's trans.scp)."""
    from asrtrain.data.kaldi_read import load_entry, open_scp

    table = open_scp(Path(scp), "transforms scp")
    return {spk: np.asarray(load_entry(table, spk, scp), dtype=np.float64) for spk in table}

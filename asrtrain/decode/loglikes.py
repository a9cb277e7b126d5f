"""Acoustic scores for the decoder: log posterior − log prior, per frame and pdf.

The network saw 21-frame chunks in training, so it is run on the very same chunks of the
archive (the utterance's chunks in one batch, padding cut afterwards), each given the
context frames of its neighbours it was trained with (:func:`decode_context`;
data/context.py): a BLSTM's outputs depend on the context it was given. Oracle scores (0 for the aligned pdf, a low value
elsewhere) test the graph and the decoder without a model.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_text

log = logging.getLogger("asrtrain.decode")
ORACLE_LOW = -20.0


def check_scores(utt: str, scores: np.ndarray, num_pdfs: int, where: Any = None) -> np.ndarray:
    """Reject a matrix with the wrong pdf dimension or non-finite values, naming the utterance."""
    if scores.ndim != 2 or scores.shape[1] != num_pdfs:
        raise InputError(f"utterance {utt}: scores have shape {tuple(scores.shape)}, the graph has "
                         f"{num_pdfs} pdfs", where)
    bad = ~np.isfinite(scores)
    if bad.any():
        t = int(np.argwhere(bad)[0][0])
        raise InputError(f"utterance {utt}: {int(bad.sum())} non-finite scores (first at frame {t})",
                         where)
    return scores


def oracle_loglikes(pdf_ali: np.ndarray, num_pdfs: int, utt: str = "?", low: float = ORACLE_LOW
                    ) -> np.ndarray:
    """Scores of a perfect model: 0 for the aligned pdf, ``low`` for every other."""
    ali = np.asarray(pdf_ali).reshape(-1)
    if ali.size and (ali.min() < 0 or ali.max() >= num_pdfs):
        raise InputError(f"utterance {utt}: pdf id {int(ali.max())} outside [0, {num_pdfs}) of the graph")
    out = np.full((ali.size, num_pdfs), low, dtype=np.float32)
    out[np.arange(ali.size), ali] = 0.0
    return out


class OracleScorer:
    """Scores from pdf alignments (``--oracle ALI.scp``)."""

    def __init__(self, ali_scp: Path, num_pdfs: int) -> None:
        from asrtrain.data.kaldi_read import open_scp

        self.path = Path(ali_scp)
        self.table = open_scp(self.path, "alignment scp")
        self.num_pdfs = num_pdfs

    def utterances(self) -> list[tuple[str, int]]:
        """(utt, frames) of every alignment."""
        return [(u, int(np.asarray(self._load(u)).size)) for u in self.table]

    def _load(self, utt: str) -> Any:
        from asrtrain.data.kaldi_read import load_entry

        return load_entry(self.table, utt, self.path)

    def __call__(self, utt: str) -> np.ndarray:
        return oracle_loglikes(self._load(utt), self.num_pdfs, utt)


def log_priors(priors: np.ndarray | None, num_pdfs: int, where: Any) -> np.ndarray:
    """log p(pdf), zeros floored at half the smallest seen prior (pdfs never trained)."""
    if priors is None:
        log.warning("%s has no state priors: decoding with posteriors, not likelihoods", where)
        return np.zeros(num_pdfs, dtype=np.float32)
    p = np.asarray(priors, dtype=np.float64).reshape(-1)
    if p.size != num_pdfs:
        raise InputError(f"{p.size} priors for {num_pdfs} pdfs", where)
    positive = p[p > 0]
    if positive.size == 0:
        raise InputError("all state priors are zero", where)
    unseen = int((p <= 0).sum())
    if unseen:
        log.warning("%s: %d pdfs have a zero prior (never in training); floored", where, unseen)
    p = np.maximum(p, positive.min() / 2) / p.sum()
    return np.log(p).astype(np.float32)


def decode_context(meta: dict[str, Any], asked: int | None = None) -> int:
    """The context to decode a model with: ``asked``, else the model's training context (0 for a
    model trained on bare chunks: on speechocean762 two such 3x192 models given 10 frames each
    side at decoding scored 43.4 → 46.9% held-out frame accuracy, yet dev WER 50.89 → 52.85% and
    50.69 → 51.57%, test500 at the dev pick 52.69 → 52.28% and 53.28 → 53.44%; docs/results.md)."""
    if asked is not None:
        return asked
    return int((meta.get("train_config") or {}).get("context") or 0)


def utterance_logits(model: Any, archive: Any, selection: Any, span: tuple[int, int, int], context: int,
                     device: Any = None) -> Any:
    """The network's outputs [frames, pdfs] for the utterance at ``span`` (first chunk, chunks,
    frames) of ``archive``: its chunks with ``context`` frames each side, in one batch, the
    padding cut. Differentiable: sequence training calls it outside ``inference_mode``."""
    import torch

    from asrtrain.data.context import middle, read_with_context

    first, count, frames = span
    feats, _ = read_with_context(archive, first, first + count, context)
    x = torch.from_numpy(selection.take(feats).astype(np.float32))
    logits = middle(model(x if device is None else x.to(device)), context)
    return logits.float().reshape(-1, logits.shape[-1])[:frames]


def network_scores(model: Any, archive: Any, selection: Any, span: tuple[int, int, int], log_prior: Any,
                   context: int, device: Any = None) -> Any:
    """log posterior − log prior [frames, pdfs] (a tensor) of the utterance at ``span`` (first
    chunk, chunks, frames) of ``archive``: its chunks with ``context`` frames each side, in one batch."""
    import torch

    with torch.inference_mode():
        logits = utterance_logits(model, archive, selection, span, context, device)
        return torch.log_softmax(logits, dim=-1) - log_prior


class ModelScorer:
    """log posterior − log prior of a ``final.pt`` on the utterances of an archive."""

    def __init__(self, model_path: Path, archive_path: Path, num_pdfs: int | None,
                 context: int | None = None) -> None:
        import torch

        from asrtrain.data.context import check_context
        from asrtrain.data.shards import open_archive
        from asrtrain.data.streams import model_input
        from asrtrain.model.io import load_final

        self.final = load_final(model_path)
        self.model_path = Path(model_path)
        if num_pdfs is None:  # a Kaldi graph without num_pdfs: the tid→pdf map is checked instead
            num_pdfs = int(self.final.config.num_pdfs)
        if self.final.config.num_pdfs != num_pdfs:
            raise InputError(f"the model has {self.final.config.num_pdfs} outputs, the graph "
                             f"{num_pdfs} pdfs: graph and model come from different trees",
                             model_path)
        self.archive = open_archive(archive_path)
        self.input = model_input(self.final.meta, self.archive)  # the streams it was trained on, by name
        if self.input.dim != self.final.config.input_dim:
            what = f"streams {'+'.join(self.input.streams)}" if self.input.by_name else "features"
            raise InputError(f"archive {what} have dim {self.input.dim}, the model takes "
                             f"{self.final.config.input_dim}", archive_path)
        self.log_prior = torch.from_numpy(log_priors(self.final.priors, num_pdfs, model_path))
        self.num_pdfs = num_pdfs
        self.context = decode_context(self.final.meta, context)
        check_context(self.context, self.archive.chunk)
        self._where = {u: (f, n, t) for u, f, n, t in self.archive.utterances}

    def utterances(self) -> list[tuple[str, int]]:
        """(utt, frames) in archive order."""
        return [(u, t) for u, (_, _, t) in self._where.items()]

    def __call__(self, utt: str) -> np.ndarray:
        return network_scores(self.final.model, self.archive, self.input, self._where[utt],
                              self.log_prior, self.context).numpy()


def model_tree_id(meta: dict[str, Any]) -> str | None:
    """The tree id a model was trained for: in its metadata, or beside its archive's targets."""
    if meta.get("tree_id"):
        return str(meta["tree_id"])
    options = (meta.get("archive_header") or {}).get("options") or {}
    ali = options.get("ali") if isinstance(options, dict) else None
    if ali:
        marker = Path(str(ali)).parent / "tree_id"
        if marker.exists():
            return read_text(marker).strip()
    return None

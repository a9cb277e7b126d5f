"""Several networks decoded as one: the frame-level mean of their acoustic scores.

Kaldi's frame-level system combination (``matrix-sum --average`` of the nets' log-likelihoods
before one search): networks trained from other draws make partly other errors, and the mean of
their log posterior − log prior is a better score than either alone. Every member must be a
network on the graph's tree (same pdfs); each reads its own streams and context from the one
archive, so a member with another context or input streams is fine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import InputError


class EnsembleScorer:
    """The mean of several :class:`~asrtrain.decode.loglikes.ModelScorer` s' scores."""

    def __init__(self, models: list[Path], archive_path: Path, num_pdfs: int | None,
                 context: int | None = None) -> None:
        from asrtrain.decode.loglikes import ModelScorer

        if len(models) < 2:
            raise InputError("an ensemble needs two or more models", models[0] if models else None)
        self.members = [ModelScorer(m, archive_path, num_pdfs, context) for m in models]
        self.num_pdfs = self.members[0].num_pdfs
        for m, path in zip(self.members[1:], models[1:], strict=True):
            if m.num_pdfs != self.num_pdfs:
                raise InputError(f"the model has {m.num_pdfs} outputs, {models[0]} has "
                                 f"{self.num_pdfs}: an ensemble's networks share one tree", path)
        self.final = self.members[0].final  # the first member speaks for the ensemble's metadata

    def utterances(self) -> list[tuple[str, int]]:
        """(utt, frames) in archive order (the members read the same archive)."""
        return self.members[0].utterances()

    def __call__(self, utt: str) -> np.ndarray:
        return mean_scores([m(utt) for m in self.members])


def mean_scores(scores: list[Any]) -> np.ndarray:
    """The frame-by-frame mean of several networks' [frames, pdfs] scores of one utterance
    (``decode --ensemble`` and an exported ensemble's ``transcribe`` both use it)."""
    total: Any = None
    for s in scores:
        s = np.asarray(s, dtype=np.float64)
        total = s if total is None else total + s
    return (total / len(scores)).astype(np.float32)

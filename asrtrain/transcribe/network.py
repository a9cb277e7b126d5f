"""The network's scores for the search: log posterior − log prior, on CPU or GPU.

The same computation as ``decode/loglikes.ModelScorer`` (``network_scores``: an utterance's
chunks with their context in one batch, padding cut afterwards), with the model loaded once
for many recordings and moved to a GPU when there is one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import InputError


def pick_device(device: str | None) -> Any:
    """``device`` as given, else the first GPU when there is one, else the CPU."""
    import torch

    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Network:
    """A ``final.pt`` ready to score archives of the model's input."""

    def __init__(self, path: Path, num_pdfs: int, device: str | None = None,
                 context: int | None = None) -> None:
        import torch

        from asrtrain.decode.loglikes import decode_context, log_priors
        from asrtrain.model.io import load_final

        self.final = load_final(path)
        if self.final.config.num_pdfs != num_pdfs:
            raise InputError(f"the network has {self.final.config.num_pdfs} outputs, the graph "
                             f"{num_pdfs} pdfs", path)
        self.device = pick_device(device)
        self.model = self.final.model.to(self.device)
        self.num_pdfs = num_pdfs
        prior = log_priors(self.final.priors, num_pdfs, path)
        self.log_prior = torch.from_numpy(prior).to(self.device)
        self.context = decode_context(self.final.meta, context)

    def scorer(self, archive: Any) -> Any:
        """A function utt → scores [frames, pdfs] over ``archive`` (an open Archive)."""
        from asrtrain.data.context import check_context
        from asrtrain.data.streams import model_input
        from asrtrain.decode.loglikes import network_scores

        selection = model_input(self.final.meta, archive)
        if selection.dim != self.final.config.input_dim:
            raise InputError(f"input has dim {selection.dim}, the network takes "
                             f"{self.final.config.input_dim}", archive.path)
        check_context(self.context, archive.chunk)
        where = {u: (f, n, t) for u, f, n, t in archive.utterances}

        def score(utt: str) -> np.ndarray:
            return network_scores(self.model, archive, selection, where[utt], self.log_prior, self.context,
                                  self.device).cpu().numpy()

        return score

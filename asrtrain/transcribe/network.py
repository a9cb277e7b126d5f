"""The network's scores for the search: log posterior − log prior, on CPU or GPU.

The same computation as ``decode/loglikes.ModelScorer`` (the archive's 21-frame chunks of
an utterance in one batch, padding cut afterwards), with the model loaded once for many
recordings and moved to a GPU when there is one.
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

    def __init__(self, path: Path, num_pdfs: int, device: str | None = None) -> None:
        import torch

        from asrtrain.decode.loglikes import log_priors
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

    def scorer(self, archive: Any) -> Any:
        """A function utt → scores [frames, pdfs] over ``archive`` (an open Archive)."""
        import torch

        from asrtrain.data.streams import model_input

        selection = model_input(self.final.meta, archive)
        if selection.dim != self.final.config.input_dim:
            raise InputError(f"input has dim {selection.dim}, the network takes "
                             f"{self.final.config.input_dim}", archive.path)
        where = {u: (f, n, t) for u, f, n, t in archive.utterances}

        def score(utt: str) -> np.ndarray:
            first, count, frames = where[utt]
            feats, _ = archive.read_chunks(first, first + count)
            feats = selection.take(feats)
            with torch.inference_mode():
                x = torch.from_numpy(feats.astype(np.float32)).to(self.device)
                logits = self.model(x)
                scores = torch.log_softmax(logits.float(), dim=-1).reshape(-1, self.num_pdfs)
                scores = scores[:frames] - self.log_prior
            return scores.cpu().numpy()

        return score

"""State priors for decoding: the network's mean posterior over training frames, or the counts.

The decoder divides the network's posteriors by the priors to get scaled likelihoods. With
the aligner's pdf counts as priors, a pdf whose posterior mass on the training frames exceeds
its count share (the network's outputs are smoother than its one-hot targets) gets inflated
likelihoods everywhere. Kaldi's nnet3 recipes therefore divide by the network's own mean
posterior over a subset of the training data (``nnet3-am-adjust-priors``); ``posterior`` does
the same here. On speechocean762 (four 3x192 models, two seeds at each of two chunk sizes,
recipes/speechocean762/RESULTS.md) it lowered every model's dev WER, by 0.5 to 4.4 points.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import torch
from torch import nn

from asrtrain.train.validate import batch_logits

log = logging.getLogger("asrtrain.train")

#: Training frames the mean posterior is taken over, evenly spread through the archive: enough
#: for every pdf's share to settle (Kaldi's nnet3 uses a subset of the same order), few enough
#: that one CPU learner does it in a minute or two.
PRIOR_FRAMES = 250_000


def spread_batches(num_chunks: int, chunk: int, batch: int, max_frames: int) -> list[int]:
    """Start chunks of batches evenly spread through the archive, about ``max_frames`` frames in all."""
    starts = list(range(0, num_chunks, batch))
    wanted = max(1, math.ceil(max_frames / (batch * chunk)))
    if wanted >= len(starts):
        return starts
    step = len(starts) / wanted
    return [starts[int(i * step)] for i in range(wanted)]


def mean_posterior(model: nn.Module, archive: Any, batch: int, device: torch.device,
                   dtype: torch.dtype | None, columns: list[int] | None = None,
                   max_frames: int = PRIOR_FRAMES) -> tuple[np.ndarray, int]:
    """The model's posteriors averaged over (about ``max_frames``) real training frames, and
    how many frames that was; padding frames (no target) are left out."""
    was_training = model.training
    model.eval()
    total: torch.Tensor | None = None
    frames = 0
    with torch.no_grad():
        for start in spread_batches(archive.num_chunks, archive.chunk, batch, max_frames):
            logits, targets = batch_logits(model, archive, start, min(start + batch, archive.num_chunks),
                                           device, dtype, columns)
            real = targets >= 0   # padding has a negative target
            post = torch.softmax(logits.float(), dim=-1)[real].double().sum(0)
            total = post if total is None else total + post
            frames += int(real.sum())
    model.train(was_training)
    if total is None or frames == 0:
        raise ValueError("no real frames to average the posteriors over")
    mean = (total / frames).cpu().numpy()
    return mean / mean.sum(), frames


def describe_shift(posterior: np.ndarray, counts: np.ndarray | None) -> str:
    """How far the mean posterior is from the count priors, for the log."""
    if counts is None:
        return "no count priors to compare"
    seen = counts > 0
    ratio = posterior[seen] / counts[seen]
    kl = float(np.sum(counts[seen] * np.log(counts[seen] / np.maximum(posterior[seen], 1e-30))))
    return (f"posterior/count ratio 5-95% {np.percentile(ratio, 5):.2f}-{np.percentile(ratio, 95):.2f}, "
            f"KL(counts||posterior) {kl:.4f}")

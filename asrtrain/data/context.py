"""Chunks read with their neighbours' frames around them: the BLSTM's left and right context.

The archive cuts each utterance into 21-frame chunks and the network sees one chunk at a
time, so the first frame of a chunk has no past and the last no future: on
speechocean762 a 3x192 BLSTM trained that way reached 43.4% held-out frame accuracy on its
own chunks and 46.9% when each chunk was given 10 frames of its neighbours on either side
at test time (though not a lower WER: decode/loglikes.py); Kaldi's BLSTM recipes train and
decode with context (``chunk_left_context``/``chunk_right_context``). A chunk read with ``context`` C is
``[C frames of the chunk before | the chunk | C frames of the chunk after]``; a neighbour
in another utterance (or none) gives zeros, as the padding of an utterance's last chunk
does, and the context frames carry the padding target, so a loss and an accuracy count the
chunk's own frames only. Scores for decoding keep the middle ``chunk`` frames.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from asrtrain.core.errors import ConfigError
from asrtrain.data.archive import PAD_TARGET, Chunks


def check_context(context: int, chunk: int) -> None:
    """A context is whole frames of one neighbour: 0 to ``chunk``."""
    if not 0 <= context <= chunk:
        raise ConfigError(f"context {context} frames: must be 0 to the archive's chunk of {chunk} frames")


def read_with_context(archive: Any, start: int, stop: int, context: int) -> Chunks:
    """Chunks ``[start, stop)`` of ``archive``, each with ``context`` frames of its neighbours
    in the same utterance on either side: float16 [n, chunk + 2C, D] and int32 targets
    [n, chunk + 2C] (the context frames ``PAD_TARGET``) or None."""
    if context == 0:
        return archive.read_chunks(start, stop)
    chunk, total = archive.chunk, archive.num_chunks
    check_context(context, chunk)
    lo, hi = max(start - 1, 0), min(stop + 1, total)
    feats, targets = archive.read_chunks(lo, hi)
    first = archive.utterance_starts
    idx = np.arange(start, stop)
    body = feats[start - lo:stop - lo]
    left = np.zeros((len(idx), context, feats.shape[2]), dtype=feats.dtype)
    right = np.zeros_like(left)
    has_left = (idx > 0) & ~first[idx]
    left[has_left] = feats[idx[has_left] - 1 - lo, chunk - context:]
    after = np.minimum(idx + 1, total - 1)
    has_right = (idx + 1 < total) & ~first[after]
    right[has_right] = feats[idx[has_right] + 1 - lo, :context]
    out = np.concatenate([left, body, right], axis=1)
    if targets is None:
        return out, None
    pad = np.full((len(idx), context), PAD_TARGET, dtype=targets.dtype)
    return out, np.concatenate([pad, targets[start - lo:stop - lo], pad], axis=1)


def middle(frames: Any, context: int) -> Any:
    """The chunk's own frames of outputs ``[n, chunk + 2C, ...]`` (an array or a tensor)."""
    return frames if context == 0 else frames[:, context:frames.shape[1] - context]


class ContextView:
    """An archive whose ``read_chunks`` gives each chunk ``context`` frames of its neighbours;
    everything else is the archive's (so the loader, the held-out figures and the priors read
    it unchanged)."""

    def __init__(self, archive: Any, context: int) -> None:
        check_context(context, archive.chunk)
        self._archive, self.context = archive, context

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_archive":  # pickling looks these up before __init__
            raise AttributeError(name)
        return getattr(self._archive, name)

    def read_chunks(self, start: int, stop: int, out: Any = None) -> Chunks:
        """As :func:`read_with_context` (``out``, the archive's buffer of bare chunks, is not used)."""
        return read_with_context(self._archive, start, stop, self.context)

    def __repr__(self) -> str:
        return f"ContextView({self._archive!r}, context={self.context})"


def with_context(archive: Any, context: int) -> Any:
    """``archive`` read with ``context`` frames each side (itself when 0)."""
    return archive if context == 0 else ContextView(archive, context)

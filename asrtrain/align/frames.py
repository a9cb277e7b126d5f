"""One job's features under the current front end: one float32 matrix, a view per utterance.

A job's statistics (Gaussians, MLLT) are gathered pdf by pdf from all its aligned frames.
Concatenating every utterance's matrix for that, then widening it to float64, held three
more copies of the job's features at once (480 B a frame at 40 dimensions, next to the
160 B of the features themselves); here the frames already lie in one matrix, and a pass
gathers each pdf's rows from it through an index (8 B a frame), widening only those rows.
The values and their order are the ones the concatenation gave, so the sums are too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

import numpy as np


class FrameBlock(Mapping[str, np.ndarray]):
    """Utterances' feature matrices stored end to end in one float32 matrix [N, D]."""

    def __init__(self, data: np.ndarray, spans: dict[str, tuple[int, int]]) -> None:
        self.data = data
        self.spans = spans

    @classmethod
    def build(cls, utts: Iterable[str], frames: Callable[[str], int],
              make: Callable[[str], np.ndarray], dim: int,
              reuse: FrameBlock | None = None) -> FrameBlock:
        """``make(utt)`` for every utterance, written into one matrix (``reuse``'s when it
        has the same shape: a new front end replaces the old features, never beside them)."""
        spans: dict[str, tuple[int, int]] = {}
        n = 0
        for utt in utts:
            spans[utt] = (n, n + frames(utt))
            n += frames(utt)
        same = reuse is not None and reuse.data.shape == (n, dim)
        data = reuse.data if same and reuse is not None else np.empty((n, dim), np.float32)
        for utt, (a, b) in spans.items():
            data[a:b] = make(utt)
        return cls(data, spans)

    def __getitem__(self, utt: str) -> np.ndarray:
        a, b = self.spans[utt]
        return self.data[a:b]

    def __iter__(self) -> Iterator[str]:
        return iter(self.spans)

    def __len__(self) -> int:
        return len(self.spans)

    def __contains__(self, utt: object) -> bool:
        return utt in self.spans

    def rows(self, utts: Iterable[str]) -> np.ndarray:
        """The rows of these utterances, one after another (int64): ``data[rows]`` is what
        concatenating their matrices in this order gives."""
        parts = [np.arange(*self.spans[u], dtype=np.int64) for u in utts]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

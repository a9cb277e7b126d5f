"""Bootstrap confidence interval of a WER (Bisani & Ney, 2004).

Utterances (or speakers, whose errors are correlated within a conversation side) are
resampled with replacement; each replicate's WER is the sum of its errors over the sum
of its reference words, and the interval is the percentile range of the replicates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Interval:
    """A bootstrap estimate: the WER, the interval and how it was made."""

    wer: float
    low: float
    high: float
    std: float
    replications: int
    unit: str
    level: float = 0.95

    def as_dict(self) -> dict[str, float | int | str]:
        return {"wer": round(self.wer, 4), "low": round(self.low, 4),
                "high": round(self.high, 4), "std": round(self.std, 4),
                "replications": self.replications, "unit": self.unit, "level": self.level}


def bootstrap_wer(errors: Sequence[int], words: Sequence[int], replications: int = 1000,
                  seed: int = 0, unit: str = "utterance", level: float = 0.95,
                  chunk: int = 256) -> Interval:
    """Percentile interval of sum(errors)/sum(words) over resampled units."""
    e = np.asarray(errors, dtype=np.float64)
    w = np.asarray(words, dtype=np.float64)
    n = len(e)
    total_w = w.sum()
    wer = 100.0 * e.sum() / total_w if total_w else 0.0
    if n == 0 or replications <= 0:
        return Interval(wer, wer, wer, 0.0, 0, unit, level)
    rng = np.random.default_rng(seed)
    reps = np.empty(replications)
    for start in range(0, replications, chunk):
        k = min(chunk, replications - start)
        idx = rng.integers(0, n, size=(k, n))
        ws = w[idx].sum(axis=1)
        reps[start:start + k] = 100.0 * e[idx].sum(axis=1) / np.where(ws > 0, ws, 1.0)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(reps, [alpha, 1.0 - alpha])
    return Interval(wer, float(low), float(high), float(reps.std(ddof=1)) if replications > 1
                    else 0.0, replications, unit, level)

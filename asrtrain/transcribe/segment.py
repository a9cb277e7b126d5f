"""Cutting long recordings at silences, by frame energy.

A recording up to ``max_seconds`` long is decoded whole (as one utterance of a data dir
would be). A longer one is cut in the middle of its longest pause (silence of at least
``min_silence`` seconds), and each piece again until all are under ``max_seconds``: the
long pauses between sentences go first, so a segment holds whole sentences. Silence is a frame
whose energy is below a threshold set between the recording's own floor and its loud
frames (a quiet room and a noisy one both work). A recording whose loudest frame is
below ``NO_SPEECH_DB`` has no speech at all and is not decoded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Recordings longer than this are cut (seconds).
MAX_SECONDS = 20.0
#: The shortest pause a cut may be made in (seconds).
MIN_SILENCE = 0.3
#: The shortest piece a cut may leave (seconds).
MIN_PIECE = 1.0
#: Frame energy (dB over one int16 step, RMS) below which a recording has no speech:
#: 30 dB is -60 dBFS, under any microphone's noise.
NO_SPEECH_DB = 30.0
#: Where between the floor (10th percentile) and the loud frames (99th) silence ends.
THRESHOLD_FRACTION = 0.3
FRAME = 0.025
SHIFT = 0.010


@dataclass
class Segment:
    """A stretch of a recording, in seconds."""

    start: float
    end: float


def frame_levels(samples: np.ndarray, rate: int) -> np.ndarray:
    """RMS level in dB (over one int16 step) of 25 ms frames every 10 ms."""
    win, hop = int(rate * FRAME), int(rate * SHIFT)
    if samples.shape[0] < win:
        return np.full(1, 10 * np.log10(np.mean(samples.astype(np.float64) ** 2) + 1.0))
    count = 1 + (samples.shape[0] - win) // hop
    power = np.empty(count)
    sq = np.cumsum(np.r_[0.0, samples.astype(np.float64) ** 2])
    starts = np.arange(count) * hop
    power = (sq[starts + win] - sq[starts]) / win
    return 10 * np.log10(power + 1.0)


def has_speech(levels: np.ndarray) -> bool:
    """Whether any frame is louder than digital silence or a line's hum."""
    return bool(levels.size) and float(levels.max()) >= NO_SPEECH_DB


def silences(levels: np.ndarray, min_frames: int) -> list[tuple[int, int]]:
    """Runs ``[first, last+1)`` of quiet frames at least ``min_frames`` long."""
    floor, loud = np.percentile(levels, 10), np.percentile(levels, 99)
    quiet = levels < floor + THRESHOLD_FRACTION * (loud - floor)
    edges = np.flatnonzero(np.diff(np.r_[0, quiet.astype(np.int8), 0]))
    runs = list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))
    return [(a, b) for a, b in runs if b - a >= min_frames]


def cut(samples: np.ndarray, rate: int, max_seconds: float = MAX_SECONDS,
        min_silence: float = MIN_SILENCE) -> list[Segment]:
    """The segments of a recording: itself when short, else split at its longest pause,
    again and again, until every piece is at most ``max_seconds`` (a piece without a pause
    is cut hard at the limit)."""
    total = samples.shape[0] / rate
    if total <= max_seconds:
        return [Segment(0.0, total)]
    levels = frame_levels(samples, rate)
    runs = silences(levels, int(round(min_silence / SHIFT)))
    pauses = [((a + b) // 2 * SHIFT, b - a) for a, b in runs if a > 0 and b < levels.size]
    pieces = _split(Segment(0.0, total), pauses, max_seconds)
    return [s for s in pieces if _speech_in(levels, s)]


def _split(seg: Segment, pauses: list[tuple[float, int]], max_seconds: float) -> list[Segment]:
    """``seg`` split at its longest inner pause (leaving a second each side), recursively."""
    if seg.end - seg.start <= max_seconds:
        return [seg]
    inner = [(n, t) for t, n in pauses if seg.start + MIN_PIECE <= t <= seg.end - MIN_PIECE]
    at = max(inner)[1] if inner else seg.start + max_seconds
    return (_split(Segment(seg.start, at), pauses, max_seconds)
            + _split(Segment(at, seg.end), pauses, max_seconds))


def _speech_in(levels: np.ndarray, seg: Segment) -> bool:
    part = levels[int(seg.start / SHIFT):max(int(seg.end / SHIFT), int(seg.start / SHIFT) + 1)]
    return bool(part.size) and has_speech(part) and seg.end - seg.start >= FRAME

"""Cutting long recordings into sentences at their pauses, by frame energy.

A recording up to ``max_seconds`` long is decoded whole (as one utterance of a data dir
would be). A longer one is cut at every pause of at least ``SENTENCE_PAUSE`` seconds, and
each piece keeps only ``MARGIN`` seconds of the pause on either side: a segment is then what
the model was trained on (one sentence, a few tenths of a second of silence around it) and
what its statistics are taken from. Packing sentences up to the limit instead made the LM
read two sentences as one, started each online i-vector on the previous sentence, and left
the pauses inside the CMVN and fMLLR statistics: on the synthesized test set joined into 10
minutes, 18.95% WER against 12.50% decoded utterance by utterance (docs/transcribing.md).
A piece still over ``max_seconds`` is split at its longest inner pause (of at least
``MIN_SILENCE``), again and again; one without a pause is cut hard at the limit.

Silence is a frame whose level is below a threshold set between the floor (10th percentile)
and the loud frames (99th) of the ``LOCAL_WINDOW`` seconds around it, so a noisy stretch of
the recording has its own threshold (one threshold for the whole recording missed 23 of 114
pauses between sentences recorded at other noise levels). A recording whose loudest frame is
below ``NO_SPEECH_DB`` has no speech at all and is not decoded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Recordings longer than this are cut (seconds).
MAX_SECONDS = 20.0
#: A pause at least this long ends a sentence: a long recording is cut at every one (seconds).
SENTENCE_PAUSE = 0.5
#: The silence a segment keeps before and after its speech (seconds; at most half the pause).
MARGIN = 0.3
#: The shortest pause a piece over the limit may be split in (seconds).
MIN_SILENCE = 0.3
#: The shortest piece such a split may leave (seconds).
MIN_PIECE = 1.0
#: Frame energy (dB over one int16 step, RMS) below which a recording has no speech:
#: 30 dB is -60 dBFS, under any microphone's noise.
NO_SPEECH_DB = 30.0
#: Where between the local floor and the local loud frames silence ends.
THRESHOLD_FRACTION = 0.4
#: The stretch of recording the floor and the loud frames are taken from (seconds).
LOCAL_WINDOW = 6.0
#: A window whose loud frames are within this of its floor (dB) is one steady level, pause
#: or sound: the whole recording's threshold decides which.
MIN_RANGE_DB = 6.0
FRAME = 0.025
SHIFT = 0.010
#: Frames between two estimates of the local threshold (linear in between).
_HOP = 25
#: Windows whose percentiles are taken at once (bounds the copy: 4096 x 601 levels).
_ROWS = 4096


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
    sq = np.cumsum(np.r_[0.0, samples.astype(np.float64) ** 2])
    starts = np.arange(count) * hop
    power = (sq[starts + win] - sq[starts]) / win
    return 10 * np.log10(power + 1.0)


def has_speech(levels: np.ndarray) -> bool:
    """Whether any frame is louder than digital silence or a line's hum."""
    return bool(levels.size) and float(levels.max()) >= NO_SPEECH_DB


def quiet_frames(levels: np.ndarray) -> np.ndarray:
    """Which frames are silence, against the floor and loud frames of the window around each
    (of the whole recording where the window is one steady level: all pause, or all sound)."""
    half = int(LOCAL_WINDOW / SHIFT) // 2
    padded = np.pad(levels, half, mode="reflect" if levels.size > half else "edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)[::_HOP]
    floor, loud = np.percentile(levels, [10, 99])
    overall = floor + THRESHOLD_FRACTION * (loud - floor)
    threshold = np.concatenate([_threshold(windows[i:i + _ROWS], overall)
                                for i in range(0, windows.shape[0], _ROWS)])
    return levels < np.interp(np.arange(levels.size), np.arange(threshold.size) * _HOP, threshold)


def _threshold(windows: np.ndarray, steady: float) -> np.ndarray:
    """The silence threshold of each window of levels (rows); ``steady`` where a window's
    loud frames are within ``MIN_RANGE_DB`` of its floor."""
    floor, loud = np.percentile(windows, [10, 99], axis=1)
    return np.where(loud - floor >= MIN_RANGE_DB, floor + THRESHOLD_FRACTION * (loud - floor),
                    steady)


def silences(levels: np.ndarray, min_frames: int) -> list[tuple[int, int]]:
    """Runs ``[first, last+1)`` of quiet frames at least ``min_frames`` long."""
    quiet = quiet_frames(levels)
    edges = np.flatnonzero(np.diff(np.r_[0, quiet.astype(np.int8), 0]))
    runs = list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))
    return [(a, b) for a, b in runs if b - a >= min_frames]


def cut(samples: np.ndarray, rate: int, max_seconds: float = MAX_SECONDS,
        min_silence: float = MIN_SILENCE) -> list[Segment]:
    """The segments of a recording: itself when short, else its sentences (cut at every
    pause of ``SENTENCE_PAUSE``, trimmed to ``MARGIN`` of it), each split at its longest
    pause until at most ``max_seconds`` (cut hard at the limit where there is none)."""
    total = samples.shape[0] / rate
    if total <= max_seconds:
        return [Segment(0.0, total)]
    levels = frame_levels(samples, rate)
    runs = silences(levels, int(round(min_silence / SHIFT)))
    pauses = [((a + b) // 2 * SHIFT, b - a) for a, b in runs if a > 0 and b < levels.size]
    pieces = [p for s in sentences(levels, total) for p in _split(s, pauses, max_seconds)]
    return [s for s in pieces if _speech_in(levels, s)]


def sentences(levels: np.ndarray, total: float) -> list[Segment]:
    """The stretches between pauses of ``SENTENCE_PAUSE``, each with ``MARGIN`` of the pause
    either side (at most up to the pause's middle, so segments never overlap)."""
    runs = silences(levels, int(round(SENTENCE_PAUSE / SHIFT)))
    bounds = [0] + [i for a, b in runs for i in (a, b)] + [levels.size]
    speech = [(a, b) for a, b in zip(bounds[::2], bounds[1::2], strict=True) if b > a]
    margin = int(round(MARGIN / SHIFT))
    out = []
    for i, (a, b) in enumerate(speech):
        lo = a - margin if i == 0 else max(a - margin, (speech[i - 1][1] + a) // 2)
        hi = b + margin if i == len(speech) - 1 else min(b + margin, (b + speech[i + 1][0]) // 2)
        out.append(Segment(max(lo, 0) * SHIFT, min(hi * SHIFT + FRAME - SHIFT, total)))
    return out


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

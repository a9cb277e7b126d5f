"""Kaldi ``segments``: utterances as time spans of recordings (``utt recording start end``).

With a ``segments`` file, ``wav.scp`` is keyed by recording rather than by utterance,
so every step that renames or filters utterances must carry the recordings along.
An end of ``-1`` means "to the end of the recording" (Kaldi's convention).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from asrtrain.core.errors import InputError
from asrtrain.data.kaldi_dir import read_table

#: The end time that means "to the end of the recording".
TO_END = -1.0


@dataclass(frozen=True)
class Segment:
    """One utterance's span of a recording, in seconds."""

    recording: str
    start: float
    end: float

    def line(self) -> str:
        """The value of a ``segments`` line (after the utterance id)."""
        return f"{self.recording} {format_time(self.start)} {format_time(self.end)}"


def format_time(seconds: float) -> str:
    """Seconds to the millisecond (finer than a 10 ms frame), without trailing zeros."""
    if seconds == TO_END:
        return "-1"
    text = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return text or "0"


def read_segments(path: str | os.PathLike[str]) -> dict[str, Segment]:
    """Read and check a ``segments`` file: four fields, 0 <= start < end (or end -1)."""
    out: dict[str, Segment] = {}
    for number, (utt, value) in enumerate(read_table(path).items(), start=1):
        parts = value.split()
        try:
            if len(parts) != 3:
                raise ValueError
            segment = Segment(parts[0], float(parts[1]), float(parts[2]))
        except ValueError:
            raise InputError(f"line {number}: expected 'utt recording start end', got "
                             f"{utt} {value}", path) from None
        problem = span_problem(segment)
        if problem:
            raise InputError(f"line {number}: utterance {utt!r} {problem}", path)
        out[utt] = segment
    return out


def span_problem(segment: Segment) -> str | None:
    """What is wrong with a segment's times, in words (None: 0 <= start < end, or end -1).
    An end before the start is usually swapped columns: said as such, not as a short clip."""
    start, end = segment.start, segment.end
    if not (math.isfinite(start) and math.isfinite(end)):
        return "has a non-finite time"
    if start < 0:
        return f"starts at {start:g} s, before the recording does"
    if end == TO_END:
        return None
    if end < 0:
        return f"ends at {end:g} s (-1 means the end of the recording; no other time is negative)"
    if end < start:
        return f"ends at {end:g} s, before it starts at {start:g} s (start and end swapped?)"
    if end == start:
        return f"is empty: it starts and ends at {start:g} s"
    return None

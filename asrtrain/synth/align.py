"""Phone alignments from espeak's phoneme events: exact segments, then 10 ms frame labels.

Each phoneme event marks the sample where the phoneme starts, so the segments
are exact at 22050 Hz. Two corrections make them right for a recogniser: the
closure of an unvoiced stop (a run of exact zeros before the burst, where espeak
puts the event) belongs to the stop; and espeak's names are folded into our
phone set. Frame labels follow Kaldi's frame convention (snip_edges): frame t
covers samples [t*shift, t*shift + win) and takes the label of the segment that
holds its centre sample t*shift + win/2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asrtrain.synth.phones import CLOSURE_STOPS, SIL, fold

#: Longest closure moved back (60 ms at 22050 Hz; measured closures are 39-53 ms).
MAX_CLOSURE = 1323


@dataclass(frozen=True)
class Segment:
    """A phone over samples [start, end)."""

    phone: str
    start: int
    end: int


def segments_from_events(events: list[tuple[str, int]], samples: np.ndarray) -> list[Segment]:
    """Exact phone segments covering [0, len(samples)), at the synthesizer's rate."""
    n = len(samples)
    marks = sorted(((min(max(s, 0), n), name) for name, s in events), key=lambda m: m[0])
    starts = [s for s, _ in marks]
    for i, (start, name) in enumerate(marks):
        if name.lstrip("',") in CLOSURE_STOPS:
            floor = starts[i - 1] + 1 if i else 0
            starts[i] = _closure_start(samples, start, max(floor, start - MAX_CLOSURE))
    raw: list[tuple[str, int, int]] = []
    if not marks or starts[0] > 0:
        raw.append((SIL, 0, starts[0] if marks else n))
    for i, (_, name) in enumerate(marks):
        end = starts[i + 1] if i + 1 < len(marks) else n
        raw.extend(_folded(name, starts[i], end))
    return merge(raw)


def _closure_start(samples: np.ndarray, event: int, floor: int) -> int:
    """Move back over the run of exact zeros that ends at the burst."""
    start = event
    while start > floor and samples[start - 1] == 0:
        start -= 1
    return start


def _folded(name: str, start: int, end: int) -> list[tuple[str, int, int]]:
    """One event's phones; a two-phone fold (``@L``) splits its time in half."""
    phones = fold(name)
    if not phones:
        return [("", start, end)]  # dropped: merge() gives the time to the previous phone
    bounds = np.linspace(start, end, len(phones) + 1).round().astype(int)
    return [(p, int(a), int(b)) for p, a, b in zip(phones, bounds[:-1], bounds[1:], strict=True)]


def merge(raw: list[tuple[str, int, int]]) -> list[Segment]:
    """Drop empty segments, give dropped phones' time to their predecessor, join sils."""
    out: list[list] = []
    for phone, start, end in raw:
        if end <= start:
            continue
        if out and (phone == "" or (phone == SIL and out[-1][0] == SIL)):
            out[-1][2] = end
        elif phone == "":
            out.append([SIL, start, end])
        else:
            out.append([phone, start, end])
    return [Segment(p, s, e) for p, s, e in out]


def rescale(segments: list[Segment], rate_in: int, rate_out: int, n_out: int,
            pad_start: int, n_total: int) -> list[Segment]:
    """Boundaries at the output rate, shifted by the leading pad, ending at ``n_total``.

    The pads are silence, so they join the first and last segments when those are sil.
    """
    raw = [(SIL, 0, pad_start)]
    for seg in segments:
        start = pad_start + round(seg.start * rate_out / rate_in)
        end = pad_start + (n_out if seg.end == segments[-1].end else
                           round(seg.end * rate_out / rate_in))
        raw.append((seg.phone, start, end))
    raw.append((SIL, pad_start + n_out, n_total))
    return merge(raw)


def num_frames(n_samples: int, sample_rate: int) -> int:
    """kaldi-native-fbank's frame count with 25 ms / 10 ms windows and snip_edges."""
    win, shift = frame_geometry(sample_rate)
    return 0 if n_samples < win else 1 + (n_samples - win) // shift


def frame_geometry(sample_rate: int) -> tuple[int, int]:
    """(window, shift) in samples for 25 ms / 10 ms."""
    return sample_rate * 25 // 1000, sample_rate // 100


def frame_labels(segments: list[Segment], n_samples: int, sample_rate: int,
                 ids: dict[str, int]) -> np.ndarray:
    """One phone id per frame: the segment holding the frame's centre sample."""
    win, shift = frame_geometry(sample_rate)
    centres = np.arange(num_frames(n_samples, sample_rate)) * shift + win // 2
    starts = np.array([s.start for s in segments])
    which = np.searchsorted(starts, centres, side="right") - 1
    labels = np.array([ids[s.phone] for s in segments], dtype=np.int32)
    return labels[which]


def ctm_lines(utt: str, segments: list[Segment], sample_rate: int) -> list[str]:
    """``uttid 1 start dur phone`` with exact times (7 decimals hold any 8/16 kHz sample)."""
    return [f"{utt} 1 {s.start / sample_rate:.7f} {(s.end - s.start) / sample_rate:.7f} "
            f"{s.phone}" for s in segments]


def speech_phones(segments: list[Segment]) -> list[str]:
    """The phones of an utterance without silences (for in-context pronunciations)."""
    return [s.phone for s in segments if s.phone != SIL]

"""How close learned alignments are to known ones (the synthesizer's exact phone times).

Two figures, as in the forced-alignment literature:

- **frame agreement**: the share of frames whose phone is the reference's;
- **boundary accuracy**: the non-silence phones of both are matched by an edit-distance
  alignment of the two phone strings; for every matched phone its start and its end
  are compared with the reference's, and the share within 10 ms and 20 ms reported
  (an unmatched reference phone counts as two boundaries missed).

A learned boundary at frame b lies between the centres of frames b − 1 and b, so its
time is b·shift + (window − shift)/2: with 25 ms windows and 10 ms shifts, b·10 ms + 7.5 ms.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

FRAME_SHIFT = 0.01
#: Time of the boundary before frame b: b·shift + OFFSET (the midpoint of two frame centres).
OFFSET = 0.0075
TOLERANCES = (0.010, 0.020)


def boundary_time(frame: int) -> float:
    return frame * FRAME_SHIFT + OFFSET


@dataclass
class Agreement:
    """Counts over a corpus; ``report()`` gives the shares."""

    frames: int = 0
    frames_same: int = 0
    boundaries: int = 0
    within: dict[float, int] = field(default_factory=lambda: {t: 0 for t in TOLERANCES})
    phones_matched: int = 0
    phones_ref: int = 0
    abs_errors: list[float] = field(default_factory=list)

    def report(self) -> dict[str, float]:
        out = {"frame_agreement": self.frames_same / max(self.frames, 1),
               "phones_matched": self.phones_matched / max(self.phones_ref, 1),
               "boundaries": float(self.boundaries),
               "median_abs_error_ms": float(np.median(self.abs_errors) * 1000)
               if self.abs_errors else float("nan")}
        for tol, n in self.within.items():
            out[f"within_{round(tol * 1000)}ms"] = n / max(self.boundaries, 1)
        return out


def add_utterance(acc: Agreement, hyp: list[tuple[int, float, float]],
                  ref: list[tuple[int, float, float]], hyp_frames: np.ndarray,
                  ref_frames: np.ndarray, silence: set[int]) -> None:
    """Add one utterance: ``(phone, start s, end s)`` lists and per-frame phone ids."""
    n = min(len(hyp_frames), len(ref_frames))
    acc.frames += len(ref_frames)
    acc.frames_same += int((hyp_frames[:n] == ref_frames[:n]).sum())
    h = [seg for seg in hyp if seg[0] not in silence]
    r = [seg for seg in ref if seg[0] not in silence]
    acc.phones_ref += len(r)
    acc.boundaries += 2 * len(r)
    for i, j in matched_pairs([s[0] for s in h], [s[0] for s in r]):
        acc.phones_matched += 1
        for a, b in ((h[i][1], r[j][1]), (h[i][2], r[j][2])):
            err = abs(a - b)
            acc.abs_errors.append(err)
            for tol in acc.within:
                if err <= tol + 1e-9:
                    acc.within[tol] += 1


def matched_pairs(hyp: list[int], ref: list[int]) -> list[tuple[int, int]]:
    """Index pairs of equal symbols on a minimum edit-distance alignment (kaldialign's,
    which ``score`` uses for words)."""
    import kaldialign

    pairs, i, j = [], 0, 0
    for r, h in kaldialign.align(ref, hyp, -1):
        if r != -1 and h != -1 and r == h:
            pairs.append((i, j))
        i += h != -1
        j += r != -1
    return pairs


def segments_from_frames(phones: np.ndarray, starts: np.ndarray) -> list[tuple[int, float, float]]:
    """``(phone, start s, end s)`` of a frame alignment with its phone starts."""
    ends = np.concatenate([starts[1:], [len(phones)]])
    return [(int(phones[s]), boundary_time(int(s)), boundary_time(int(e)))
            for s, e in zip(starts, ends, strict=True)]


def read_ctm_segments(path, phone_ids: dict[str, int]) -> dict[str, list[tuple[int, float, float]]]:
    """``utt → [(phone id, start, end)]`` of a phone CTM."""
    from asrtrain.core.textio import read_lines

    out: dict[str, list[tuple[int, float, float]]] = {}
    for line in read_lines(path):
        p = line.split()
        if len(p) >= 5:
            start, dur = float(p[2]), float(p[3])
            out.setdefault(p[0], []).append((phone_ids[p[4]], start, start + dur))
    return out

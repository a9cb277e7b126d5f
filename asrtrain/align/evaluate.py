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

from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path

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

    def add(self, other: Agreement) -> Agreement:
        """Both corpora's counts (an alignment job's added to the others')."""
        self.frames += other.frames
        self.frames_same += other.frames_same
        self.boundaries += other.boundaries
        for tol, n in other.within.items():
            self.within[tol] = self.within.get(tol, 0) + n
        self.phones_matched += other.phones_matched
        self.phones_ref += other.phones_ref
        self.abs_errors.extend(other.abs_errors)
        return self


@dataclass
class Reference:
    """Exact alignments of a corpus (the synthesizer's) to measure learned ones against."""

    root: Path
    ids: dict[str, int]
    silence: int

    def measure(self, alis: dict, split: str) -> Agreement | None:
        """The counts of these alignments (an alignment job's) against the reference's
        ``split``; None where it has no ``phone.ctm``."""
        from asrtrain.lang.pdf_ali import read_alignments

        ctm = self.root / split / "phone.ctm"
        if not ctm.exists():
            return None
        segs = read_ctm_segments(ctm, self.ids, only=alis)
        frames = {u: a for u, a in read_alignments(self.root / split / "ali.scp") if u in alis}
        acc = Agreement()
        for utt, a in alis.items():
            if utt in segs and utt in frames:
                add_utterance(acc, segments_from_frames(a.phone, a.starts), segs[utt], a.phone,
                              frames[utt], {self.silence})
        return acc


def agreement(parts: list[Agreement | None]) -> dict[str, float]:
    """The report of the jobs' counts summed (empty where the reference has no split)."""
    if not parts or parts[0] is None:
        return {}
    acc = Agreement()
    for part in parts:
        if part is not None:
            acc.add(part)
    return {k: round(v, 4) for k, v in acc.report().items()}


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


def read_ctm_segments(path, phone_ids: dict[str, int], only: Container[str] | None = None
                      ) -> dict[str, list[tuple[int, float, float]]]:
    """``utt → [(phone id, start, end)]`` of a phone CTM (``only``: of these utterances)."""
    from asrtrain.core.textio import read_lines

    out: dict[str, list[tuple[int, float, float]]] = {}
    for line in read_lines(path):
        p = line.split()
        if len(p) >= 5 and (only is None or p[0] in only):
            start, dur = float(p[2]), float(p[3])
            out.setdefault(p[0], []).append((phone_ids[p[4]], start, start + dur))
    return out

"""Readers for the transcript formats scoring meets: Kaldi ``text``, NIST STM and CTM.

Every reader names the file and the line of anything malformed. CTM words are grouped
into utterances either by the STM segments (sclite's rule, ``segment_hyp_for_utt`` in
sctk: words of a file/channel, in time order, go to the current segment while their
midpoint lies before the segment's end; words before the first segment go to it; the
last segment takes everything left; words that land in an
``IGNORE_TIME_SEGMENT_IN_SCORING`` segment are dropped and counted) or, against a Kaldi
text reference, by their first field (Kaldi writes the utterance id there).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines

log = logging.getLogger("asrtrain.score")

IGNORE_MARKS = ("IGNORE_TIME_SEGMENT_IN_SCORING", "IGNORETIMESEGMENTINSCORING")
FORMATS = ("text", "stm", "ctm")


@dataclass
class Utterance:
    """One scored unit: an utterance of a text file or a segment of an STM."""

    id: str
    speaker: str
    words: list[str]
    file: str = ""
    channel: str = ""
    begin: float | None = None
    end: float | None = None
    ignore: bool = False


@dataclass(frozen=True)
class CtmWord:
    """One CTM line: ``file channel begin duration word [confidence]``."""

    file: str
    channel: str
    begin: float
    dur: float
    word: str
    line: int
    group_mid: float | None = None     # set for a GLM alternation (see split_mapped)

    @property
    def mid(self) -> float:
        return self.begin + self.dur / 2.0 if self.group_mid is None else self.group_mid


@dataclass
class Grouped:
    """CTM words grouped into utterances, with what could not be placed."""

    hyps: dict[str, list[str]]
    ignored_words: int = 0                       # words inside IGNORE segments
    extra: dict[str, int] = field(default_factory=dict)   # key without reference -> words


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Numbered lines that are not blank or comments; undecodable text is an error (never scored)."""
    try:
        lines = read_lines(path)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from None
    for no, line in enumerate(lines, 1):
        s = line.strip()
        if s and not s.startswith(";;") and not s.startswith("#"):
            yield no, s


def _float(text: str, what: str, path: Path, no: int) -> float:
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"line {no}: {what} {text!r} is not a number", path) from None
    if not math.isfinite(v):
        raise InputError(f"line {no}: {what} {text!r} is not finite", path)
    return v


def speaker_of(utt_id: str) -> str:
    """Speaker of an utterance id without utt2spk: the id up to its last ``_`` (Hub5,
    ``sw_4390-A_015445-015911`` -> ``sw_4390-A``), else up to its last ``-`` (this
    project's ``spk-0007-000123`` -> ``spk-0007``), else the id itself."""
    for sep in ("_", "-"):
        if sep in utt_id.strip(sep):
            return utt_id.rsplit(sep, 1)[0]
    return utt_id


def read_text(path: Path, utt2spk: dict[str, str] | None = None) -> list[Utterance]:
    """Kaldi ``text``: ``uttid word word ...`` (an id alone is an empty transcript)."""
    seen: dict[str, int] = {}
    out: list[Utterance] = []
    unknown: list[str] = []
    for no, line in _lines(path):
        parts = line.split()
        utt = parts[0]
        if utt in seen:
            raise InputError(f"line {no}: utterance {utt!r} repeats line {seen[utt]}", path)
        seen[utt] = no
        if utt2spk and utt not in utt2spk:
            unknown.append(utt)
        spk = utt2spk.get(utt, speaker_of(utt)) if utt2spk else speaker_of(utt)
        out.append(Utterance(utt, spk, parts[1:]))
    if unknown:
        log.warning("%s: %d utterance(s) missing from utt2spk, each scored under the speaker its id "
                    "gives, e.g. %s", path, len(unknown), ", ".join(unknown[:3]))
    return out


def stm_utt_id(file: str, channel: str, begin: float, end: float) -> str:
    """Kaldi's Hub5 id for a segment: ``en_4156-A_030185-030248``."""
    return f"{file}-{channel}_{round(begin * 100):06d}-{round(end * 100):06d}"


def read_stm(path: Path) -> list[Utterance]:
    """NIST STM: ``file channel speaker begin end [<labels>] transcript``."""
    out: list[Utterance] = []
    seen: dict[str, int] = {}
    for no, line in _lines(path):
        parts = line.split()
        if len(parts) < 5:
            raise InputError(f"line {no}: an STM line needs 'file channel speaker begin end "
                             f"[<labels>] words', got {len(parts)} fields", path)
        f, ch, spk = parts[:3]
        t1 = _float(parts[3], "begin time", path, no)
        t2 = _float(parts[4], "end time", path, no)
        if t2 < t1:
            raise InputError(f"line {no}: segment ends ({t2}) before it begins ({t1})", path)
        words = parts[5:]
        if words and words[0].startswith("<"):
            k = next((i for i, w in enumerate(words) if w.endswith(">")), None)
            if k is None:
                raise InputError(f"line {no}: unclosed label field {words[0]!r}", path)
            words = words[k + 1:]
        ignore = any(m in " ".join(words).upper() for m in IGNORE_MARKS)
        uid = stm_utt_id(f, ch, t1, t2)
        if uid in seen:
            raise InputError(f"line {no}: segment {uid} repeats line {seen[uid]}", path)
        seen[uid] = no
        out.append(Utterance(uid, spk, [] if ignore else words, f, ch, t1, t2, ignore))
    # sclite aligns a channel's segments in time order
    out.sort(key=lambda u: (u.file, u.channel, u.begin or 0.0, u.end or 0.0))
    return out


def read_ctm(path: Path) -> list[CtmWord]:
    """NIST CTM: ``file channel begin duration word [confidence]``."""
    out: list[CtmWord] = []
    for no, line in _lines(path):
        parts = line.split()
        if len(parts) not in (5, 6):
            raise InputError(f"line {no}: a CTM line needs 'file channel begin duration word "
                             f"[confidence]', got {len(parts)} fields", path)
        if parts[4].upper().startswith("<ALT"):
            raise InputError(f"line {no}: CTM alternations ({parts[4]}) are not supported; "
                             "give alternations through --glm", path)
        t = _float(parts[2], "begin time", path, no)
        d = _float(parts[3], "duration", path, no)
        if d < 0:
            raise InputError(f"line {no}: negative duration {d}", path)
        if len(parts) == 6 and parts[5] not in ("NA", "na"):
            _float(parts[5], "confidence", path, no)
        out.append(CtmWord(parts[0], parts[1], t, d, parts[4], no))
    return out


def split_mapped(w: CtmWord, mapped: str) -> list[CtmWord]:
    """A CTM word after a GLM rewrite, as ``csrfilt -i ctm`` lays it out: several words
    share the duration equally; an alternation stays one unit whose midpoint is that of
    the last word of its longest alternative (sclite groups an alternation by its
    largest midpoint)."""
    if "{" in mapped:
        alts = mapped.replace("{", " ").replace("}", " ").split("/")
        k = max(1, *(len(a.split()) for a in alts))
        d = w.dur / k
        return [CtmWord(w.file, w.channel, w.begin, w.dur, mapped, w.line,
                        group_mid=w.begin + w.dur - d / 2.0)]
    parts = mapped.split()
    if len(parts) <= 1:
        return [CtmWord(w.file, w.channel, w.begin, w.dur, mapped, w.line)]
    d = w.dur / len(parts)
    return [CtmWord(w.file, w.channel, w.begin + i * d, d, p, w.line)
            for i, p in enumerate(parts)]


def group_ctm_by_stm(words: list[CtmWord], segments: list[Utterance],
                     rewrite: Callable[[str], str] | None = None) -> Grouped:
    """Give each STM segment its CTM words, as sclite's ``segment_hyp_for_utt`` does
    (after ``rewrite``, the GLM, has mapped each word as csrfilt would)."""
    by_chan: dict[tuple[str, str], list[CtmWord]] = {}
    for w in words:
        for m in split_mapped(w, rewrite(w.word)) if rewrite is not None else [w]:
            by_chan.setdefault((m.file, m.channel), []).append(m)
    for ws in by_chan.values():
        ws.sort(key=lambda w: (w.begin, w.line))
    seg_chan: dict[tuple[str, str], list[Utterance]] = {}
    for s in segments:
        seg_chan.setdefault((s.file, s.channel), []).append(s)
    out = Grouped({})
    for key, ws in by_chan.items():
        if key not in seg_chan:
            out.extra[f"{key[0]} {key[1]}"] = len(ws)
    for key, segs in seg_chan.items():
        if key not in by_chan:
            continue                  # no words at all: these segments miss a hypothesis
        ws = by_chan[key]
        k = 0
        for i, seg in enumerate(segs):
            start = k
            if i == len(segs) - 1:
                k = len(ws)
            else:
                while k < len(ws) and ws[k].mid < (seg.end or 0.0):
                    k += 1
            if seg.ignore:
                out.ignored_words += k - start
                continue
            out.hyps[seg.id] = [t for w in ws[start:k] for t in w.word.split()]
    return out


def group_ctm_by_utt(words: list[CtmWord]) -> Grouped:
    """Kaldi's per-utterance CTM: the first field is the utterance id."""
    by_utt: dict[str, list[CtmWord]] = {}
    for w in words:
        by_utt.setdefault(w.file, []).append(w)
    return Grouped({u: [w.word for w in sorted(ws, key=lambda w: (w.begin, w.line))]
                    for u, ws in by_utt.items()})


def sniff_format(path: Path) -> str:
    """``stm`` / ``ctm`` by extension, else by the shape of the first lines, else ``text``."""
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("stm", "ctm"):
        return suffix
    looks = {"stm": True, "ctm": True}
    n = 0
    for _no, line in _lines(path):
        parts = line.split()
        looks["ctm"] &= len(parts) in (5, 6) and _is_num(parts[2]) and _is_num(parts[3])
        looks["stm"] &= len(parts) >= 5 and _is_num(parts[3]) and _is_num(parts[4])
        n += 1
        if n >= 20:
            break
    if n and looks["ctm"] and not looks["stm"]:
        return "ctm"
    if n and looks["stm"] and not looks["ctm"]:
        return "stm"
    return "text"


def _is_num(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True

"""Kaldi data directories: read their files, write them sorted, validate them.

A data dir is a set of text tables keyed by utterance (``text``, ``wav.scp``,
``utt2spk``, ``utt2dur``, ``feats.scp``, ``ali.scp``, ``utt2num_frames``) or by
speaker (``spk2utt``, ``spk2gender``, ``cmvn.scp``). Every later stage reads them,
so :func:`validate_data_dir` checks what Kaldi's ``validate_data_dir.sh`` checks
(sorted unique keys, ``utt2spk`` and ``spk2utt`` agreeing, every utterance with
text and audio) and reports the first problem with the file and line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from asrtrain.core.atomic import atomic_open
from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines

PathLike = str | os.PathLike[str]

#: Tables keyed by utterance id; the ones listed in UTT_FULL must cover every utterance.
UTT_TABLES = ("text", "wav.scp", "utt2dur", "feats.scp", "utt2num_frames", "ali.scp")
#: Tables keyed by speaker id.
SPK_TABLES = ("spk2gender", "cmvn.scp")
#: Utterance tables that must hold exactly the utterances of utt2spk when present
#: (alignments may lack a few utterances unless required, as after a failed alignment).
UTT_FULL = ("text", "wav.scp", "utt2dur", "feats.scp", "utt2num_frames")


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    """Numbered non-empty lines; a missing or undecodable file is an InputError naming it."""
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            raise InputError(f"line {number}: empty line", path)
        yield number, line


def read_table(path: PathLike, allow_empty_value: bool = False) -> dict[str, str]:
    """Read ``key value...`` lines into an ordered dict; duplicate keys are errors."""
    path = Path(path)
    table: dict[str, str] = {}
    for number, line in _lines(path):
        parts = line.strip().split(maxsplit=1)
        key = parts[0]
        value = parts[1].strip() if len(parts) > 1 else ""
        if not value and not allow_empty_value:
            raise InputError(f"line {number}: no value after key {key!r}", path)
        if key in table:
            raise InputError(f"line {number}: duplicate key {key!r}", path)
        table[key] = value
    return table


def read_scp(path: PathLike) -> dict[str, str]:
    """``key rxspecifier`` (a path, ``ark:offset``, or a pipe ``cmd |``)."""
    return read_table(path)


def read_text(path: PathLike) -> dict[str, list[str]]:
    """``uttid WORD WORD ...``; an utterance may have an empty transcript."""
    return {k: v.split() for k, v in read_table(path, allow_empty_value=True).items()}


def read_utt2spk(path: PathLike) -> dict[str, str]:
    """``uttid spkid`` (exactly one speaker per utterance)."""
    path = Path(path)
    table = read_table(path)
    for number, (utt, spk) in enumerate(table.items(), start=1):
        if len(spk.split()) != 1:
            raise InputError(f"line {number}: utterance {utt!r} must have one speaker, "
                             f"got {spk!r}", path)
    return table


def read_spk2utt(path: PathLike) -> dict[str, list[str]]:
    """``spkid utt1 utt2 ...``."""
    return {k: v.split() for k, v in read_table(path).items()}


def _numbers(path: PathLike, kind: type) -> dict[str, float] | dict[str, int]:
    path = Path(path)
    out: dict = {}
    for number, (key, value) in enumerate(read_table(path).items(), start=1):
        try:
            parsed = kind(value)
        except ValueError:
            raise InputError(f"line {number}: {key!r} has {value!r}, expected a "
                             f"{kind.__name__}", path) from None
        if isinstance(parsed, float) and not math.isfinite(parsed):
            raise InputError(f"line {number}: {key!r} has non-finite {value!r}", path)
        if parsed <= 0:
            raise InputError(f"line {number}: {key!r} has non-positive {value!r}", path)
        out[key] = parsed
    return out


def read_utt2dur(path: PathLike) -> dict[str, float]:
    """``uttid seconds`` (positive)."""
    return _numbers(path, float)  # type: ignore[return-value]


def read_utt2num_frames(path: PathLike) -> dict[str, int]:
    """``uttid frames`` (positive integer)."""
    return _numbers(path, int)  # type: ignore[return-value]


def read_spk2gender(path: PathLike) -> dict[str, str]:
    """``spkid m|f``."""
    path = Path(path)
    table = read_table(path)
    for number, (spk, gender) in enumerate(table.items(), start=1):
        if gender not in ("m", "f"):
            raise InputError(f"line {number}: speaker {spk!r} has gender {gender!r}, "
                             "expected m or f", path)
    return table


def write_table(path: PathLike, rows: Mapping[str, str | Sequence[str]]) -> None:
    """Write ``key value`` lines sorted by key (C order), atomically.

    A sequence value is joined by spaces (a transcript, a speaker's utterances).
    """
    with atomic_open(path, "w", encoding="utf-8") as fh:
        for key in sorted(rows, key=_c_order):
            value = rows[key]
            text = value if isinstance(value, str) else " ".join(value)
            fh.write(f"{key} {text}\n" if text else f"{key}\n")


def spk2utt_from_utt2spk(utt2spk: Mapping[str, str]) -> dict[str, list[str]]:
    """Invert utt2spk, keeping utterances in sorted order within each speaker."""
    out: dict[str, list[str]] = {}
    for utt in sorted(utt2spk, key=_c_order):
        out.setdefault(utt2spk[utt], []).append(utt)
    return {spk: out[spk] for spk in sorted(out, key=_c_order)}


def _c_order(key: str) -> bytes:
    """Kaldi sorts with LC_ALL=C: byte order of the UTF-8 text."""
    return key.encode("utf-8")


def _check_sorted(path: Path, keys: Iterable[str]) -> None:
    previous: bytes | None = None
    for number, key in enumerate(keys, start=1):
        current = _c_order(key)
        if previous is not None and current <= previous:
            raise InputError(f"line {number}: key {key!r} is not in sorted (LC_ALL=C) order",
                             path)
        previous = current


@dataclass(frozen=True)
class DataDirSummary:
    """What a valid data dir holds: its utterances and speakers, in file order."""

    path: Path
    utterances: list[str]
    speakers: list[str]
    files: tuple[str, ...]

    @property
    def num_utterances(self) -> int:
        return len(self.utterances)


def validate_data_dir(path: PathLike, require: Sequence[str] = ("text",)) -> DataDirSummary:
    """Check a Kaldi data dir; raise InputError naming the file and line of the first problem.

    Always required: ``utt2spk`` and one of ``wav.scp``/``feats.scp``; ``spk2utt`` must
    agree with ``utt2spk`` where it exists (where it does not, it is what
    ``utils/utt2spk_to_spk2utt.pl`` would make of ``utt2spk``: the stages that write a dir
    write it so). ``require`` names further files that must exist (e.g. ``("text",
    "wav.scp", "ali.scp")``); a required utterance table must cover every utterance. Every
    file present is checked whether required or not.
    """
    root = Path(path)
    if not root.is_dir():
        raise InputError("not a directory (expected a Kaldi data dir)", root)
    for name in ("utt2spk", *require):
        if not (root / name).is_file():
            raise InputError(f"missing {name}", root)
    if not (root / "wav.scp").is_file() and not (root / "feats.scp").is_file():
        raise InputError("has neither wav.scp nor feats.scp", root)

    utt2spk = read_utt2spk(root / "utt2spk")
    if not utt2spk:
        raise InputError("no utterances", root / "utt2spk")
    _check_sorted(root / "utt2spk", utt2spk)
    _check_speaker_prefix_order(root / "utt2spk", utt2spk)
    expected = spk2utt_from_utt2spk(utt2spk)
    if (root / "spk2utt").is_file():
        spk2utt = read_spk2utt(root / "spk2utt")
        _check_sorted(root / "spk2utt", spk2utt)
        _check_spk2utt(root / "spk2utt", spk2utt, expected)

    utts = set(utt2spk)
    present = [name for name in UTT_TABLES + SPK_TABLES if (root / name).is_file()]
    for name in present:
        keys = list(_read_for_validation(root / name))
        _check_sorted(root / name, keys)
        if name in SPK_TABLES:
            _check_same(root / name, keys, set(expected), "speaker", "spk2utt")
        elif name in UTT_FULL or name in require:
            _check_same(root / name, keys, utts, "utterance", "utt2spk")
        else:
            _check_subset(root / name, keys, utts)
    return DataDirSummary(root, list(utt2spk), list(expected), tuple(present))


def _read_for_validation(path: Path) -> Mapping[str, object]:
    readers: dict[str, Callable[[PathLike], Mapping[str, object]]] = {
        "text": read_text, "utt2dur": read_utt2dur, "utt2num_frames": read_utt2num_frames,
        "spk2gender": read_spk2gender}
    return readers.get(path.name, read_scp)(path)


def _check_speaker_prefix_order(path: Path, utt2spk: Mapping[str, str]) -> None:
    """Sorting by utterance must also group by speaker (Kaldi: speaker-prefixed ids)."""
    seen: set[str] = set()
    last = None
    for number, spk in enumerate(utt2spk.values(), start=1):
        if spk != last:
            if spk in seen:
                raise InputError(f"line {number}: utterances of speaker {spk!r} are not "
                                 "contiguous when sorted (prefix utterance ids with the "
                                 "speaker id)", path)
            seen.add(spk)
            last = spk


def _check_spk2utt(path: Path, spk2utt: Mapping[str, list[str]],
                   expected: Mapping[str, list[str]]) -> None:
    for number, (spk, utts) in enumerate(spk2utt.items(), start=1):
        if spk not in expected:
            raise InputError(f"line {number}: speaker {spk!r} has no utterance in utt2spk",
                             path)
        if sorted(utts, key=_c_order) != expected[spk]:
            raise InputError(f"line {number}: utterances of speaker {spk!r} disagree with "
                             "utt2spk", path)
    missing = [spk for spk in expected if spk not in spk2utt]
    if missing:
        raise InputError(f"speaker {missing[0]!r} of utt2spk is missing "
                         f"({len(missing)} speaker(s) missing)", path)


def _check_same(path: Path, keys: list[str], wanted: set[str], kind: str, source: str) -> None:
    _check_subset(path, keys, wanted, kind, source)
    missing = sorted(wanted - set(keys), key=_c_order)
    if missing:
        raise InputError(f"{len(missing)} {kind}(s) of {source} missing, first {missing[0]!r}",
                         path)


def _check_subset(path: Path, keys: list[str], wanted: set[str], kind: str = "utterance",
                  source: str = "utt2spk") -> None:
    for number, key in enumerate(keys, start=1):
        if key not in wanted:
            raise InputError(f"line {number}: {kind} {key!r} is not in {source}", path)

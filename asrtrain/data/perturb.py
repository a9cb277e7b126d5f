"""Speed perturbation of a data dir, as Kaldi's ``utils/data/perturb_data_dir_speed_3way.sh``.

Every utterance is copied at each speed. The audio of a copy is a ``wav.scp`` pipe
through sox's ``speed`` effect (tempo and pitch change together; sox resamples back
to the input's rate, so features see the sample rate they expect and 1/speed as
many samples). Ids are prefixed ``sp<speed>-`` (utterances, speakers and, with
``segments``, recordings; speed 1 keeps the original ids), as Kaldi does, so each
perturbed speaker gets its own CMVN statistics; times and durations are divided by
the speed. ``utt2uniq`` ties each copy to its original, which is how dev selection
and the leakage check know the copies of a speaker for one speaker.

No audio is written here: every reader of the dir (``prepare features``) runs sox.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shlex
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.data.dir_view import UTT2UNIQ, DataDir, load_dir, other_files
from asrtrain.data.segments import TO_END, format_time

log = logging.getLogger("asrtrain.perturb")

#: Kaldi's 3-way perturbation.
DEFAULT_SPEEDS = (0.9, 1.0, 1.1)
#: The program the wav.scp pipes run.
SOX = "sox"
#: Decimals a speed keeps (its label is the speed sox is given).
_SPEED_DECIMALS = 6
#: The prefix a perturbed copy's ids carry (``sp0.9-``), possibly several times over.
_SPEED_PREFIX = re.compile(r"^sp\d+(\.\d+)?-")

#: Tables a perturbed copy carries, every key (utterance, speaker, recording) prefixed.
#: The rest (features, alignments, CMVN) describe the original audio and are left out.
CARRIED = ("text", "utt2spk", "utt2dur", "utt2lang", "segments", "wav.scp", "reco2dur",
           "reco2file_and_channel", "spk2gender")


def speed_label(speed: float) -> str:
    """A speed as written in ids and given to sox: ``0.9``, ``1.1``, ``1``."""
    return f"{speed:.{_SPEED_DECIMALS}f}".rstrip("0").rstrip(".")


def parse_speeds(text: str) -> tuple[float, ...]:
    """``0.9,1.0,1.1`` -> speeds; non-numbers, speeds <= 0 and repeats are ConfigErrors."""
    speeds: list[float] = []
    for token in (t.strip() for t in text.split(",")):
        try:
            speed = float(speed_label(float(token)))
        except ValueError:
            raise ConfigError(f"--speeds: {token!r} is not a number") from None
        if not math.isfinite(speed) or speed <= 0:
            raise ConfigError(f"--speeds: {token!r} must be a finite speed above 0")
        if speed in speeds:
            raise ConfigError(f"--speeds: {token!r} is given twice")
        speeds.append(speed)
    return tuple(speeds)


def prefix(speed: float) -> str:
    """The id prefix of a copy at ``speed`` (none for the original speed)."""
    return "" if speed == 1.0 else f"sp{speed_label(speed)}-"


def base_speaker(speaker: str) -> str:
    """A speaker id without its speed prefixes: the person a perturbed copy came from."""
    while (match := _SPEED_PREFIX.match(speaker)) is not None:
        speaker = speaker[match.end():]
    return speaker


def require_sox() -> None:
    """The perturbed dir is unreadable without sox: say so now, not at feature time."""
    if shutil.which(SOX) is None:
        raise ConfigError(f"{SOX} not found on PATH: speed-perturbed wav.scp entries are sox "
                          "pipes (install it, e.g. apt-get install sox)")


def sox_entry(entry: str, speed: float) -> str:
    """The wav.scp value of ``entry`` played at ``speed``: a pipe through ``sox speed``.

    A file is sox's input (``-t wav`` for .wav names as Kaldi writes it; other formats
    by their extension); a pipe is extended by one more command reading its output.
    """
    from asrtrain.data.audio import _ARK_OFFSET, is_pipe  # numpy behind it: not at import

    if speed == 1.0:
        return entry
    effect = f"-t wav - speed {speed_label(speed)} |"
    if is_pipe(entry):
        return f"{entry.rstrip()[:-1].rstrip()} | {SOX} - {effect}"
    if _ARK_OFFSET.match(entry) and not Path(entry).exists():
        raise InputError(f"{entry!r} is an offset into an ark, which sox cannot read "
                         "(list audio files or pipes in wav.scp)")
    typed = "-t wav " if entry.lower().endswith(".wav") else ""
    return f"{SOX} {typed}{shlex.quote(entry)} {effect}"


@dataclass(frozen=True)
class PerturbSummary:
    """What was written: utterances per speed, tables carried and left out."""

    utterances: dict[str, int]
    speakers: int
    carried: tuple[str, ...]
    left_out: tuple[str, ...]


def perturb_dir(data: str | os.PathLike[str], out: str | os.PathLike[str],
                speeds: Sequence[float] = DEFAULT_SPEEDS,
                params: dict[str, Any] | None = None) -> PerturbSummary:
    """Write OUT: DATA's utterances at each of ``speeds``, atomically (complete or absent)."""
    from asrtrain.core.atomic import atomic_path
    from asrtrain.core.lock import hold
    from asrtrain.core.runlog import command_run
    from asrtrain.data.kaldi_dir import spk2utt_from_utt2spk, write_table

    data, out = Path(data), Path(out)
    if out.resolve() == data.resolve():
        raise ConfigError("OUT is DATA: write the perturbed copy to a new dir", out)
    require_sox()
    src = load_dir(data)
    tables = {name: table for name in CARRIED if (table := _source_table(src, name)) is not None}
    uniq = src.table(UTT2UNIQ) or {}
    rows: dict[str, dict[str, str]] = {name: {} for name in (*tables, UTT2UNIQ)}
    for speed in speeds:
        copy = _copy(src, tables, speed)
        copy[UTT2UNIQ] = {prefix(speed) + u: uniq.get(u, u) for u in src.utt2spk}
        for name, table in copy.items():
            _merge(rows[name], table, data / name, speed)
    left_out = tuple(other_files(data, {*rows, "spk2utt"}))
    with hold(out), atomic_path(out) as tmp:  # locked until it is renamed into place
        tmp.mkdir()
        with command_run("prepare-perturb", tmp, params, lock=out):
            for name, table in rows.items():
                write_table(tmp / name, table)
            write_table(tmp / "spk2utt", spk2utt_from_utt2spk(rows["utt2spk"]))
            if left_out:
                log.warning("not carried to %s (features, alignments and CMVN describe the "
                            "original audio): %s", out, " ".join(left_out))
            counts = {speed_label(s): len(src.utt2spk) for s in speeds}
            log.info("%s: %d utterances at speeds %s", out, len(rows["utt2spk"]),
                     ",".join(counts))
    return PerturbSummary(counts, len(set(rows["utt2spk"].values())),
                          tuple(sorted([*rows, "spk2utt"])), left_out)


def _source_table(src: DataDir, name: str) -> dict[str, str] | None:
    """A table of DATA as text; segments and durations read (so checked) as numbers first."""
    from asrtrain.data.kaldi_dir import read_utt2dur

    if name == "segments" and src.segments is not None:
        return {utt: seg.line() for utt, seg in src.segments.items()}
    if name == "wav.scp":
        return src.wav
    if name in ("utt2dur", "reco2dur") and (src.path / name).is_file():
        return {key: repr(seconds) for key, seconds in read_utt2dur(src.path / name).items()}
    return src.table(name)


def _copy(src: DataDir, tables: dict[str, dict[str, str]], speed: float) -> dict[str, dict[str, str]]:
    """Every carried table at one speed: keys renamed, values renamed or rescaled."""
    p = prefix(speed)
    values: dict[str, Callable[[str], str]] = {
        "utt2spk": lambda v: p + v,
        "utt2dur": lambda v: format_time(float(v) / speed),
        "reco2dur": lambda v: format_time(float(v) / speed),
        "wav.scp": lambda v: sox_entry(v, speed),
        "segments": lambda v: _segment_value(v, p, speed),
    }
    out: dict[str, dict[str, str]] = {}
    for name, table in tables.items():
        value = values.get(name, lambda v: v)
        try:
            out[name] = {p + k: value(v) for k, v in table.items()}
        except InputError as exc:
            raise InputError(str(exc), src.path / name) from None
    return out


def _segment_value(value: str, p: str, speed: float) -> str:
    """``reco start end`` of a copy: its recording renamed, its times divided by the speed."""
    reco, start, end = value.split()
    new_end = TO_END if float(end) == TO_END else float(end) / speed
    return f"{p}{reco} {format_time(float(start) / speed)} {format_time(new_end)}"


def _merge(into: dict[str, str], table: dict[str, str], where: Path, speed: float) -> None:
    """Add one speed's rows; an id that another speed already made is an InputError."""
    for key, value in table.items():
        if key in into:
            raise InputError(f"id {key!r} of the copy at speed {speed_label(speed)} is "
                             "already taken (is DATA perturbed already?)", where)
        into[key] = value

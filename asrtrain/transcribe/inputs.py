"""What ``transcribe`` was given, turned into one Kaldi data dir the front end reads.

Three kinds of input: audio files (each read, made mono at the model's rate, cut at
pauses when long), a Kaldi data dir (``wav.scp``, with ``segments`` and ``utt2spk`` when
it has them: used as it is, so its words are ``decode``'s), or a list file (``.txt``,
``.lst``, ``.list``: one audio path per line). A file that cannot be used is a
:class:`Failure` with a one-line reason; the others go on.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from asrtrain.core.errors import AsrtrainError, InputError
from asrtrain.transcribe.audio import DEFAULT_CHANNEL, Audio, load, write_wav
from asrtrain.transcribe.segment import FRAME, MAX_SECONDS, cut, frame_levels, has_speech

log = logging.getLogger("asrtrain.transcribe")

#: Suffixes of a list file (one audio path per line).
LIST_SUFFIXES = (".txt", ".lst", ".list")


@dataclass
class Failure:
    """An input that gave no transcript, and why (one line)."""

    source: str
    reason: str


@dataclass
class Piece:
    """An utterance of the work data dir: which input it belongs to, and where in it."""

    source: str       # the input path (audio), or the utterance id (data dir)
    recording: str    # the id the outputs use
    offset: float     # seconds from the start of the input


@dataclass
class Plan:
    """The work data dir and how its utterances map back to the inputs."""

    data_dir: Path
    pieces: dict[str, Piece] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)    # recording → seconds
    sources: dict[str, str] = field(default_factory=dict)        # recording → input
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)               # said once (channel, rate)


def expand(inputs: list[str | os.PathLike[str]]) -> list[Path]:
    """The inputs with list files replaced by the paths they list (relative to the list)."""
    out: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.suffix.lower() in LIST_SUFFIXES and path.is_file():
            from asrtrain.core.textio import read_lines

            for line in read_lines(path):
                if line.strip() and not line.lstrip().startswith("#"):
                    entry = Path(line.strip())
                    out.append(entry if entry.is_absolute() else path.parent / entry)
        else:
            out.append(path)
    return out


def is_data_dir(path: Path) -> bool:
    return path.is_dir() and (path / "wav.scp").is_file()


def recording_id(path: Path, taken: set[str]) -> str:
    """A Kaldi-safe id from the file name, unique among ``taken``."""
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem) or "rec"
    rid, n = base, 1
    while rid in taken:
        n += 1
        rid = f"{base}-{n}"
    taken.add(rid)
    return rid


def plan_inputs(inputs: list[str | os.PathLike[str]], work: Path, rate: int,
                utt2spk: dict[str, str] | None = None, channel: int = DEFAULT_CHANNEL,
                max_seconds: float = MAX_SECONDS, segment_speakers: bool = False) -> Plan:
    """The work data dir ``work/data`` for ``inputs``; failures recorded, not raised.
    ``segment_speakers``: each cut segment is its own speaker (CMVN, i-vectors and fMLLR per
    segment: recordings of several voices), else each file is (or ``utt2spk``'s speaker)."""
    from asrtrain.data.kaldi_dir import spk2utt_from_utt2spk, write_table

    data = work / "data"
    (data / "wav").mkdir(parents=True, exist_ok=True)
    plan = Plan(data)
    wav, segments, speakers = {}, {}, {}
    taken: set[str] = set()
    said: set[str] = set()
    paths = expand(inputs)
    if any(is_data_dir(p) for p in paths):
        if len(paths) > 1:
            raise InputError("a Kaldi data dir is transcribed alone (not with other inputs)")
        _add_data_dir(paths[0], plan)
        return plan
    for path in paths:
        try:
            audio = load(path, rate, channel)
        except AsrtrainError as exc:
            plan.failures.append(Failure(str(path), str(exc)))
            continue
        _note_conversion(path, audio, plan, said)
        if audio.seconds < FRAME:
            plan.failures.append(Failure(str(path), f"{path}: too short ({audio.seconds * 1000:.0f} "
                                                    f"ms: one {FRAME * 1000:.0f} ms frame at least)"))
            continue
        levels = frame_levels(audio.samples, rate)
        if not has_speech(levels):
            plan.failures.append(Failure(str(path), f"{path}: no speech ({audio.seconds:.2f} s of "
                                                    "silence)"))
            continue
        rid = recording_id(path, taken)
        if audio.converted:  # read as written here; else the file itself (its own format)
            target = data / "wav" / f"{rid}.wav"
            write_wav(target, audio)
        else:
            target = data / "wav" / f"{rid}{path.suffix}"
            os.symlink(path.resolve(), target)
        wav[rid] = str(target.resolve())
        plan.durations[rid] = audio.seconds
        plan.sources[rid] = str(path)
        speaker = _speaker(path, rid, utt2spk)
        pieces = cut(audio.samples, rate, max_seconds)
        whole = len(pieces) == 1 and pieces[0].start == 0.0 and pieces[0].end >= audio.seconds
        for seg in pieces:
            utt = rid if whole else f"{rid}-{int(seg.start * 100):07d}-{int(seg.end * 100):07d}"
            segments[utt] = f"{rid} 0 -1" if whole else f"{rid} {seg.start:.2f} {seg.end:.2f}"
            speakers[utt] = utt if segment_speakers else speaker
            plan.pieces[utt] = Piece(str(path), rid, 0.0 if whole else seg.start)
    if speakers:
        write_table(data / "wav.scp", wav)
        write_table(data / "utt2spk", speakers)
        write_table(data / "spk2utt", spk2utt_from_utt2spk(speakers))
        if segments:
            write_table(data / "segments", segments)
    return plan


def _note_conversion(path: Path, audio: Audio, plan: Plan, said: set[str]) -> None:
    """Say once per kind what was done to make the audio fit (a channel kept, resampled)."""
    if audio.channels > 1 and "channel" not in said:
        said.add("channel")
        plan.notes.append(f"{path}: {audio.channels} channels: channel {audio.channel + 1} is "
                          "transcribed (--channel to choose another; said once)")
    if audio.source_rate != audio.rate and "rate" not in said:
        said.add("rate")
        plan.notes.append(f"{path}: {audio.source_rate} Hz resampled to the model's "
                          f"{audio.rate} Hz (said once)")


def _speaker(path: Path, rid: str, utt2spk: dict[str, str] | None) -> str:
    """The file's speaker: from ``--utt2spk`` (keyed by path, file name or id), else the file."""
    if utt2spk:
        for key in (str(path), path.name, path.stem, rid):
            if key in utt2spk:
                return utt2spk[key]
    return rid


def _add_data_dir(path: Path, plan: Plan) -> None:
    """A Kaldi data dir as the work dir (its ids and speakers are kept)."""
    from asrtrain.data.kaldi_dir import read_table, read_utt2spk

    shutil.rmtree(plan.data_dir)
    plan.data_dir.mkdir(parents=True)
    for name in ("wav.scp", "segments", "utt2spk", "spk2utt"):
        if (path / name).is_file():
            shutil.copyfile(path / name, plan.data_dir / name)
    if (path / "segments").is_file():
        utts = list(read_table(path / "segments"))
    else:
        utts = list(read_table(path / "wav.scp"))
    if not (path / "utt2spk").is_file():
        from asrtrain.data.kaldi_dir import spk2utt_from_utt2spk, write_table

        write_table(plan.data_dir / "utt2spk", {u: u for u in utts})
        write_table(plan.data_dir / "spk2utt", spk2utt_from_utt2spk({u: u for u in utts}))
    known = read_utt2spk(plan.data_dir / "utt2spk")
    for utt in utts:
        if utt in known:
            plan.pieces[utt] = Piece(utt, utt, 0.0)
            plan.sources[utt] = utt

"""A recipe's data dirs checked together: dev speakers held out, transcripts where needed.

A dev set that shares speakers with train flatters every choice tuned on it, and
one that shares them with test lets test leak into those choices: either is an
error naming the speakers and the dirs. Train and test sharing speakers is only
logged (a one-speaker corpus such as yesno has nothing else). Each dir is also
validated (:func:`~asrtrain.data.dir_view.load_dir`). Train and dev need a
transcript for every utterance (they are trained on and scored); a test dir may
have no ``text`` at all (it is then transcribed, not scored), but not a partial
one, which every later stage's validation refuses.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from asrtrain.core.errors import InputError
from asrtrain.data.dir_view import DataDir, load_dir
from asrtrain.data.kaldi_dir import read_scp, read_table
from asrtrain.data.segments import read_segments
from asrtrain.data.subset import speaker_groups

log = logging.getLogger("asrtrain.check")

#: Speakers named in a message before "and N more".
_NAMED = 5


@dataclass(frozen=True)
class DirReport:
    """One checked dir: what it holds and how many utterances lack a transcript."""

    role: str
    path: Path
    utterances: int
    speakers: int
    without_text: int


def check_dirs(train: str | os.PathLike[str], dev: str | os.PathLike[str] | None = None,
               tests: Sequence[str | os.PathLike[str]] = ()) -> list[DirReport]:
    """Validate the dirs and their separation; an InputError names the first problem."""
    roles = [("train", Path(train))] + ([("dev", Path(dev))] if dev is not None else [])
    roles += [("test", Path(t)) for t in tests]
    loaded: list[tuple[str, DataDir]] = []
    reports = []
    for role, path in roles:
        missing = _without_text(role, path)
        src = load_dir(path, require=("text",) if role != "test" or missing == 0 else ())
        loaded.append((role, src))
        reports.append(DirReport(role, path, len(src.utt2spk), len(speaker_groups(src)), missing))
    persons = [(role, src.path, set(speaker_groups(src))) for role, src in loaded]
    for i, (role_a, path_a, spk_a) in enumerate(persons):
        for role_b, path_b, spk_b in persons[i + 1:]:
            _separate(role_a, path_a, spk_a, role_b, path_b, spk_b)
    return reports


def _without_text(role: str, path: Path) -> int:
    """Utterances with audio but no transcript: an error for train/dev and for a partial test text."""
    utts = list(read_segments(path / "segments")) if (path / "segments").is_file() \
        else list(read_scp(path / "wav.scp"))
    text_path = path / "text"
    if role == "test" and not text_path.is_file():
        log.info("test %s: no text: its %d utterances will be transcribed, not scored", path,
                 len(utts))
        return len(utts)
    text = read_table(text_path, allow_empty_value=True) if text_path.is_file() else {}
    missing = [u for u in utts if u not in text]
    if missing:
        need = ("a test dir needs text for all of them (to score) or no text file (to "
                "transcribe only)" if role == "test" else f"{role} needs one for each")
        raise InputError(f"{len(missing)} of {len(utts)} utterances have no transcript (first "
                         f"{missing[0]!r}); {need}", text_path)
    return 0


def _separate(role_a: str, path_a: Path, spk_a: set[str], role_b: str, path_b: Path,
              spk_b: set[str]) -> None:
    """A dev dir shares no speaker with another dir; train and test sharing one is logged."""
    shared = sorted(spk_a & spk_b)
    if not shared or role_a == role_b:
        return
    named = " ".join(shared[:_NAMED]) + (f" and {len(shared) - _NAMED} more"
                                         if len(shared) > _NAMED else "")
    if "dev" in (role_a, role_b):
        other, where = (role_b, path_b) if role_a == "dev" else (role_a, path_a)
        dev = path_a if role_a == "dev" else path_b
        raise InputError(f"dev {dev} shares {len(shared)} speaker(s) with {other} {where}: "
                         f"{named} (hold dev speakers out, e.g. with asrtrain prepare subset)")
    log.warning("%s %s and %s %s share %d speaker(s): %s (the test is not speaker-independent)",
                role_a, path_a, role_b, path_b, len(shared), named)

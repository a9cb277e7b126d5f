"""A Kaldi data dir as the data-dir steps (perturb, subset, check-dirs) see it.

:func:`~asrtrain.data.kaldi_dir.validate_data_dir` checks a dir whose tables are all
keyed by utterance. With a ``segments`` file, ``wav.scp`` is keyed by recording, which
it does not know: :func:`load_dir` validates the first kind through it and checks
what the second needs here (segments against utt2spk and wav.scp, spk2utt against
utt2spk). It also names every table by its key, so that steps which rename or
filter utterances carry each table along the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from asrtrain.core.errors import InputError
from asrtrain.data.kaldi_dir import (
    read_scp,
    read_spk2utt,
    read_table,
    read_utt2spk,
    spk2utt_from_utt2spk,
    validate_data_dir,
)
from asrtrain.data.segments import Segment, read_segments

#: Tables keyed by utterance (besides wav.scp without segments), carried by utterance.
UTT_KEYED = ("text", "utt2spk", "utt2dur", "utt2uniq", "utt2lang", "utt2num_frames",
             "feats.scp", "ali.scp", "segments")
#: Tables keyed by speaker (spk2utt is rebuilt from utt2spk instead).
SPK_KEYED = ("spk2gender", "cmvn.scp")
#: Tables keyed by recording (besides wav.scp with segments).
RECO_KEYED = ("reco2file_and_channel", "reco2dur")
#: Tables whose values may be empty (an utterance without words).
EMPTY_OK = ("text",)
#: Kaldi's map from a speed-perturbed (or otherwise copied) utterance to its original.
UTT2UNIQ = "utt2uniq"


@dataclass(frozen=True)
class DataDir:
    """A checked data dir: utterances with their speakers, and their audio."""

    path: Path
    utt2spk: dict[str, str]
    wav: dict[str, str]
    segments: dict[str, Segment] | None

    @property
    def speakers(self) -> list[str]:
        """The speakers, sorted (Kaldi's C order)."""
        return list(spk2utt_from_utt2spk(self.utt2spk))

    @property
    def has_copies(self) -> bool:
        """Whether utterances are copies of others (``utt2uniq``: speed-perturbed, say)."""
        return (self.path / UTT2UNIQ).is_file()

    def recording(self, utt: str) -> str:
        """The wav.scp key of an utterance's audio."""
        return self.segments[utt].recording if self.segments is not None else utt

    def table(self, name: str) -> dict[str, str] | None:
        """A table of the dir as ``key -> value`` text, None if the dir has none."""
        path = self.path / name
        return read_table(path, allow_empty_value=name in EMPTY_OK) if path.is_file() else None


def other_files(path: Path, known: set[str]) -> list[str]:
    """Files of a data dir that are none of ``known`` (nor hidden, nor asrtrain's run records)."""
    return sorted(p.name for p in path.iterdir()
                  if p.is_file() and p.name not in known and not p.name.startswith(".")
                  and p.name != "fingerprint.json" and not p.name.endswith(".config.yaml"))


def load_dir(path: str | os.PathLike[str], require: Sequence[str] = ()) -> DataDir:
    """Validate a data dir with audio (``wav.scp``) and read its utterances.

    ``require`` names tables that must exist and cover every utterance (``text``).
    """
    root = Path(path)
    if (root / "segments").is_file():
        return _load_segmented(root, require)
    validate_data_dir(root, require=("wav.scp", *require))
    return DataDir(root, read_utt2spk(root / "utt2spk"), read_scp(root / "wav.scp"), None)


def _load_segmented(root: Path, require: Sequence[str]) -> DataDir:
    """The checks of a segmented dir that validate_data_dir cannot make."""
    for name in ("utt2spk", "wav.scp", *require):
        if not (root / name).is_file():
            raise InputError(f"missing {name}", root)
    utt2spk = read_utt2spk(root / "utt2spk")
    if not utt2spk:
        raise InputError("no utterances", root / "utt2spk")
    if (root / "spk2utt").is_file() and read_spk2utt(root / "spk2utt") != spk2utt_from_utt2spk(utt2spk):
        raise InputError("disagrees with utt2spk (rebuild it from utt2spk, sorted)",
                         root / "spk2utt")
    segments = read_segments(root / "segments")
    wav = read_scp(root / "wav.scp")
    _same_keys(root / "segments", segments, utt2spk)
    for number, (utt, segment) in enumerate(segments.items(), start=1):
        if segment.recording not in wav:
            raise InputError(f"line {number}: recording {segment.recording!r} of utterance "
                             f"{utt!r} is not in wav.scp", root / "segments")
    for name in require:
        table = read_table(root / name, allow_empty_value=name in EMPTY_OK)
        _same_keys(root / name, table, utt2spk)
    return DataDir(root, utt2spk, wav, segments)


def _same_keys(path: Path, table: dict, utt2spk: dict[str, str]) -> None:
    extra = [key for key in table if key not in utt2spk]
    if extra:
        raise InputError(f"utterance {extra[0]!r} is not in utt2spk ({len(extra)} such)", path)
    missing = [utt for utt in utt2spk if utt not in table]
    if missing:
        raise InputError(f"{len(missing)} utterance(s) of utt2spk missing, first "
                         f"{missing[0]!r}", path)

"""Holding out a dev set by speaker: DATA split into train and dev with no speaker in both.

A dev set of speakers the model has heard says little about new speakers, so dev
takes whole speakers. The choice is deterministic and needs no seed: of the
speakers sorted in C order, the N at positions ``floor((i + 1/2) * S / N)`` for
``i < N`` (S speakers), evenly spread over the list, so ids that group speakers
(by gender, region or session) give dev speakers from across the groups. It changes
only when the list of speakers does. In a dir with ``utt2uniq`` (speed-perturbed),
``sp0.9-A``, ``A`` and ``sp1.1-A`` are one speaker and go to the same side.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrtrain.core.errors import ConfigError
from asrtrain.data.dir_view import (
    RECO_KEYED,
    SPK_KEYED,
    UTT_KEYED,
    DataDir,
    load_dir,
    other_files,
)
from asrtrain.data.perturb import base_speaker

log = logging.getLogger("asrtrain.subset")


def pick_spread(items: Sequence[str], n: int) -> list[str]:
    """``n`` of the sorted ``items``, evenly spaced: positions floor((i + 1/2) * len / n)."""
    ordered = sorted(items, key=lambda s: s.encode("utf-8"))
    return [ordered[(2 * i + 1) * len(ordered) // (2 * n)] for i in range(n)]


def speaker_groups(src: DataDir) -> dict[str, list[str]]:
    """Each person (a speaker without speed prefixes, in a dir with copies) -> their speaker ids."""
    groups: dict[str, list[str]] = {}
    for spk in src.speakers:
        groups.setdefault(base_speaker(spk) if src.has_copies else spk, []).append(spk)
    return groups


@dataclass(frozen=True)
class SplitSummary:
    """Who went where."""

    dev_speakers: list[str]
    train_utterances: int
    dev_utterances: int
    train_speakers: int


def split_by_speaker(data: str | os.PathLike[str], out_train: str | os.PathLike[str],
                     out_dev: str | os.PathLike[str], dev_speakers: int,
                     params: dict[str, Any] | None = None) -> SplitSummary:
    """Write OUT_TRAIN and OUT_DEV (each atomically) from DATA, ``dev_speakers`` persons in dev."""
    paths = [Path(p) for p in (data, out_train, out_dev)]
    if len({p.resolve() for p in paths}) != 3:
        raise ConfigError("DATA, OUT_TRAIN and OUT_DEV must be three different dirs")
    src = load_dir(paths[0])
    groups = speaker_groups(src)
    if dev_speakers >= len(groups):
        raise ConfigError(f"--dev-speakers {dev_speakers}: DATA has {len(groups)} speaker(s), "
                          "so train would have none", paths[0])
    chosen = pick_spread(list(groups), dev_speakers)
    dev_spk = {spk for person in chosen for spk in groups[person]}
    dev = {u for u, s in src.utt2spk.items() if s in dev_spk}
    train = set(src.utt2spk) - dev
    log.info("dev speakers (%d of %d): %s", len(chosen), len(groups), " ".join(chosen))
    for out, utts in ((paths[2], dev), (paths[1], train)):
        write_subset(src, out, utts, params, f"dev speakers: {' '.join(chosen)}")
    _log_left_out(src.path)
    return SplitSummary(chosen, len(train), len(dev), len(groups) - len(chosen))


def write_subset(src: DataDir, out: Path, utts: set[str], params: dict[str, Any] | None = None,
                 note: str = "") -> None:
    """OUT: the data dir of ``src`` restricted to ``utts``; every table filtered, spk2utt rebuilt."""
    from asrtrain.core.atomic import atomic_path
    from asrtrain.core.lock import hold
    from asrtrain.core.runlog import command_run
    from asrtrain.data.kaldi_dir import spk2utt_from_utt2spk, write_table

    speakers = {src.utt2spk[u] for u in utts}
    recordings = {src.recording(u) for u in utts}
    keep = {**{name: utts for name in UTT_KEYED}, **{name: speakers for name in SPK_KEYED},
            **{name: recordings for name in (*RECO_KEYED, "wav.scp")}}
    with hold(out), atomic_path(out) as tmp:  # locked until it is renamed into place
        tmp.mkdir()
        with command_run("prepare-subset", tmp, params, lock=out):
            if note:
                log.info("%s: %d utterances; %s", out, len(utts), note)
            for name, wanted in keep.items():
                table = src.table(name)
                if table is not None:
                    write_table(tmp / name, {k: v for k, v in table.items() if k in wanted})
            write_table(tmp / "spk2utt", spk2utt_from_utt2spk(
                {u: s for u, s in src.utt2spk.items() if u in utts}))


def _log_left_out(data: Path) -> None:
    """Name the files of DATA that a subset does not get (run logs, unknown tables)."""
    known = {*UTT_KEYED, *SPK_KEYED, *RECO_KEYED, "wav.scp", "spk2utt"}
    left = other_files(data, known)
    if left:
        log.info("not carried from %s: %s", data, " ".join(left))

"""Fuse feature streams into one matrix per utterance, as Kaldi's ``paste-feats`` does.

The paper's input is FMLLR (40) + i-vector (100) + log-mel with Δ and ΔΔ (120).
Streams come at three rates:

- ``frame``: one row per 10 ms frame (FMLLR, log-mel, MFCC);
- ``utterance``: one vector per utterance (``ivector-extract``'s output, a vector or a
  1×D matrix), repeated to every frame;
- ``online``: one row every ``period`` frames (Kaldi's online i-vectors, period 10;
  row k covers frames k·period … k·period + period − 1), expanded to frames.

Frame streams whose lengths differ by at most ``tolerance`` frames are cut to the
shortest (``paste-feats --length-tolerance``); larger differences reject the
utterance, with the reason, so the caller can report it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.core.textio import read_text

KINDS = ("frame", "utterance", "online")


@dataclass
class Stream:
    """One input stream: a name, its scp, and how its rows map to frames."""

    name: str
    scp: Path
    period: int | None = None
    kind: str | None = None
    dim: int | None = None
    cmvn: dict[str, np.ndarray] | None = None
    norm_vars: bool = False
    _reader: Any = field(default=None, repr=False)

    def layout(self, offset: int) -> dict[str, Any]:
        """The header entry of this stream (what the model input columns mean)."""
        entry: dict[str, Any] = {"name": self.name, "dim": int(self.dim or 0),
                                 "offset": int(offset), "kind": self.kind,
                                 "scp": str(Path(self.scp).resolve())}
        if self.period:
            entry["period"] = int(self.period)
        if self.cmvn is not None:
            entry["cmvn"] = "vars" if self.norm_vars else "means"
        return entry

    @property
    def reader(self) -> Any:
        """kaldiio's lazy dict over the scp (files stay open between reads)."""
        if self._reader is None:
            from asrtrain.data.kaldi_read import open_scp

            self._reader = open_scp(self.scp, max_cache_fd=64)
        return self._reader

    def keys(self) -> list[str]:
        return list(self.reader.keys())

    def __contains__(self, utt: str) -> bool:
        return utt in self.reader

    def load(self, utt: str) -> np.ndarray:
        """The matrix (or vector) of ``utt``; unreadable data is an error naming both."""
        from asrtrain.data.kaldi_read import load_entry

        value = load_entry(self.reader, utt, self.scp)
        if isinstance(value, tuple):
            raise InputError(f"utterance {utt!r}: entry is audio, not a feature matrix", self.scp)
        return np.asarray(value)


def parse_assignment(text: str, option: str) -> tuple[str, str]:
    """``NAME=VALUE`` of a repeatable option; a malformed one is a ConfigError."""
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise ConfigError(f"{option} {text!r}: expected NAME=VALUE")
    return name.strip(), value.strip()


def kaldi_ivector_period(scp: Path) -> int | None:
    """The ``ivector_period`` file Kaldi's extract_ivectors_online.sh writes beside the scp."""
    path = Path(scp).parent / "ivector_period"
    if not path.is_file():
        return None
    text = read_text(path).strip()
    if not text.isdigit() or int(text) < 1:
        raise InputError(f"expected a positive integer, got {text!r}", path)
    return int(text)


def resolve_kinds(streams: list[Stream], utt: str) -> None:
    """Fix each stream's rate and dimension from the first utterance they all hold."""
    mats = {s.name: s.load(utt) for s in streams}
    multi_row = [m.shape[0] for s, m in zip(streams, mats.values(), strict=True)
                 if m.ndim == 2 and m.shape[0] > 1 and not s.period]
    for s in streams:
        m = mats[s.name]
        if m.ndim not in (1, 2):
            raise InputError(f"utterance {utt!r}: expected a matrix or vector, got shape "
                             f"{m.shape}", s.scp)
        if m.ndim == 1 or (m.shape[0] == 1 and multi_row and not s.period):
            s.kind = "utterance"  # a vector has no period, whatever the options say
        elif s.period:
            s.kind = "online"
        else:
            s.kind = "frame"
        s.dim = int(m.shape[-1])
    if not any(s.kind == "frame" for s in streams):
        raise ConfigError("no frame-rate stream: at least one stream must have a row per frame "
                          f"(kinds: {', '.join(f'{s.name}={s.kind}' for s in streams)})")


@dataclass
class Fused:
    """The fused frames of one utterance, or why it was rejected."""

    feats: np.ndarray | None
    reason: str | None = None


def fuse_utterance(streams: list[Stream], utt: str, spk: str | None, tolerance: int) -> Fused:
    """Read ``utt`` from every stream and paste the columns, or say why it cannot be."""
    mats: dict[str, np.ndarray] = {}
    for s in streams:
        m = s.load(utt)
        if s.kind == "utterance":
            if m.ndim == 2 and m.shape[0] != 1:
                raise InputError(f"utterance {utt!r}: a per-utterance stream has "
                                 f"{m.shape[0]} rows (expected 1)", s.scp)
            m = m.reshape(1, -1)
        if m.ndim != 2 or m.shape[1] != s.dim:
            raise InputError(f"utterance {utt!r}: dimension {m.shape[-1] if m.ndim else '?'}, "
                             f"stream {s.name!r} has {s.dim}", s.scp)
        if s.cmvn is not None:
            from asrtrain.data.cmvn import apply_cmvn

            if spk is None or spk not in s.cmvn:
                return Fused(None, f"no CMVN stats for speaker {spk!r} (stream {s.name})")
            try:
                m = apply_cmvn(m, s.cmvn[spk], s.norm_vars)
            except ValueError as exc:
                raise InputError(f"speaker {spk!r}: {exc}", s.scp) from None
        mats[s.name] = m
    lengths = {s.name: mats[s.name].shape[0] for s in streams if s.kind == "frame"}
    frames = min(lengths.values())
    if max(lengths.values()) - frames > tolerance:
        return Fused(None, "length mismatch beyond tolerance " + str(tolerance) + ": "
                     + ", ".join(f"{k} {v}" for k, v in lengths.items()))
    if frames == 0:
        return Fused(None, "no frames")
    columns = []
    for s in streams:
        m = mats[s.name]
        if s.kind == "frame":
            columns.append(m[:frames])
        elif s.kind == "utterance":
            columns.append(np.broadcast_to(m, (frames, m.shape[1])))
        else:
            expanded = expand_online(m, int(s.period or 1), frames, tolerance)
            if expanded is None:
                return Fused(None, f"stream {s.name} has {m.shape[0]} rows at period "
                             f"{s.period}, {frames} frames need {math.ceil(frames / (s.period or 1))}")
            columns.append(expanded)
    return Fused(np.concatenate(columns, axis=1).astype(np.float32, copy=False))


def expand_online(rows: np.ndarray, period: int, frames: int, tolerance: int) -> np.ndarray | None:
    """Frame t takes row t // period (Kaldi's online i-vectors); None if the rows don't fit.

    A row more or fewer than ``ceil(frames / period)`` is accepted (the last row is
    reused, as nnet3 does); the frame tolerance allows proportionally more.
    """
    need = math.ceil(frames / period)
    slack = max(1, math.ceil(tolerance / period))
    if rows.shape[0] == 0 or abs(rows.shape[0] - need) > slack:
        return None
    index = np.minimum(np.arange(frames) // period, rows.shape[0] - 1)
    return rows[index]


def read_cmvn_scp(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Per-speaker CMVN stats from a Kaldi ``cmvn.scp`` (2×(D+1) matrices)."""
    from asrtrain.data.cmvn import check_stats
    from asrtrain.data.kaldi_read import open_scp

    try:
        reader = open_scp(path, "CMVN scp")
        out = {}
        for spk in reader:
            try:
                out[spk] = check_stats(np.asarray(reader[spk]))
            except ValueError as exc:
                raise InputError(f"speaker {spk!r}: {exc}", path) from None
    except FileNotFoundError as exc:
        raise InputError(f"{exc.filename or 'file'} not found", path) from None
    return out


def build_streams(stream_specs: tuple[str, ...] | list[str], cmvn_specs: tuple[str, ...] | list[str] = (),
                  period_specs: tuple[str, ...] | list[str] = (),
                  utt2spk: str | os.PathLike[str] | None = None, norm_vars: bool = False
                  ) -> tuple[list[Stream], dict[str, str] | None]:
    """Streams from ``NAME=SCP`` options, with their CMVN and i-vector periods attached."""
    streams: list[Stream] = []
    for spec in stream_specs:
        name, scp = parse_assignment(spec, "--stream")
        if any(s.name == name for s in streams):
            raise ConfigError(f"--stream {name!r} given twice")
        if not Path(scp).is_file():
            raise InputError("scp file not found", scp)
        streams.append(Stream(name, Path(scp), period=kaldi_ivector_period(Path(scp))))
    by_name = {s.name: s for s in streams}

    def named(spec: str, option: str) -> tuple[Stream, str]:
        name, value = parse_assignment(spec, option)
        if name not in by_name:
            raise ConfigError(f"{option} {spec!r}: no --stream named {name!r} "
                              f"(streams: {', '.join(by_name)})")
        return by_name[name], value

    for spec in period_specs:
        stream, value = named(spec, "--ivector-period")
        if not value.isdigit() or int(value) < 1:
            raise ConfigError(f"--ivector-period {spec!r}: expected a positive number of frames")
        stream.period = int(value)
    if cmvn_specs and utt2spk is None:
        raise ConfigError("--cmvn needs --utt2spk (CMVN stats are per speaker)")
    for spec in cmvn_specs:
        stream, value = named(spec, "--cmvn")
        stream.cmvn, stream.norm_vars = read_cmvn_scp(value), norm_vars
    speakers = None
    if utt2spk is not None:
        from asrtrain.data.kaldi_dir import read_utt2spk

        speakers = read_utt2spk(utt2spk)
    return streams, speakers

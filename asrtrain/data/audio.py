"""Audio of a ``wav.scp`` entry, as Kaldi reads it: a file, an ark offset, or a pipe.

Kaldi's ``wav.scp`` value (an *rxspecifier*) is one of

- a path to an audio file (``/data/utt1.flac``, ``.wav``; anything libsndfile reads),
- an offset into an archive of WAV blobs (``/data/wav.ark:1234``), read by kaldiio,
- a shell command whose standard output is the audio (``sph2pipe -f wav x.sph |``).

Samples come back as float32 on the int16 scale (±32768), which is what Kaldi's
feature extractors expect (its energy floor and dither are tuned to that scale).

A WAV file shorter than its header says (cut off in a copy) reads without an error
from libsndfile, which counts what is there: :class:`Truncated` says so instead,
so the utterance is skipped with that reason rather than giving a fraction of its
frames.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
from pathlib import Path

import numpy as np

from asrtrain.core.errors import InputError

#: Data sizes a streaming writer puts in a header it cannot go back and fix (sox to a pipe).
_UNKNOWN_SIZES = {0, 0xFFFFFFFF, 0x7FFFF000, 0x7FFFFFFF}

#: ``path:offset`` or ``path:offset[slices]`` of an ark (kaldiio's rxspecifier form).
_ARK_OFFSET = re.compile(r"^(?P<ark>.+):(?P<offset>\d+)(\[[0-9:, ]*\])?$")


class Truncated(InputError):
    """Audio with fewer samples than its header declares."""


def declared_frames(header: bytes) -> int | None:
    """Sample frames a RIFF/WAVE header declares for its data chunk (``None``: not a WAV, or unknown)."""
    if len(header) < 12 or header[:4] != b"RIFF" or header[8:12] != b"WAVE":
        return None
    pos, block_align = 12, None
    while pos + 8 <= len(header):
        kind, size = header[pos:pos + 4], int.from_bytes(header[pos + 4:pos + 8], "little")
        if kind == b"fmt " and pos + 22 <= len(header):
            block_align = int.from_bytes(header[pos + 20:pos + 22], "little")
        if kind == b"data":
            return None if size in _UNKNOWN_SIZES or not block_align else size // block_align
        pos += 8 + size + (size & 1)
    return None


def _check_length(entry: str, samples: np.ndarray, header: bytes, where: str | os.PathLike[str] | None) -> None:
    declared = declared_frames(header)
    if declared is not None and samples.shape[0] < declared:
        raise Truncated(f"{entry}: {samples.shape[0]} samples of the {declared} its header declares "
                        "(the file is cut off)", where)


def is_pipe(entry: str) -> bool:
    """True for Kaldi's ``command |`` rxspecifiers."""
    return entry.rstrip().endswith("|")


def read_audio(entry: str, sample_rate: int | None = 16000, where: str | os.PathLike[str] | None = None
               ) -> np.ndarray:
    """The mono samples of one ``wav.scp`` value, float32 on the int16 scale.

    ``sample_rate`` (when not None) is checked: Kaldi does not resample either,
    and a silent mismatch would shift every frame. ``where`` names the scp file
    in error messages.
    """
    entry = entry.strip()
    if is_pipe(entry):
        rate, samples = _read_pipe(entry, where)
    elif _ARK_OFFSET.match(entry) and not Path(entry).exists():
        rate, samples = _read_ark(entry, where)
    else:
        rate, samples = _read_file(entry, where)
    if samples.ndim == 2:
        if samples.shape[1] != 1:
            raise InputError(f"{entry}: {samples.shape[1]} channels; expected mono (select a "
                             "channel in wav.scp, e.g. with 'sox ... remix 1 |')", where)
        samples = samples[:, 0]
    if sample_rate is not None and rate != sample_rate:
        raise InputError(f"{entry}: sample rate {rate} Hz, expected {sample_rate} Hz", where)
    if samples.size == 0:
        raise InputError(f"{entry}: no samples", where)
    return np.ascontiguousarray(samples, dtype=np.float32)


def _read_file(path: str, where: str | os.PathLike[str] | None) -> tuple[int, np.ndarray]:
    import soundfile

    try:
        data, rate = soundfile.read(path, dtype="float32", always_2d=False)
    except FileNotFoundError:
        raise InputError(f"{path}: audio file not found", where) from None
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        if not Path(path).exists():
            raise InputError(f"{path}: audio file not found", where) from None
        raise InputError(f"{path}: cannot read audio ({exc})", where) from None
    with open(path, "rb") as handle:
        _check_length(path, np.asarray(data), handle.read(4096), where)
    return int(rate), np.asarray(data, dtype=np.float32) * 32768.0


def _read_pipe(entry: str, where: str | os.PathLike[str] | None) -> tuple[int, np.ndarray]:
    import soundfile

    command = entry.rstrip()[:-1].strip()
    proc = subprocess.run(command, shell=True, capture_output=True)
    if proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip().splitlines()
        detail = message[-1] if message else f"exit status {proc.returncode}"
        raise InputError(f"command {command!r} failed: {detail}", where)
    try:
        data, rate = soundfile.read(io.BytesIO(proc.stdout), dtype="float32", always_2d=False)
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise InputError(f"command {command!r}: output is not audio ({exc})", where) from None
    _check_length(command, np.asarray(data), proc.stdout[:4096], where)
    return int(rate), np.asarray(data, dtype=np.float32) * 32768.0


def _read_ark(entry: str, where: str | os.PathLike[str] | None) -> tuple[int, np.ndarray]:
    import kaldiio

    try:
        value = kaldiio.load_mat(entry)
    except FileNotFoundError as exc:
        raise InputError(f"{entry}: {exc.strerror or 'not found'}", where) from None
    except Exception as exc:  # kaldiio raises ValueError/RuntimeError/struct.error on bad data
        from asrtrain.data.kaldi_read import failure

        raise InputError(f"{entry}: cannot read audio from ark ({failure(entry, exc)})", where) from None
    if not isinstance(value, tuple):
        raise InputError(f"{entry}: ark entry is a matrix, not audio", where)
    rate, samples = value
    samples = np.asarray(samples)
    if samples.dtype == np.int16:
        return int(rate), samples.astype(np.float32)
    if np.issubdtype(samples.dtype, np.integer):
        scale = 32768.0 / float(np.iinfo(samples.dtype).max + 1)
        return int(rate), samples.astype(np.float32) * scale
    return int(rate), samples.astype(np.float32) * 32768.0

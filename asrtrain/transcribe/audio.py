"""Recordings as they come: any format sox or libsndfile reads, any rate, any channels.

Samples come back mono, at the model's rate, float32 on the int16 scale (what the
feature extractors expect). libsndfile reads WAV, FLAC, OGG…; anything else goes through
sox. A rate other than the model's is resampled by sox; of several channels one is kept
(the caller says which, once).
"""

from __future__ import annotations

import io
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrtrain.core.errors import InputError

#: Channel kept from a multi-channel recording unless told otherwise (0 = the first).
DEFAULT_CHANNEL = 0


@dataclass
class Audio:
    """One recording, ready for the front end."""

    samples: np.ndarray     # float32 [n], int16 scale, mono, at ``rate``
    rate: int
    source_rate: int
    channels: int
    channel: int            # the channel kept
    converted: bool         # resampled or a channel picked or read through sox

    @property
    def seconds(self) -> float:
        return self.samples.shape[0] / self.rate


def _sox(args: list[str], stdin: bytes | None, path: Path) -> bytes:
    """sox's standard output (a WAV or raw stream); a failure is one line naming ``path``."""
    if shutil.which("sox") is None:
        raise InputError("cannot read this audio (libsndfile cannot, and sox is not installed)",
                         path)
    proc = subprocess.run(["sox", "-V1", *args], input=stdin, capture_output=True)
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines()
        detail = lines[-1].removeprefix("sox FAIL ").strip() if lines else f"exit {proc.returncode}"
        raise InputError(f"cannot read audio ({detail})", path)
    return proc.stdout


def _read(path: Path) -> tuple[np.ndarray, int, bool]:
    """(samples [n, channels] float in [-1, 1], rate, through sox) of any readable file."""
    import soundfile

    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
        return data, int(rate), False
    except (RuntimeError, soundfile.LibsndfileError):
        pass
    wav = _sox([str(path), "-t", "wav", "-e", "signed-integer", "-b", "16", "-"], None, path)
    try:
        data, rate = soundfile.read(io.BytesIO(wav), dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        raise InputError(f"cannot read audio ({exc})", path) from None
    return data, int(rate), True


def resample(samples: np.ndarray, source: int, target: int, path: Path) -> np.ndarray:
    """Mono float samples in [-1, 1] from ``source`` Hz to ``target`` Hz (sox's rate effect)."""
    raw = np.ascontiguousarray(samples, dtype="<f4").tobytes()
    fmt = ["-t", "raw", "-e", "floating-point", "-b", "32", "-c", "1"]
    out = _sox([*fmt, "-r", str(source), "-", *fmt, "-r", str(target), "-", "rate", "-h"], raw,
               path)
    return np.frombuffer(out, dtype="<f4").copy()


def load(path: str | Path, rate: int, channel: int = DEFAULT_CHANNEL) -> Audio:
    """The recording at ``path`` as :class:`Audio`; unreadable, empty or missing: one
    InputError naming it."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file", path)
    if path.is_dir():
        raise InputError("a directory, not audio (a Kaldi data dir needs wav.scp)", path)
    if path.stat().st_size == 0:
        raise InputError("empty file", path)
    data, source_rate, via_sox = _read(path)
    if data.shape[0] == 0:
        raise InputError("no samples (empty recording)", path)
    channels = int(data.shape[1])
    if channel >= channels:
        raise InputError(f"channel {channel + 1} asked for, the recording has {channels}", path)
    mono = data[:, channel]
    if source_rate != rate:
        mono = resample(mono, source_rate, rate, path)
    converted = via_sox or channels > 1 or source_rate != rate
    return Audio(samples=(mono * np.float32(32768.0)).astype(np.float32), rate=rate,
                 source_rate=source_rate, channels=channels, channel=channel, converted=converted)


def write_wav(path: Path, audio: Audio) -> None:
    """16-bit PCM WAV of the converted samples (what the feature extractor will read)."""
    import soundfile

    pcm = np.clip(np.round(audio.samples), -32768, 32767).astype(np.int16)
    soundfile.write(str(path), pcm, audio.rate, subtype="PCM_16")

"""Small inputs for the feature/archive/loader tests, made on the spot (imported by the tests).

Audio: sine tones plus seeded noise written as 16 kHz FLAC, in a Kaldi data dir
of two speakers. Features: random matrices written with kaldiio, where column 0
holds the utterance number and column 1 the frame number (both exact in
float16), so a frame that comes out of the loader says where it came from.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from needs import kaldi_arks_dir

SR = 16000
KALDI_DIR = kaldi_arks_dir()


def write_tone(path: Path, seconds: float, freq: float, seed: int) -> np.ndarray:
    """A tone with noise as 16-bit FLAC/WAV; returns the int16 samples written."""
    import soundfile

    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    wave = 8000 * np.sin(2 * np.pi * freq * t) + rng.normal(0, 200, t.size)
    samples = np.clip(wave, -32768, 32767).astype(np.int16)
    soundfile.write(str(path), samples, SR, subtype="PCM_16")
    return samples


def make_audio_dir(root: Path, durations: dict[str, float] | None = None) -> Path:
    """A Kaldi data dir with wav.scp (FLAC paths), text, utt2spk, spk2utt, utt2dur."""
    from asrtrain.data.kaldi_dir import spk2utt_from_utt2spk, write_table

    durations = durations or {"spkA-001": 0.50, "spkA-002": 0.73, "spkB-001": 0.61,
                              "spkB-002": 0.44, "spkB-003": 0.82}
    audio = root / "audio"
    audio.mkdir(parents=True, exist_ok=True)
    wav, text, utt2spk, utt2dur = {}, {}, {}, {}
    for i, (utt, dur) in enumerate(sorted(durations.items())):
        path = audio / f"{utt}.flac"
        write_tone(path, dur, 300.0 + 150 * i, seed=i)
        wav[utt] = str(path)
        text[utt] = f"WORD{i} HELLO"
        utt2spk[utt] = utt.split("-")[0]
        utt2dur[utt] = f"{dur:.2f}"
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    write_table(data / "wav.scp", wav)
    write_table(data / "text", text)
    write_table(data / "utt2spk", utt2spk)
    write_table(data / "spk2utt", spk2utt_from_utt2spk(utt2spk))
    write_table(data / "utt2dur", utt2dur)
    return data


def make_streams(root: Path, lengths: list[int], dims: tuple[int, ...] = (6, 4),
                 num_pdfs: int = 7, seed: int = 0, ivector_dim: int | None = 3
                 ) -> dict[str, object]:
    """Streams and alignments of ``len(lengths)`` utterances, traceable frame by frame.

    Stream ``a`` (dims[0]) has column 0 = utterance number, column 1 = frame
    number; ``b`` (dims[1]) is random; ``iv`` is one vector per utterance.
    Returns the scp paths and the source matrices.
    """
    import kaldiio

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    a, b, iv, ali = {}, {}, {}, {}
    for i, frames in enumerate(lengths):
        utt = f"spk{i % 3}-u{i:04d}"
        m = rng.normal(size=(frames, dims[0])).astype(np.float32)
        m[:, 0], m[:, 1] = i, np.arange(frames)
        a[utt] = m
        b[utt] = rng.normal(size=(frames, dims[1])).astype(np.float32)
        if ivector_dim:
            iv[utt] = rng.normal(size=ivector_dim).astype(np.float32)
        ali[utt] = rng.integers(0, num_pdfs, frames).astype(np.int32)
    out: dict[str, object] = {"a": a, "b": b, "iv": iv, "ali": ali}
    for name, table in (("a", a), ("b", b), ("iv", iv), ("ali", ali)):
        if table:
            kaldiio.save_ark(str(root / f"{name}.ark"), table, scp=str(root / f"{name}.scp"))
            out[f"{name}_scp"] = root / f"{name}.scp"
    return out


def utt_index(utt: str) -> int:
    return int(utt.split("-u")[1])

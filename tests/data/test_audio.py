"""Reading wav.scp entries: FLAC/WAV files, ark offsets, pipes; errors name the scp."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from feature_helpers import SR, write_tone

from asrtrain.core.errors import InputError
from asrtrain.data.audio import read_audio


@pytest.mark.parametrize("suffix", [".flac", ".wav"])
def test_file_gives_int16_scaled_samples_exactly(tmp_path: Path, suffix: str) -> None:
    written = write_tone(tmp_path / f"x{suffix}", 0.3, 440.0, seed=1)
    samples = read_audio(str(tmp_path / f"x{suffix}"))
    assert samples.dtype == np.float32
    np.testing.assert_array_equal(samples, written.astype(np.float32))


def test_pipe_is_run_and_decoded(tmp_path: Path) -> None:
    written = write_tone(tmp_path / "x.flac", 0.2, 300.0, seed=2)
    samples = read_audio(f"cat {tmp_path / 'x.flac'} |")
    np.testing.assert_array_equal(samples, written.astype(np.float32))


def test_ark_offset_wav_from_kaldiio(tmp_path: Path) -> None:
    import kaldiio

    written = write_tone(tmp_path / "x.wav", 0.2, 300.0, seed=3)
    kaldiio.save_ark(str(tmp_path / "w.ark"), {"u1": (SR, written)}, scp=str(tmp_path / "w.scp"))
    entry = (tmp_path / "w.scp").read_text().split(maxsplit=1)[1].strip()
    np.testing.assert_array_equal(read_audio(entry), written.astype(np.float32))


def test_sample_rate_mismatch_is_an_error(tmp_path: Path) -> None:
    import soundfile

    soundfile.write(str(tmp_path / "x.wav"), np.zeros(800, dtype=np.int16), 8000)
    with pytest.raises(InputError, match="8000 Hz, expected 16000 Hz"):
        read_audio(str(tmp_path / "x.wav"), where="data/wav.scp")


def test_stereo_is_an_error(tmp_path: Path) -> None:
    import soundfile

    soundfile.write(str(tmp_path / "x.wav"), np.zeros((800, 2), dtype=np.int16), SR)
    with pytest.raises(InputError, match="2 channels"):
        read_audio(str(tmp_path / "x.wav"))


def test_missing_file_and_failing_pipe_name_the_scp(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"data/wav.scp: .*nope.flac: audio file not found"):
        read_audio(str(tmp_path / "nope.flac"), where="data/wav.scp")
    with pytest.raises(InputError, match=r"data/wav.scp: command 'false' failed"):
        read_audio("false |", where="data/wav.scp")
    (tmp_path / "junk.wav").write_bytes(b"not audio at all")
    with pytest.raises(InputError, match="cannot read audio"):
        read_audio(str(tmp_path / "junk.wav"))

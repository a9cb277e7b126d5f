"""Resampling accuracy, noise at the asked SNR, reverb that keeps the length."""

from __future__ import annotations

import numpy as np
import pytest

from asrtrain.synth.signal import add_noise, output_length, resample, reverberate, to_int16


@pytest.mark.parametrize("rate_out,freq", [(16000, 440.0), (16000, 3000.0), (8000, 2500.0)])
def test_resample_reproduces_a_sine(rate_out: int, freq: float) -> None:
    n = 22050
    x = np.sin(2 * np.pi * freq * np.arange(n) / 22050).astype(np.float32)
    y = resample(x, 22050, rate_out)
    assert len(y) == output_length(n, 22050, rate_out) == rate_out
    ref = np.sin(2 * np.pi * freq * np.arange(len(y)) / rate_out)
    assert np.max(np.abs(y - ref)[100:-100]) < 1e-3


def test_resample_removes_what_the_new_rate_cannot_hold() -> None:
    x = np.sin(2 * np.pi * 6000 * np.arange(22050) / 22050).astype(np.float32)
    y = resample(x, 22050, 8000)  # 6 kHz is above the 4 kHz Nyquist
    assert np.sqrt(np.mean(y[100:-100] ** 2)) < 1e-3


def test_noise_at_the_asked_snr() -> None:
    rng = np.random.default_rng(0)
    speech = (1000 * np.sin(np.arange(32000) / 7)).astype(np.float32)
    x = np.concatenate([np.zeros(8000, np.float32), speech])
    y = add_noise(x, 10.0, rng, speech=slice(8000, None))
    noise = y - x
    snr = 10 * np.log10(np.mean(speech.astype(float) ** 2) / np.mean(noise.astype(float) ** 2))
    assert abs(snr - 10.0) < 0.01
    assert np.std(noise[:8000]) > 0  # the padding gets noise too


def test_reverb_keeps_length_and_peak_and_dither_removes_zeros() -> None:
    rng = np.random.default_rng(1)
    x = np.zeros(16000, np.float32)
    x[1000] = 5000.0
    y = reverberate(x, 16000, 0.5, rng)
    assert len(y) == len(x) and np.isclose(np.max(np.abs(y)), 5000.0)
    assert np.argmax(np.abs(y)) == 1000  # direct path at delay 0
    assert np.count_nonzero(y[1100:]) > 1000  # a tail
    ints = to_int16(np.zeros(1000, np.float32), rng)
    assert ints.dtype == np.int16 and np.count_nonzero(ints) > 500

"""Features: Kaldi frame counts, fbank/MFCC dimensions, deltas, seeded dither, data dirs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from feature_helpers import SR, make_audio_dir

from asrtrain.core.errors import InputError
from asrtrain.data.features import (
    FeatureConfig,
    add_deltas,
    compute_features,
    make_features,
    num_frames,
)


@pytest.mark.parametrize("samples", [399, 400, 559, 560, 16000, 16123])
def test_frame_count_is_kaldis_snip_edges(samples: int) -> None:
    expected = 0 if samples < 400 else 1 + (samples - 400) // 160
    cfg = FeatureConfig(dither=0.0)
    assert num_frames(samples, cfg) == expected
    wave = np.random.default_rng(0).normal(0, 100, samples).astype(np.float32)
    assert compute_features(wave, cfg).shape == (expected, 40)


def test_dimensions_of_each_type() -> None:
    wave = np.random.default_rng(0).normal(0, 100, SR // 2).astype(np.float32)
    assert compute_features(wave, FeatureConfig(type="mfcc", num_bins=23)).shape[1] == 13
    assert compute_features(wave, FeatureConfig(deltas=True)).shape[1] == 120
    assert FeatureConfig(deltas=True).dim == 120


def test_tone_peaks_in_the_mel_bin_of_its_frequency() -> None:
    t = np.arange(SR) / SR
    wave = (8000 * np.sin(2 * np.pi * 1000.0 * t)).astype(np.float32)
    feats = compute_features(wave, FeatureConfig(dither=1.0))
    mel = lambda f: 1127.0 * np.log(1.0 + f / 700.0)  # noqa: E731
    lo, hi = mel(20.0), mel(8000.0)
    centres = lo + (np.arange(40) + 1) * (hi - lo) / 41
    expected = int(np.argmin(np.abs(centres - mel(1000.0))))
    assert set(np.argmax(feats, axis=1)) <= {expected - 1, expected, expected + 1}
    assert np.bincount(np.argmax(feats, axis=1)).argmax() == expected


def test_deltas_match_kaldi_on_a_ramp() -> None:
    ramp = np.arange(10, dtype=np.float32)[:, None].repeat(2, axis=1)
    out = add_deltas(ramp)
    np.testing.assert_allclose(out[:, :2], ramp)
    np.testing.assert_allclose(out[2:-2, 2:4], 1.0, atol=1e-6)  # slope of the ramp
    np.testing.assert_allclose(out[0, 2], 0.5, atol=1e-6)  # edges repeat: (1*1 + 2*2) / 10
    np.testing.assert_allclose(out[4:-4, 4:6], 0.0, atol=1e-6)  # no curvature inside


def test_dither_is_seeded_by_utterance() -> None:
    wave = np.zeros(SR // 4, dtype=np.float32)
    cfg = FeatureConfig(dither=1.0)
    a, b = compute_features(wave, cfg, seed=1), compute_features(wave, cfg, seed=1)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, compute_features(wave, cfg, seed=2))
    assert np.isfinite(a).all() and a.min() > np.log(np.finfo(np.float32).eps) + 1


def test_data_dir_outputs_are_a_complete_kaldi_dir(tmp_path: Path) -> None:
    import kaldiio

    from asrtrain.data.cmvn import accumulate
    from asrtrain.data.kaldi_dir import read_scp, read_utt2num_frames, validate_data_dir

    data = make_audio_dir(tmp_path)
    out = tmp_path / "feats"
    summary = make_features(data, out, FeatureConfig(deltas=True), nj=1)
    validate_data_dir(out, require=("text", "feats.scp", "utt2num_frames", "cmvn.scp", "wav.scp"))
    feats = {k: np.asarray(v) for k, v in kaldiio.load_scp(str(out / "feats.scp")).items()}
    assert summary["utterances"] == 5 and all(m.shape[1] == 120 for m in feats.values())
    frames = read_utt2num_frames(out / "utt2num_frames")
    assert frames == {k: m.shape[0] for k, m in feats.items()}
    assert frames["spkA-001"] == 1 + (int(0.5 * SR) - 400) // 160
    cmvn = kaldiio.load_scp(str(out / "cmvn.scp"))
    assert sorted(cmvn) == ["spkA", "spkB"]
    expected = accumulate(np.concatenate([feats["spkB-001"], feats["spkB-002"], feats["spkB-003"]]))
    np.testing.assert_allclose(np.asarray(cmvn["spkB"]), expected, rtol=1e-9)
    assert all(Path(v.rsplit(":", 1)[0]).parent == out.resolve() / "data"
               for v in read_scp(out / "feats.scp").values())


def test_parallel_jobs_give_the_same_features(tmp_path: Path) -> None:
    import kaldiio

    data = make_audio_dir(tmp_path)
    one, two = tmp_path / "one", tmp_path / "two"
    make_features(data, one, FeatureConfig(type="mfcc"), nj=1)
    make_features(data, two, FeatureConfig(type="mfcc"), nj=2)
    assert len(list((two / "data").glob("raw_mfcc_*.ark"))) == 2
    a, b = kaldiio.load_scp(str(one / "feats.scp")), kaldiio.load_scp(str(two / "feats.scp"))
    assert list(a) == list(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_too_short_utterance_is_skipped_and_listed(tmp_path: Path) -> None:
    from asrtrain.data.kaldi_dir import read_table, validate_data_dir

    data = make_audio_dir(tmp_path, {"spkA-001": 0.5, "spkA-002": 0.02, "spkB-001": 0.4})
    out = tmp_path / "feats"
    summary = make_features(data, out, FeatureConfig(), nj=1)
    assert list(summary["skipped"]) == ["spkA-002"]
    assert "shorter than one 25 ms frame" in read_table(out / "skipped_utts")["spkA-002"]
    validate_data_dir(out, require=("text", "feats.scp"))
    assert "spkA-002" not in read_table(out / "text", allow_empty_value=True)


def test_segments_cut_the_recording(tmp_path: Path) -> None:
    import kaldiio

    from asrtrain.data.audio import read_audio
    from asrtrain.data.kaldi_dir import write_table

    data = make_audio_dir(tmp_path, {"spkA-rec": 0.8})
    reco = (data / "wav.scp").read_text().split()[1]
    write_table(data / "wav.scp", {"rec1": reco})
    write_table(data / "segments", {"spkA-s1": "rec1 0.00 0.30", "spkA-s2": "rec1 0.25 -1"})
    write_table(data / "utt2spk", {"spkA-s1": "spkA", "spkA-s2": "spkA"})
    write_table(data / "spk2utt", {"spkA": "spkA-s1 spkA-s2"})
    write_table(data / "text", {"spkA-s1": "A", "spkA-s2": "B"})
    (data / "utt2dur").unlink()
    cfg = FeatureConfig()
    make_features(data, tmp_path / "out", cfg, nj=1)
    feats = kaldiio.load_scp(str(tmp_path / "out" / "feats.scp"))
    samples = read_audio(reco)
    from asrtrain.data.features import dither_seed
    np.testing.assert_array_equal(feats["spkA-s2"],
                                  compute_features(samples[4000:], cfg, dither_seed("spkA-s2")))
    assert feats["spkA-s1"].shape[0] == num_frames(int(0.3 * SR), cfg)
    assert (tmp_path / "out" / "segments").is_file()


def test_missing_audio_is_an_error_naming_wav_scp(tmp_path: Path) -> None:
    data = make_audio_dir(tmp_path)
    next((tmp_path / "audio").glob("spkB-002.flac")).unlink()
    with pytest.raises(InputError, match=r"wav.scp: .*spkB-002.flac: audio file not found"):
        make_features(data, tmp_path / "out", FeatureConfig(), nj=1)
    assert not (tmp_path / "out" / "feats.scp").exists()

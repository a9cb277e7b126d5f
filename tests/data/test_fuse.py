"""Stream fusion: per-utterance and online i-vectors, length tolerance, CMVN, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.data.fuse import Stream, build_streams, expand_online, fuse_utterance, resolve_kinds


def save(path: Path, table: dict[str, np.ndarray]) -> Path:
    import kaldiio

    kaldiio.save_ark(str(path.with_suffix(".ark")), table, scp=str(path))
    return path


def streams_of(tmp_path: Path, **tables: dict[str, np.ndarray]) -> list[Stream]:
    return [Stream(name, save(tmp_path / f"{name}.scp", t)) for name, t in tables.items()]


def test_per_utterance_vector_and_1xD_matrix_are_repeated(tmp_path: Path) -> None:
    f = np.arange(12, dtype=np.float32).reshape(4, 3)
    v, m = np.array([7.0, 8.0], dtype=np.float32), np.array([[5.0, 6.0]], dtype=np.float32)
    streams = streams_of(tmp_path, f={"u": f}, v={"u": v}, m={"u": m})
    resolve_kinds(streams, "u")
    assert [s.kind for s in streams] == ["frame", "utterance", "utterance"]
    out = fuse_utterance(streams, "u", None, tolerance=2).feats
    assert out is not None and out.shape == (4, 7)
    np.testing.assert_array_equal(out[:, :3], f)
    np.testing.assert_array_equal(out[:, 3:5], np.tile(v, (4, 1)))
    np.testing.assert_array_equal(out[:, 5:], np.tile(m, (4, 1)))


def test_a_vector_stream_is_per_utterance_even_with_a_period(tmp_path: Path) -> None:
    streams = streams_of(tmp_path, f={"u": np.zeros((25, 2), np.float32)},
                         iv={"u": np.ones(3, np.float32)})
    streams[1].period = 10
    resolve_kinds(streams, "u")
    assert streams[1].kind == "utterance"
    out = fuse_utterance(streams, "u", None, tolerance=2).feats
    assert out is not None and out.shape == (25, 5) and (out[:, 2:] == 1).all()


def test_online_ivectors_row_k_covers_frames_k_times_period(tmp_path: Path) -> None:
    f = np.zeros((25, 2), dtype=np.float32)
    rows = np.array([[0.0], [1.0], [2.0]], dtype=np.float32)  # ceil(25 / 10) = 3
    (tmp_path / "ivectors").mkdir()
    iv = save(tmp_path / "ivectors" / "ivector_online.scp", {"u": rows})
    (tmp_path / "ivectors" / "ivector_period").write_text("10\n")  # as Kaldi writes it
    built, _ = build_streams([f"f={save(tmp_path / 'f.scp', {'u': f})}", f"iv={iv}"])
    assert built[1].period == 10
    resolve_kinds(built, "u")
    out = fuse_utterance(built, "u", None, tolerance=2).feats
    assert out is not None
    np.testing.assert_array_equal(out[:, 2], np.arange(25) // 10)


def test_expand_online_reuses_the_last_row_and_rejects_far_counts() -> None:
    rows = np.arange(3, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(expand_online(rows, 10, 35, 2)[:, 0], np.minimum(np.arange(35) // 10, 2))
    assert expand_online(rows, 10, 60, 2) is None  # 6 rows needed, 3 given
    assert expand_online(rows, 10, 5, 2) is None  # 1 row needed, 3 given


def test_lengths_within_tolerance_are_cut_to_the_shortest(tmp_path: Path) -> None:
    a = np.ones((50, 2), dtype=np.float32)
    streams = streams_of(tmp_path, a={"u": a, "w": a}, b={"u": np.ones((48, 3), np.float32),
                                                          "w": np.ones((47, 3), np.float32)})
    resolve_kinds(streams, "u")
    fused = fuse_utterance(streams, "u", None, tolerance=2)
    assert fused.feats is not None and fused.feats.shape == (48, 5)
    rejected = fuse_utterance(streams, "w", None, tolerance=2)
    assert rejected.feats is None and rejected.reason == (
        "length mismatch beyond tolerance 2: a 50, b 47")


def test_cmvn_is_applied_per_speaker(tmp_path: Path) -> None:
    from asrtrain.data.cmvn import accumulate, apply_cmvn

    rng = np.random.default_rng(0)
    f = (rng.normal(size=(30, 3)) + 5).astype(np.float32)
    scp = save(tmp_path / "f.scp", {"s1-u": f})
    cmvn = save(tmp_path / "cmvn.scp", {"s1": accumulate(f[:20])})
    utt2spk = tmp_path / "utt2spk"
    utt2spk.write_text("s1-u s1\n")
    streams, speakers = build_streams([f"f={scp}"], [f"f={cmvn}"], (), utt2spk, norm_vars=True)
    resolve_kinds(streams, "s1-u")
    out = fuse_utterance(streams, "s1-u", speakers["s1-u"], 2).feats
    np.testing.assert_allclose(out, apply_cmvn(f, accumulate(f[:20]), norm_vars=True), rtol=1e-6)
    missing = fuse_utterance(streams, "s1-u", "s9", 2)
    assert missing.feats is None and "no CMVN stats for speaker 's9'" in (missing.reason or "")


def test_configuration_errors(tmp_path: Path) -> None:
    scp = save(tmp_path / "f.scp", {"u": np.ones((4, 2), np.float32)})
    with pytest.raises(ConfigError, match="expected NAME=VALUE"):
        build_streams([str(scp)])
    with pytest.raises(ConfigError, match="given twice"):
        build_streams([f"f={scp}", f"f={scp}"])
    with pytest.raises(ConfigError, match="no --stream named 'g'"):
        build_streams([f"f={scp}"], (), ["g=10"])
    with pytest.raises(ConfigError, match="needs --utt2spk"):
        build_streams([f"f={scp}"], [f"f={scp}"])
    with pytest.raises(InputError, match="scp file not found"):
        build_streams([f"f={tmp_path / 'nope.scp'}"])
    vec = save(tmp_path / "v.scp", {"u": np.ones(3, np.float32)})
    streams, _ = build_streams([f"v={vec}"])
    with pytest.raises(ConfigError, match="no frame-rate stream"):
        resolve_kinds(streams, "u")


def test_dimension_change_is_an_error_naming_the_scp(tmp_path: Path) -> None:
    streams = streams_of(tmp_path, f={"u": np.ones((4, 2), np.float32),
                                      "w": np.ones((4, 3), np.float32)})
    resolve_kinds(streams, "u")
    with pytest.raises(InputError, match=r"f.scp: utterance 'w': dimension 3, stream 'f' has 2"):
        fuse_utterance(streams, "w", None, 2)

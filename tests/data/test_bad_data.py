"""Bad input and faults in ``prepare features`` and ``prepare archive``, run as a user runs them.

Each case checks the exit status, the one ``Error:`` line (the file and the problem,
no traceback) and what is left on disk: nothing that looks complete.
"""

from __future__ import annotations

import wave
from pathlib import Path

import h5py
import kaldiio
import numpy as np
import pytest
from feature_helpers import make_audio_dir, make_streams

from asrtrain.data.kaldi_dir import read_table, write_table


def archive_args(out: Path, src: dict, *extra: object) -> list[object]:
    return ["prepare", "archive", out, "--stream", f"a={src['a_scp']}", "--stream", f"b={src['b_scp']}",
            "--ali", src["ali_scp"], "--num-pdfs", 7, *extra]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ---------------------------------------------------------------- a full disk

def test_archive_onto_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, tmpfs, run_cli, one_error) -> None:
    src = make_streams(tmp_path / "src", [400] * 40, dims=(40, 40))
    full = tmpfs(600)
    proc = run_cli(*archive_args(full / "a.h5", src))
    one_error(proc.stderr, 1, proc.returncode, f"{full / 'a.h5'}: No space left on device")
    # no a.h5 and no temporary: only the run's log and the options it was asked for
    assert [n for n in leftovers(full) if n.endswith(".h5") or n.startswith(".")] == []


def test_features_onto_a_full_disk_name_the_file(tmp_path, tmpfs, run_cli, one_error) -> None:
    data = make_audio_dir(tmp_path, {f"spk{s}-{i:03d}": 1.0 for s in "AB" for i in range(8)})
    full = tmpfs(64)
    proc = run_cli("prepare", "features", data, full / "feats", "--nj", 1)
    line = one_error(proc.stderr, 1, proc.returncode, "No space left on device", str(full / "feats"))
    assert "feats.scp" not in line or not (full / "feats" / "feats.scp").exists()
    assert not (full / "feats" / "feats.scp").exists()


# ---------------------------------------------------------------- audio that is not what it says

def _cut_wav(path: Path, keep: float) -> None:
    """A WAV whose header declares more samples than the file holds (a copy cut short)."""
    data = path.read_bytes()
    path.write_bytes(data[:44 + int((len(data) - 44) * keep)])


def _wav_dir(tmp_path: Path, seconds: dict[str, float]) -> Path:
    data = make_audio_dir(tmp_path, seconds)
    wavs = {}
    for utt, flac in read_table(data / "wav.scp").items():
        import soundfile

        samples, rate = soundfile.read(flac, dtype="int16")
        wav_path = Path(flac).with_suffix(".wav")
        with wave.open(str(wav_path), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(samples.tobytes())
        wavs[utt] = str(wav_path)
    write_table(data / "wav.scp", wavs)
    return data


def test_wav_shorter_than_its_header_is_skipped_with_the_reason(tmp_path, run_cli) -> None:
    data = _wav_dir(tmp_path, {"spkA-001": 1.0, "spkA-002": 3.0, "spkB-001": 1.0})
    _cut_wav(Path(read_table(data / "wav.scp")["spkA-002"]), keep=0.04)
    proc = run_cli("prepare", "features", data, tmp_path / "f", "--nj", 1)
    assert proc.returncode == 0, proc.stderr
    skipped = read_table(tmp_path / "f" / "skipped_utts")
    assert list(skipped) == ["spkA-002"] and "the file is cut off" in skipped["spkA-002"]
    assert "1 skipped" in proc.stdout + proc.stderr
    assert set(kaldiio.load_scp(str(tmp_path / "f" / "feats.scp"))) == {"spkA-001", "spkB-001"}


def test_segments_past_the_recording_and_utt2dur_mismatch_are_skipped(tmp_path, run_cli) -> None:
    data = make_audio_dir(tmp_path, {"spkA-rec": 2.0, "spkB-rec": 1.0})
    recs = read_table(data / "wav.scp")
    write_table(data / "wav.scp", {"recA": recs["spkA-rec"], "recB": recs["spkB-rec"]})
    segments = {"spkA-1": "recA 0.00 1.00", "spkA-2": "recA 1.00 2.30",   # 0.3 s past the end: kept
                "spkA-3": "recA 1.50 3.50",                               # 1.5 s past: skipped
                "spkB-1": "recB 2.00 2.50",                               # starts after the end
                "spkB-2": "recB 0.00 0.90"}
    write_table(data / "segments", segments)
    write_table(data / "utt2spk", {u: u.split("-")[0] for u in segments})
    write_table(data / "spk2utt", {"spkA": "spkA-1 spkA-2 spkA-3", "spkB": "spkB-1 spkB-2"})
    write_table(data / "text", {u: "HELLO" for u in segments})
    write_table(data / "utt2dur", {"spkA-1": "1.00", "spkA-2": "1.00", "spkA-3": "2.00",
                                   "spkB-1": "0.50", "spkB-2": "0.50"})  # spkB-2 lasts 0.9 s
    proc = run_cli("prepare", "features", data, tmp_path / "f", "--nj", 1)
    assert proc.returncode == 0, proc.stderr
    skipped = read_table(tmp_path / "f" / "skipped_utts")
    assert set(skipped) == {"spkA-3", "spkB-1", "spkB-2"}, skipped
    assert "past the end of recording" in skipped["spkA-3"]
    assert "starts" in skipped["spkB-1"] and "after" in skipped["spkB-1"]
    assert "utt2dur says 0.500 s" in skipped["spkB-2"]


# ---------------------------------------------------------------- arks, scps and archives read through libraries

def _one_stream(tmp_path: Path, scp: Path, ali: Path, out: Path) -> list[object]:
    return ["prepare", "archive", out, "--stream", f"a={scp}", "--ali", ali, "--num-pdfs", 7]


@pytest.mark.parametrize("cut", [1, 7, 200])  # numpy: "buffer size must be a multiple …", then "cannot reshape"
def test_truncated_ark_names_the_utterance_and_the_ark(tmp_path, run_cli, one_error, cut) -> None:
    src = make_streams(tmp_path / "src", [50, 60, 70], ivector_dim=None)
    ark = tmp_path / "src" / "a.ark"
    ark.write_bytes(ark.read_bytes()[:-cut])
    proc = run_cli(*_one_stream(tmp_path, src["a_scp"], src["ali_scp"], tmp_path / "x.h5"))
    offset = read_table(Path(src["a_scp"]))["spk2-u0002"].rsplit(":", 1)[1]
    one_error(proc.stderr, 1, proc.returncode, str(src["a_scp"]), "'spk2-u0002'",
              f"{ark} is truncated: the entry at offset {offset} runs past its end "
              f"({ark.stat().st_size} bytes)")
    assert not (tmp_path / "x.h5").exists() and not list(tmp_path.glob(".x.h5*"))


def test_wrong_scp_offset_names_the_utterance(tmp_path, run_cli, one_error) -> None:
    src = make_streams(tmp_path / "src", [50, 60], ivector_dim=None)
    scp = Path(src["a_scp"])
    table = read_table(scp)
    first = next(iter(table))
    ark, offset = table[first].rsplit(":", 1)
    table[first] = f"{ark}:{int(offset) + 5}"
    write_table(scp, table)
    proc = run_cli(*_one_stream(tmp_path, scp, src["ali_scp"], tmp_path / "x.h5"))
    line = one_error(proc.stderr, 1, proc.returncode, str(scp), f"'{first}'", "wrong scp offset?")
    assert f"{ark}:{int(offset) + 5}" in line  # the entry the scp gave, as it gave it
    assert not (tmp_path / "x.h5").exists()


def test_one_stream_counts_the_alignments_it_cannot_use(tmp_path, run_cli) -> None:
    src = make_streams(tmp_path / "src", [50, 60, 70, 80], ivector_dim=None)
    scp = Path(src["a_scp"])
    table = read_table(scp)
    dropped = list(table)[1]
    del table[dropped]
    write_table(scp, table)
    out = tmp_path / "x.h5"
    proc = run_cli(*_one_stream(tmp_path, scp, src["ali_scp"], out))
    assert proc.returncode == 0, proc.stderr
    assert "1 skipped" in proc.stdout + proc.stderr
    with h5py.File(out) as h5:
        utts = [u.decode() for u in h5["skipped/utt_ids"][...]]
        reasons = [r.decode() for r in h5["skipped/reasons"][...]]
    assert utts == [dropped] and "no stream has its features" in reasons[0]


def test_corrupted_archive_block_is_an_error_naming_the_block(tmp_path, run_cli, one_error) -> None:
    src = make_streams(tmp_path / "src", [300] * 6, dims=(6, 4))
    out = tmp_path / "x.h5"
    assert run_cli(*archive_args(out, src)).returncode == 0
    with h5py.File(out, "r+") as h5:
        h5["feats"][3, 5, 0] = np.float16(1234.0)  # a bit flip, in effect
    proc = run_cli("train", out, tmp_path / "exp", "--epochs", 1, "--batch", 8, "--hidden", 8,
                   "--layers", 1, "--proj", 0)
    one_error(proc.stderr, 1, proc.returncode, str(out), "chunks [", "/feats are corrupted (checksum mismatch)")


def test_target_out_of_range_in_an_edited_archive(tmp_path, run_cli, one_error) -> None:
    src = make_streams(tmp_path / "src", [300] * 6, dims=(6, 4))
    out = tmp_path / "x.h5"
    assert run_cli(*archive_args(out, src)).returncode == 0
    with h5py.File(out, "r+") as h5:
        h5["targets"][2, 4] = 9999
    proc = run_cli("train", out, tmp_path / "exp", "--epochs", 1, "--batch", 8, "--hidden", 8,
                   "--layers", 1, "--proj", 0)
    one_error(proc.stderr, 1, proc.returncode, str(out), "target 9999")


def test_failed_rerun_keeps_the_archive_and_its_config(tmp_path, run_cli, one_error) -> None:
    src = make_streams(tmp_path / "src", [100] * 4)
    out = tmp_path / "x.h5"
    assert run_cli(*archive_args(out, src)).returncode == 0
    configs = sorted(tmp_path.glob("x*.yaml"))
    before = {p: p.read_bytes() for p in configs}
    h5_before = out.read_bytes()
    proc = run_cli(*archive_args(out, src, "--chunk", 0))
    assert proc.returncode != 0
    assert out.read_bytes() == h5_before
    assert {p: p.read_bytes() for p in configs} == before and configs, configs


@pytest.mark.parametrize("batch", [10_000])
def test_batch_larger_than_the_archive_is_refused(tmp_path, run_cli, one_error, batch: int) -> None:
    src = make_streams(tmp_path / "src", [100] * 4)
    out = tmp_path / "x.h5"
    assert run_cli(*archive_args(out, src)).returncode == 0
    proc = run_cli("train", out, tmp_path / "exp", "--batch", batch, "--hidden", 8, "--layers", 1)
    one_error(proc.stderr, 1, proc.returncode, str(out), f"--batch {batch} chunks per step",
              "holds 20 chunks")
    assert not (tmp_path / "exp" / "final.pt").exists()
    plan = run_cli("train", out, tmp_path / "exp", "--batch", batch, "--dry-run")
    assert plan.returncode == 0 and "training would stop here" in plan.stdout

"""``asrtrain prepare perturb``: Kaldi's 3-way speed perturbation as sox pipes in wav.scp."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from datadir_helpers import make_dir, yesno_dir
from needs import yesno_missing

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.data.dir_view import load_dir
from asrtrain.data.kaldi_dir import read_spk2utt, read_table, read_text, validate_data_dir
from asrtrain.data.perturb import parse_speeds, perturb_dir, sox_entry

needs_sox = pytest.mark.needs(None if shutil.which("sox") else "sox is not installed (make install installs it)")


def table(path: Path) -> dict[str, str]:
    return read_table(path, allow_empty_value=True)


@needs_sox
def test_ids_text_speakers_and_pipes(tmp_path: Path) -> None:
    data = make_dir(tmp_path / "data", {"a": 2, "b": 1})
    summary = perturb_dir(data, tmp_path / "sp", parse_speeds("0.9,1.0,1.1"))
    out = tmp_path / "sp"
    validate_data_dir(out, require=("text", "wav.scp"))  # sorted, spk2utt agrees, full tables
    utt2spk = table(out / "utt2spk")
    assert sorted(utt2spk) == sorted(f"{p}{u}" for p in ("", "sp0.9-", "sp1.1-")
                                     for u in ("a-0", "a-1", "b-0"))
    assert utt2spk["sp0.9-a-1"] == "sp0.9-a" and utt2spk["a-1"] == "a"
    assert list(read_spk2utt(out / "spk2utt")) == ["a", "b", "sp0.9-a", "sp0.9-b", "sp1.1-a",
                                                    "sp1.1-b"]
    text = read_text(out / "text")
    assert text["sp1.1-b-0"] == text["b-0"] == read_text(data / "text")["b-0"]
    assert table(out / "utt2uniq")["sp0.9-a-0"] == "a-0"
    wav = table(out / "wav.scp")
    assert wav["a-0"] == "/audio/a-0.flac"
    assert wav["sp0.9-a-0"] == "sox /audio/a-0.flac -t wav - speed 0.9 |"
    assert summary.utterances == {"0.9": 3, "1": 3, "1.1": 3} and summary.speakers == 6


def test_sox_entries() -> None:
    assert sox_entry("/x/u 1.wav", 1.1) == "sox -t wav '/x/u 1.wav' -t wav - speed 1.1 |"
    assert sox_entry("sph2pipe -f wav u.sph |", 0.9) == \
        "sph2pipe -f wav u.sph | sox - -t wav - speed 0.9 |"
    assert sox_entry("sph2pipe -f wav u.sph |", 1.0) == "sph2pipe -f wav u.sph |"
    with pytest.raises(InputError, match="offset into an ark"):
        sox_entry("/nowhere/wav.ark:1234", 0.9)


@needs_sox
def test_segments_durations_and_recordings(tmp_path: Path) -> None:
    data = make_dir(tmp_path / "data", {"a": 3}, segments=True)
    (data / "utt2dur").write_text("a-0 2.25\na-1 2.25\na-2 2.25\n")
    (data / "reco2file_and_channel").write_text("a-rec0 a-rec0 A\na-rec1 a-rec1 A\n")
    (data / "feats.scp").write_text("a-0 x.ark:1\na-1 x.ark:2\na-2 x.ark:3\n")
    summary = perturb_dir(data, tmp_path / "sp", parse_speeds("0.9,1.0"))
    out = tmp_path / "sp"
    load_dir(out, require=("text",))
    segments = table(out / "segments")
    assert segments["a-1"] == "a-rec0 2.5 4.75"
    assert segments["sp0.9-a-1"] == "sp0.9-a-rec0 2.778 5.278"  # 2.5/0.9, 4.75/0.9
    assert table(out / "utt2dur")["sp0.9-a-2"] == "2.5"
    assert set(table(out / "wav.scp")) == {"a-rec0", "a-rec1", "sp0.9-a-rec0", "sp0.9-a-rec1"}
    assert table(out / "reco2file_and_channel")["sp0.9-a-rec1"] == "a-rec1 A"
    assert not (out / "feats.scp").exists() and summary.left_out == ("feats.scp",)


def test_bad_speeds() -> None:
    for text, problem in (("0.9,0", "above 0"), ("-1", "above 0"), ("0.9,x", "not a number"),
                          ("1.1,1.10", "given twice"), ("nan", "above 0")):
        with pytest.raises(ConfigError, match=problem):
            parse_speeds(text)


def test_out_equal_to_data_and_missing_sox(tmp_path: Path, monkeypatch) -> None:
    data = make_dir(tmp_path / "data", {"a": 1})
    with pytest.raises(ConfigError, match="OUT is DATA"):
        perturb_dir(data, tmp_path / "data" / ".." / "data")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="sox not found on PATH"):
        perturb_dir(data, tmp_path / "sp")
    assert not (tmp_path / "sp").exists()


@needs_sox
def test_atomic_on_failure(tmp_path: Path, monkeypatch) -> None:
    """A run that dies half-way leaves a fresh OUT absent and an earlier OUT as it was."""
    import asrtrain.data.kaldi_dir as kaldi_dir

    data = make_dir(tmp_path / "data", {"a": 2})
    out = tmp_path / "sp"
    real_write, calls = kaldi_dir.write_table, []

    def dying_write(path: Path, rows: dict) -> None:
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device", str(path))
        real_write(path, rows)

    monkeypatch.setattr(kaldi_dir, "write_table", dying_write)
    with pytest.raises(OSError):
        perturb_dir(data, out)
    assert not out.exists() and list(tmp_path.iterdir()) == [data]
    monkeypatch.setattr(kaldi_dir, "write_table", real_write)
    perturb_dir(data, out, parse_speeds("0.9"))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    calls.clear()
    monkeypatch.setattr(kaldi_dir, "write_table", dying_write)
    with pytest.raises(OSError):
        perturb_dir(data, out, parse_speeds("1.1"))
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "sp"]


@needs_sox
def test_already_perturbed_ids_clash(tmp_path: Path) -> None:
    data = make_dir(tmp_path / "data", {"a": 1})
    perturb_dir(data, tmp_path / "sp", parse_speeds("0.9,1.0"))
    perturb_dir(tmp_path / "sp", tmp_path / "sp2", parse_speeds("1.0,1.1"))  # new ids: fine
    assert "sp1.1-sp0.9-a-0" in table(tmp_path / "sp2" / "utt2spk")
    assert table(tmp_path / "sp2" / "utt2uniq")["sp1.1-sp0.9-a-0"] == "a-0"


@needs_sox
def test_cli(tmp_path: Path, run_cli, one_error) -> None:
    data = make_dir(tmp_path / "data", {"a": 2})
    res = run_cli("prepare", "perturb", data, tmp_path / "sp")
    assert res.returncode == 0, res.stderr
    assert "6 utterances (2 at speed 0.9, 2 at speed 1, 2 at speed 1.1), 3 speakers" in res.stdout
    res = run_cli("prepare", "perturb", data, tmp_path / "sp3", "--speeds", "0.9,0.9")
    one_error(res.stdout + res.stderr, 1, res.returncode, "--speeds", "'0.9' is given twice")


@pytest.mark.needs(yesno_missing())
@needs_sox
def test_yesno_frames_scale_with_speed(tmp_path: Path) -> None:
    """Real 8 kHz audio through the sox pipes: same rate, frames about original / speed."""
    from asrtrain.data.features import FeatureConfig, make_features
    from asrtrain.data.kaldi_dir import read_utt2num_frames

    data = yesno_dir(tmp_path / "data", 3)
    perturb_dir(data, tmp_path / "sp", parse_speeds("0.9,1.0,1.1"))
    cfg = FeatureConfig(type="mfcc", sample_rate=8000)  # a resampled pipe would be refused
    make_features(tmp_path / "sp", tmp_path / "mfcc", cfg, nj=1)
    frames = read_utt2num_frames(tmp_path / "mfcc" / "utt2num_frames")
    assert len(frames) == 9
    for utt in read_table(data / "utt2spk"):
        for speed in (0.9, 1.1):
            assert abs(frames[f"sp{speed}-{utt}"] - frames[utt] / speed) <= 1.5, (utt, speed)



@pytest.mark.needs(yesno_missing())
@needs_sox
def test_yesno_segments_scale_with_speed(tmp_path: Path) -> None:
    """Segments of a perturbed recording cut the same speech: frames about original / speed."""
    from asrtrain.data.features import FeatureConfig, make_features
    from asrtrain.data.kaldi_dir import read_utt2num_frames

    data = yesno_dir(tmp_path / "data", 1)
    reco = next(iter(read_table(data / "wav.scp")))
    (data / "segments").write_text(f"r-a {reco} 0.5 2.5\nr-b {reco} 3 -1\n")
    (data / "text").write_text("r-a YES\nr-b NO\n")
    (data / "utt2spk").write_text("r-a r\nr-b r\n")
    (data / "spk2utt").write_text("r r-a r-b\n")
    perturb_dir(data, tmp_path / "sp", parse_speeds("0.9,1.0,1.1"))
    make_features(tmp_path / "sp", tmp_path / "mfcc", FeatureConfig(type="mfcc", sample_rate=8000))
    frames = read_utt2num_frames(tmp_path / "mfcc" / "utt2num_frames")
    assert frames["r-a"] == 198  # 2 s at 8 kHz: 1 + (16000 - 200) // 80
    for utt in ("r-a", "r-b"):
        for speed in (0.9, 1.1):
            assert abs(frames[f"sp{speed}-{utt}"] - frames[utt] / speed) <= 1.5, (utt, speed)

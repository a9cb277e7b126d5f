"""``asrtrain prepare subset``: a dev set of whole speakers, chosen without a seed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from datadir_helpers import make_dir
from needs import missing

from asrtrain.core.errors import ConfigError
from asrtrain.data.dir_view import load_dir
from asrtrain.data.kaldi_dir import read_table, validate_data_dir
from asrtrain.data.subset import pick_spread, split_by_speaker

SPEAKERS = {f"s{i:02d}": 2 + i % 3 for i in range(10)}


def contents(path: Path) -> dict[str, bytes]:
    """The data files of a dir (not its run log, whose name has the time)."""
    return {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()
            and p.name != "fingerprint.json"}


def test_pick_spread() -> None:
    names = [f"s{i:02d}" for i in range(10)]
    assert pick_spread(names[::-1], 3) == ["s01", "s05", "s08"]  # sorted first, then spread
    assert pick_spread(names, 1) == ["s05"]
    assert pick_spread(names, 9) == sorted(set(pick_spread(names, 9)))  # no repeats


def test_split_is_disjoint_complete_and_deterministic(tmp_path: Path) -> None:
    data = make_dir(tmp_path / "data", SPEAKERS)
    first = split_by_speaker(data, tmp_path / "tr", tmp_path / "dv", 3)
    assert first.dev_speakers == ["s01", "s05", "s08"]
    train, dev = (validate_data_dir(tmp_path / d, require=("text",)) for d in ("tr", "dv"))
    assert set(dev.speakers) == {"s01", "s05", "s08"}
    assert not set(train.speakers) & set(dev.speakers)
    assert sorted(train.utterances + dev.utterances) == sorted(read_table(data / "utt2spk"))
    saved = contents(tmp_path / "tr"), contents(tmp_path / "dv")
    split_by_speaker(data, tmp_path / "tr", tmp_path / "dv", 3)
    assert (contents(tmp_path / "tr"), contents(tmp_path / "dv")) == saved


def test_segments_keep_their_recordings(tmp_path: Path) -> None:
    data = make_dir(tmp_path / "data", {"a": 3, "b": 2, "c": 1}, segments=True)
    split_by_speaker(data, tmp_path / "tr", tmp_path / "dv", 1)
    dev = load_dir(tmp_path / "dv", require=("text",))
    assert set(dev.wav) == {"b-rec0"} and set(dev.utt2spk) == {"b-0", "b-1"}
    assert set(load_dir(tmp_path / "tr").wav) == {"a-rec0", "a-rec1", "c-rec0"}


def test_perturbed_copies_stay_together(tmp_path: Path) -> None:
    if shutil.which("sox") is None:
        missing("sox is not installed (make install installs it)")
    from asrtrain.data.perturb import parse_speeds, perturb_dir

    data = make_dir(tmp_path / "data", {"a": 1, "b": 1, "c": 1})
    perturb_dir(data, tmp_path / "sp", parse_speeds("0.9,1.0,1.1"))
    summary = split_by_speaker(tmp_path / "sp", tmp_path / "tr", tmp_path / "dv", 1)
    assert summary.dev_speakers == ["b"]
    assert set(read_table(tmp_path / "dv" / "spk2utt")) == {"b", "sp0.9-b", "sp1.1-b"}
    assert summary.train_speakers == 2 and summary.train_utterances == 6


def test_refusals(tmp_path: Path) -> None:
    data = make_dir(tmp_path / "data", {"a": 1, "b": 1})
    with pytest.raises(ConfigError, match="--dev-speakers 2: DATA has 2 speaker"):
        split_by_speaker(data, tmp_path / "tr", tmp_path / "dv", 2)
    with pytest.raises(ConfigError, match="three different dirs"):
        split_by_speaker(data, tmp_path / "tr", tmp_path / "tr", 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_cli_logs_the_dev_speakers(tmp_path: Path, run_cli, one_error) -> None:
    data = make_dir(tmp_path / "data", SPEAKERS)
    res = run_cli("prepare", "subset", data, tmp_path / "tr", tmp_path / "dv", "--dev-speakers", "2")
    assert res.returncode == 0, res.stderr
    assert "dev speakers (2 of 10): s02 s07" in res.stderr
    log = next((tmp_path / "dv" / "log").glob("prepare-subset.*.log")).read_text()
    assert "dev speakers: s02 s07" in log
    res = run_cli("prepare", "subset", data, tmp_path / "t2", tmp_path / "d2", "--dev-speakers", "10")
    one_error(res.stdout + res.stderr, 1, res.returncode, "--dev-speakers 10", "10 speaker(s)")

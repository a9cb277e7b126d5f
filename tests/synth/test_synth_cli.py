"""``asrtrain prepare synth`` from the command line: a small run, and each bad input's error."""

from __future__ import annotations

import os
from pathlib import Path

import kaldiio
import pytest
import soundfile
import yaml
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.data.kaldi_dir import read_scp, validate_data_dir
from asrtrain.synth import corpus, espeak

TINY_ARGS = ["--hours", "0.004", "--speakers", "3", "--seed", "3", "--lm-sentences", "20"]


def run(*args: object) -> object:
    return CliRunner().invoke(cli, ["prepare", "synth", *map(str, args)])


def no_leftovers(out: Path) -> None:
    """Neither OUT nor a temporary sibling of it."""
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]


def test_cli_8k_with_noise_and_reverb(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    res = run(out, *TINY_ARGS, "--sample-rate", "8000", "--noise-snr", "10:20", "--reverb", "1",
              "--nj", "1")
    assert res.exit_code == 0, res.output
    assert "hours, train" in res.output
    assert list((out / "log").glob("prepare-synth.*.log"))
    config = yaml.safe_load((out / "prepare-synth.config.yaml").read_text())
    assert config["noise_snr"] == "10:20" and config["sample_rate"] == "8000"
    validate_data_dir(out / "train", require=("text", "ali.scp"))
    ali = dict(kaldiio.load_scp(str(out / "train" / "ali.scp")).items())
    for utt, path in read_scp(out / "train" / "wav.scp").items():
        samples, rate = soundfile.read(path, dtype="int16")
        assert rate == 8000
        assert len(ali[utt]) == 1 + (len(samples) - 200) // 80
        assert abs(samples[:800]).max() > 20  # noise in the leading pad


@pytest.mark.parametrize("args,message", [
    (["--hours", "500", "--speakers", "3"], "hours can be had from"),
    (["--hours", "0.01", "--speakers", "3", "--voices", "en-us,xx-nowhere"],
     "unknown espeak-ng voice 'xx-nowhere'"),
    (["--hours", "0.01", "--speakers", "2"], "leaves no training speaker"),
    (["--hours", "0.01", "--speakers", "3", "--noise-snr", "20:10"], "LO <= HI"),
    (["--hours", "0.01", "--speakers", "3", "--reverb", "1.5"], "--reverb is a probability"),
    (["--hours", "0.01", "--speakers", "3", "--dev-speakers", "0"], "must be at least 1"),
    (["--hours", "0.01", "--speakers", "3", "--voices", "en-us+f3"], "give base voices"),
    (["--hours", "0.01", "--speakers", "3", "--voices", "en-029"], "cannot be used: espeak-ng "
                                                                   "produced phoneme 't['"),
])
def test_bad_options_one_line_and_nothing_written(tmp_path: Path, args: list[str],
                                                  message: str) -> None:
    out = tmp_path / "corpus"
    res = run(out, *args)
    assert res.exit_code == 1, res.output
    assert res.output.startswith("Error: ") and message in res.output
    assert res.output.count("\n") == 1
    no_leftovers(out)


def test_missing_libespeak_names_the_package(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(espeak.LIBRARY_ENV, "libespeak-ng-not-here.so.9")
    monkeypatch.setattr(espeak, "_ENGINE", None)
    out = tmp_path / "corpus"
    res = run(out, *TINY_ARGS)
    assert res.exit_code == 1 and "libespeak-ng1" in res.output and "apt-get" in res.output
    no_leftovers(out)


def test_unwritable_out(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    res = run(tmp_path / "file" / "corpus", *TINY_ARGS)
    assert res.exit_code == 1 and "is not a directory" in res.output, res.output
    other = tmp_path / "stuff"
    other.mkdir()
    (other / "precious.txt").write_text("keep me")
    res = run(other, *TINY_ARGS)
    assert res.exit_code == 1 and "refusing to replace" in res.output
    assert (other / "precious.txt").read_text() == "keep me"
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        res = run(locked / "corpus", *TINY_ARGS)
        assert res.exit_code == 1 and "not writable" in res.output


def test_failure_late_in_the_build_leaves_no_corpus(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kw: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(corpus, "_write_lexicon", broken)
    out = tmp_path / "corpus"
    res = run(out, *TINY_ARGS)
    assert res.exit_code == 1 and "No space left" in res.output
    no_leftovers(out)

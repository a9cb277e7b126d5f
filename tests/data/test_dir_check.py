"""``asrtrain prepare check-dirs``: no dev speaker in train or test; transcripts where needed."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from datadir_helpers import make_dir
from needs import missing

from asrtrain.core.errors import InputError
from asrtrain.data.dir_check import check_dirs


def test_separate_dirs_pass(tmp_path: Path, caplog) -> None:
    train = make_dir(tmp_path / "train", {"a": 2, "b": 1})
    dev = make_dir(tmp_path / "dev", {"c": 2})
    test = make_dir(tmp_path / "test", {"b": 1, "d": 1}, segments=True)
    with caplog.at_level(logging.INFO, logger="asrtrain"):
        reports = check_dirs(train, dev, [test])
    assert [(r.role, r.utterances, r.speakers, r.without_text) for r in reports] == [
        ("train", 3, 2, 0), ("dev", 2, 1, 0), ("test", 2, 2, 0)]
    assert "share 1 speaker(s): b (the test is not speaker-independent)" in caplog.text


@pytest.mark.parametrize(("other", "shared"), [("train", "b"), ("test", "c e")])
def test_dev_sharing_speakers_is_refused(tmp_path: Path, other: str, shared: str) -> None:
    dirs = {"train": make_dir(tmp_path / "train", {"a": 1, "b": 1}),
            "dev": make_dir(tmp_path / "dev", {s: 1 for s in shared.split()}),
            "test": make_dir(tmp_path / "test", {"c": 1, "d": 1, "e": 1})}
    with pytest.raises(InputError, match=f"dev {dirs['dev']} shares .* with {other} "
                                         f"{dirs[other]}: {shared} "):
        check_dirs(dirs["train"], dirs["dev"], [dirs["test"]])


def test_perturbed_train_speakers_count_as_their_originals(tmp_path: Path) -> None:
    if shutil.which("sox") is None:
        missing("sox is not installed (make install installs it)")
    from asrtrain.data.perturb import parse_speeds, perturb_dir

    perturb_dir(make_dir(tmp_path / "train", {"a": 1, "b": 1}), tmp_path / "sp",
                parse_speeds("0.9,1.1"))  # speakers sp0.9-a ... only
    with pytest.raises(InputError, match="shares 1 speaker.*: a "):
        check_dirs(tmp_path / "sp", make_dir(tmp_path / "dev", {"a": 1}))


def test_transcripts(tmp_path: Path) -> None:
    train = make_dir(tmp_path / "train", {"a": 3})
    (train / "text").write_text("a-1 HELLO\n")
    with pytest.raises(InputError, match=r"train/text: 2 of 3 utterances have no transcript "
                                         r"\(first 'a-0'\); train needs one for each"):
        check_dirs(train)
    make_dir(train, {"a": 3})
    test = make_dir(tmp_path / "test", {"b": 4}, text=False)
    assert check_dirs(train, tests=[test])[1].without_text == 4
    (test / "text").write_text("b-0 HI\n")
    with pytest.raises(InputError, match="3 of 4 .* a test dir needs text for all of them"):
        check_dirs(train, tests=[test])


def test_cli(tmp_path: Path, run_cli, one_error) -> None:
    train = make_dir(tmp_path / "train", {"a": 1, "b": 1})
    dev = make_dir(tmp_path / "dev", {"c": 1})
    test = make_dir(tmp_path / "test", {"d": 2}, text=False)
    res = run_cli("prepare", "check-dirs", "--train", train, "--dev", dev, "--test", test)
    assert res.returncode == 0, res.stderr
    assert f"test {test}: 2 utterances, 1 speaker(s), 2 without text" in res.stdout
    res = run_cli("prepare", "check-dirs", "--train", train, "--dev", train)
    one_error(res.stdout + res.stderr, 1, res.returncode, "shares 2 speaker(s)", "a b")

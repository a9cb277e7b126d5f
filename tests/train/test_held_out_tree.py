"""`train --valid`: the held-out targets must be pdfs of the training archive's tree.

Two trees with as many pdfs number different states alike; held-out loss and accuracy on
the other tree's targets measure nothing, so the run is refused before it trains (and
``--dry-run`` refuses what the run would).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

from asrtrain.cli.main import cli


def write_learnable_archive(out: Path, utts: int, seed: int) -> Path:
    """tests/train/conftest.py's writer, loaded by path: ``import conftest`` may find another
    directory's conftest when the whole suite runs."""
    spec = importlib.util.spec_from_file_location("train_conftest", Path(__file__).with_name("conftest.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_learnable_archive(out, utts, seed=seed)


def archive_of_tree(out: Path, tree: str | None, seed: int) -> Path:
    """A learnable archive whose alignments have ``tree_id`` ``tree`` beside them (None: none)."""
    src = out.parent / f"{out.stem}_src"  # where write_learnable_archive puts its alignments
    src.mkdir(parents=True)
    if tree is not None:
        (src / "tree_id").write_text(tree + "\n")
    return write_learnable_archive(out, 12, seed=seed)


def train_error(tmp_path: Path, train_tree: str | None, valid_tree: str | None) -> str:
    train = archive_of_tree(tmp_path / "train.h5", train_tree, 0)
    valid = archive_of_tree(tmp_path / "valid.h5", valid_tree, 1)
    res = CliRunner().invoke(cli, ["train", str(train), str(tmp_path / "exp"), "--valid", str(valid),
                                   "--epochs", "1", "--batch", "8", "--threads", "1", "--dry-run"])
    assert res.exit_code == 1, res.output
    errors = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in res.output, res.output
    assert str(valid) in errors[0]
    return errors[0]


def test_another_tree_with_as_many_pdfs_is_refused(tmp_path: Path) -> None:
    line = train_error(tmp_path, "a1b2c3", "d4e5f6")
    assert "targets are pdfs of tree d4e5f6, the training archive's of tree a1b2c3" in line


@pytest.mark.parametrize(("train_tree", "valid_tree"), [("a1b2c3", None), (None, "a1b2c3")])
def test_a_tree_on_one_side_only_is_refused(tmp_path: Path, train_tree, valid_tree) -> None:
    line = train_error(tmp_path, train_tree, valid_tree)
    assert "no tree (phone or unrecorded targets)" in line


def test_the_same_tree_is_accepted(tmp_path: Path) -> None:
    train = archive_of_tree(tmp_path / "train.h5", "a1b2c3", 0)
    valid = archive_of_tree(tmp_path / "valid.h5", "a1b2c3", 1)
    res = CliRunner().invoke(cli, ["train", str(train), str(tmp_path / "exp"), "--valid", str(valid),
                                   "--epochs", "1", "--batch", "8", "--dry-run"])
    assert res.exit_code == 0, res.output

"""Tiny learnable archives for the tests that run the real trainer (written once per session)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _archive_writer():
    spec = importlib.util.spec_from_file_location("train_conftest", HERE.parent / "train" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod.write_learnable_archive


@pytest.fixture(scope="session")
def archives(tmp_path_factory) -> tuple[Path, Path]:
    """(train.h5 with 60 utterances, valid.h5 with 20)."""
    write = _archive_writer()
    root = tmp_path_factory.mktemp("dist_archives")
    return write(root / "train.h5", 60, seed=0), write(root / "valid.h5", 20, seed=1)


@pytest.fixture(scope="session")
def long_archives(tmp_path_factory) -> tuple[Path, Path]:
    """(train.h5 with 400 utterances, about 125 blocks of 8 chunks: long enough epochs that learners of
    work-shared strategies meet for mid-epoch checkpoints before one of them reaches the end; valid.h5)."""
    write = _archive_writer()
    root = tmp_path_factory.mktemp("long_archives")
    return write(root / "train.h5", 400, seed=2), write(root / "valid.h5", 20, seed=1)

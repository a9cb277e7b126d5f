"""Small learnable archives for the study tests (the training tests' writer)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _writer():
    spec = importlib.util.spec_from_file_location("train_conftest", ROOT / "tests" / "train" / "conftest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.write_learnable_archive


@pytest.fixture(scope="session")
def study_archives(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(train.h5 of 40 utterances, valid.h5 of 10)."""
    write = _writer()
    root = tmp_path_factory.mktemp("study_archives")
    return write(root / "train.h5", 40, seed=0), write(root / "valid.h5", 10, seed=1)


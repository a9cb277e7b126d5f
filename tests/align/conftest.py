from __future__ import annotations

import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_mfcc(tiny_corpus: Path, tmp_path_factory) -> Path:
    """MFCC (13, with per-speaker CMVN stats) of the tiny corpus: OUT/{train,dev,test}."""
    from asrtrain.data.features import FeatureConfig, make_features

    out = tmp_path_factory.mktemp("tiny_mfcc")
    for split in ("train", "dev", "test"):
        make_features(tiny_corpus / split, out / split, FeatureConfig(type="mfcc"), nj=1)
    return out


@pytest.fixture(scope="session")
def one_process(tiny_corpus: Path, tiny_mfcc: Path, tmp_path_factory) -> Path:
    """The small ladder of ``ladder_runs`` in one process (``--nj 1``): what every kind
    of jobs must give."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ladder_runs import run

    out = tmp_path_factory.mktemp("nj1") / "ali"
    report = run(tiny_corpus, tiny_mfcc, out, 1)
    assert report["stages"]["mono"]["jobs"] == 1
    return out

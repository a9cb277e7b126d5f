from __future__ import annotations

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

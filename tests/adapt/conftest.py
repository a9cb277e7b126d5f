from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest
from adapt_synthetic import make_corpus


@pytest.fixture(scope="session")
def speaker_corpus(tmp_path_factory) -> Path:
    """6 speakers x 8 utterances of 12-dim speaker-warped frames with class alignments."""
    return make_corpus(tmp_path_factory.mktemp("adapt") / "train", speakers=6, utts=8, dim=12,
                       shift=0.5, rotate=0.3, seed=1)


@pytest.fixture(scope="session")
def unwarped_corpus(tmp_path_factory) -> Path:
    """The same shape of corpus with no speaker differences at all (a control)."""
    return make_corpus(tmp_path_factory.mktemp("adapt") / "flat", speakers=6, utts=8, dim=12,
                       shift=0.0, rotate=0.0, seed=2, warp=False)

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lang"))

from minicorpus import write_corpus  # noqa: E402


@pytest.fixture(scope="session")
def mini_corpus_dec(tmp_path_factory):
    """The hand-made corpus of tests/lang/minicorpus.py."""
    return write_corpus(tmp_path_factory.mktemp("mini_corpus_dec"))


@pytest.fixture(scope="session")
def mini_lang_dec(mini_corpus_dec, tmp_path_factory):
    """``prepare lang`` on the mini corpus (order 3, about 60 pdfs)."""
    from asrtrain.lang.prepare import prepare_lang

    out = tmp_path_factory.mktemp("mini_lang_dec") / "lang"
    prepare_lang(mini_corpus_dec / "dict", mini_corpus_dec / "lm_text", mini_corpus_dec, out,
                 order=3, num_pdfs=60)
    return out

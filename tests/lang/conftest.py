from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest
from minicorpus import write_corpus


@pytest.fixture(scope="session")
def mini_corpus(tmp_path_factory):
    """The hand-made corpus of tests/lang/corpus.py."""
    return write_corpus(tmp_path_factory.mktemp("mini_corpus"))


@pytest.fixture(scope="session")
def mini_lang(mini_corpus, tmp_path_factory):
    """``prepare lang`` run on the mini corpus: (out dir, figures)."""
    from asrtrain.lang.prepare import prepare_lang

    out = tmp_path_factory.mktemp("mini_lang") / "lang"
    figures = prepare_lang(mini_corpus / "dict", mini_corpus / "lm_text", mini_corpus, out,
                           order=3, num_pdfs=60)
    return out, figures

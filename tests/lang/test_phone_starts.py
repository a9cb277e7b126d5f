"""`prepare lang` needs to know where each phone starts: phone.ctm, or the aligner's states.

A phone per frame cannot show two equal phones in a row; guessed boundaries would build
the tree, the targets and the learned pronunciations on the guess, so the command refuses
in one line naming the missing file instead of going on with an INFO line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from asrtrain.core.errors import InputError
from asrtrain.lang.pdf_ali import read_split


def without_ctm(mini_corpus: Path, tmp_path: Path, split: str) -> Path:
    """A copy of the mini corpus whose ``split`` has no phone.ctm."""
    ali = tmp_path / "ali"
    shutil.copytree(mini_corpus, ali)
    (ali / split / "phone.ctm").unlink()
    return ali


@pytest.mark.parametrize("split", ["train", "dev"])
def test_lang_from_alignments_without_phone_starts_is_refused(run_cli, one_error, mini_corpus,
                                                              tmp_path, split) -> None:
    ali = without_ctm(mini_corpus, tmp_path, split)
    out = tmp_path / "lang"
    proc = run_cli("prepare", "lang", ali / "dict", ali / "lm_text", ali, out, "--order", "3",
                   "--num-pdfs", "40")
    one_error(proc.stdout + proc.stderr, 1, proc.returncode, str(ali / split / "phone.ctm"),
              "not found", "two equal phones in a row merge")
    assert not (out / "graph").exists()


def test_phone_starts_from_the_ctm_are_read(mini_corpus) -> None:
    alignments = list(read_split(mini_corpus, "train"))
    assert alignments and all(len(a.cuts) for a in alignments)


def test_even_targets_do_not_fall_back_to_a_guess(mini_corpus, tmp_path) -> None:
    ali = without_ctm(mini_corpus, tmp_path, "train")
    with pytest.raises(InputError, match="phone.ctm: not found"):
        list(read_split(ali, "train", "even"))

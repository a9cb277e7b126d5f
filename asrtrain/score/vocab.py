"""The reference words split by whether the LM's text holds them, and the errors on each side.

A word the LM text never saw reaches the decoder only through the LM's unigram floor, so it
is mostly lost whatever the acoustic model does; a WER that hides that share cannot say what
an acoustic change could win. With ``score --lm-text FILE`` the reports count, over the
reference words (the scored ones, after the normaliser), those inside FILE's vocabulary and
those outside it, and how many of each were substituted or deleted. Insertions have no
reference word and stay apart. FILE may be a lang dir: its ``lm_words.txt``, the words of the
text its LM was estimated from once ``--exclude-text`` took dev's lines out (the recipes pass
it: the raw LM text would count a word only dev's transcripts hold as read, and would be read
whole again by every score).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines
from asrtrain.lang.lang_lm import LM_WORDS
from asrtrain.score.align import CORRECT, INSERTION, Pair


@dataclass(frozen=True)
class VocabSplit:
    """Reference words and their errors (substitutions + deletions), inside the LM text's
    vocabulary and outside it; ``insertions`` apart."""

    source: str
    inside: int
    inside_wrong: int
    outside: int
    outside_wrong: int
    insertions: int

    def as_dict(self) -> dict[str, Any]:
        words = self.inside + self.outside
        return {"lm_text": self.source, "words": words, "inside": self.inside,
                "inside_wrong": self.inside_wrong, "outside": self.outside,
                "outside_wrong": self.outside_wrong, "insertions": self.insertions,
                "outside_share": round(self.outside / words, 4) if words else None,
                "line": self.line()}

    def line(self) -> str:
        """One line for summary.txt and dev_picked_wer."""
        words = self.inside + self.outside
        return (f"reference words outside the LM text ({self.source}): {self.outside} of {words} "
                f"({_pct(self.outside, words)}), {self.outside_wrong} of them wrong "
                f"({_pct(self.outside_wrong, self.outside)}); inside it {self.inside_wrong} of "
                f"{self.inside} wrong ({_pct(self.inside_wrong, self.inside)}); "
                f"{self.insertions} insertions")


def _pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:.1f}%" if d else "-"


@functools.lru_cache(maxsize=2)
def read_vocab(path: Path) -> frozenset[str]:
    """The words of an LM text (one sentence a line, as ``prepare lang`` reads it), or of a lang
    dir's ``lm_words.txt``; read once for all the settings of a sweep."""
    if path.is_dir():
        listed = path / LM_WORDS
        if not listed.is_file():
            raise InputError(f"no {LM_WORDS}: its LM was not estimated from a text by this version "
                             "of prepare lang (an --arpa LM, or an older lang dir); give the LM text", path)
        path = listed
    words = frozenset(w for line in read_lines(path) for w in line.split())  # errors name the file
    if not words:
        raise InputError("the LM text holds no words", path)
    return words


def split_by_vocab(alignments: Iterable[list[Pair]], vocab: frozenset[str], source: str) -> VocabSplit:
    """Count the aligned reference words inside and outside ``vocab``."""
    counts = {True: [0, 0], False: [0, 0]}
    insertions = 0
    for pairs in alignments:
        for p in pairs:  # the same pairs sclite's counts are made of: words = C + S + D
            if p.op == INSERTION:
                insertions += 1
                continue
            side = counts[p.ref is not None and p.ref.text in vocab]
            side[0] += 1
            side[1] += p.op != CORRECT
    return VocabSplit(source, counts[True][0], counts[True][1], counts[False][0], counts[False][1],
                      insertions)

"""A small lang setup from a synth corpus, for benchmarks and experiments: the LM text cut
to N lines, the lexicon to the words of that text and of the transcripts (graphs in seconds)."""

from __future__ import annotations

import os
from pathlib import Path

from asrtrain.core.textio import read_lines


def subset_corpus(corpus: Path, out: Path, lm_lines: int = 3000) -> Path:
    """``out`` with dict/, lm_text and links to phones.txt and the split dirs of ``corpus``."""
    out.mkdir(parents=True, exist_ok=True)
    lines = read_lines(corpus / "lm_text")[:lm_lines]
    (out / "lm_text").write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
    words = {w for ln in lines for w in ln.split()}
    for split in ("train", "dev", "test"):
        for ln in read_lines(corpus / split / "text"):
            words.update(ln.split()[1:])
        if not (out / split).exists():
            os.symlink(corpus / split, out / split)
    (out / "dict").mkdir(exist_ok=True)
    for name in ("silence_phones.txt", "nonsilence_phones.txt", "optional_silence.txt"):
        (out / "dict" / name).write_bytes((corpus / "dict" / name).read_bytes())
    lex = [ln for ln in read_lines(corpus / "dict" / "lexicon.txt") if ln.split() and ln.split()[0] in words]
    (out / "dict" / "lexicon.txt").write_text("".join(ln + "\n" for ln in lex), encoding="utf-8")
    (out / "phones.txt").write_bytes((corpus / "phones.txt").read_bytes())
    return out

"""Transcripts to phone DAGs: words looked up in the lexicon, OOVs refused or mapped.

A word missing from the lexicon cannot be aligned. Kaldi's answer is ``--oov``: map
every such word to a word the lexicon has (``<UNK>`` with a garbage phone, say) and say
how many were mapped. Without it, the words are refused with their counts, so a user
sees at once whether a lexicon is incomplete or the text needs normalising.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from asrtrain.align.graph import PhoneDag, phone_dag
from asrtrain.core.errors import InputError
from asrtrain.lang.lexicon import Lexicon

log = logging.getLogger("asrtrain.align")


def pron_table(lex: Lexicon) -> dict[str, list[tuple[int, ...]]]:
    """Word → its pronunciations as phone-id tuples (lexicon order)."""
    out: dict[str, list[tuple[int, ...]]] = {}
    for word, pron in lex.prons:
        out.setdefault(word, []).append(tuple(lex.phones[p] for p in pron))
    return out


def map_oovs(text: dict[str, list[str]], prons: dict[str, list[tuple[int, ...]]],
             oov: str | None, source: Path) -> tuple[dict[str, list[str]], Counter[str]]:
    """Transcripts with OOVs mapped to ``oov``; without ``oov`` any OOV is an InputError
    listing the words and their counts."""
    counts: Counter[str] = Counter(w for words in text.values() for w in words if w not in prons)
    if not counts:
        return text, counts
    listed = ", ".join(f"{w} ({n})" for w, n in counts.most_common(20))
    more = f" and {len(counts) - 20} more" if len(counts) > 20 else ""
    if oov is None:
        raise InputError(f"{sum(counts.values())} tokens of {len(counts)} words are not in the "
                         f"lexicon: {listed}{more}; add them or map them with --oov WORD", source)
    if oov not in prons:
        raise InputError(f"--oov {oov!r} is not a word of the lexicon", source)
    log.warning("%s: %d tokens of %d words not in the lexicon mapped to %s: %s%s", source,
                sum(counts.values()), len(counts), oov, listed, more)
    return {u: [w if w in prons else oov for w in words] for u, words in text.items()}, counts


def build_dags(text: dict[str, list[str]], prons: dict[str, list[tuple[int, ...]]], sil: int,
               empty: list[str]) -> dict[str, PhoneDag]:
    """The phone DAG of every non-empty transcript; empty ones are appended to ``empty``."""
    dags: dict[str, PhoneDag] = {}
    for utt, words in text.items():
        if not words:
            empty.append(utt)
            continue
        dags[utt] = phone_dag([prons[w] for w in words], sil)
    return dags

"""Transcripts to phone DAGs: words looked up in the lexicon, OOVs refused or mapped.

A word missing from the lexicon cannot be aligned. Kaldi's answer is ``--oov``: map
every such word to a word the lexicon has (``<UNK>`` with a garbage phone, say) and say
how many were mapped. Without it, the words are refused with their counts, so a user
sees at once whether a lexicon is incomplete or the text needs normalising.

The parent checks the whole corpus' text (OOVs, empty transcripts) and keeps only which
utterances have words; each alignment job builds its own utterances' DAGs from
:class:`Prons` (as Kaldi's jobs each run ``compile-train-graphs`` on their split): a
DAG is about 10 KB (13 words), 10 GB for a million utterances in one process.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
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
    return {u: mapped(words, prons, oov) for u, words in text.items()}, counts


def mapped(words: list[str], prons: dict[str, list[tuple[int, ...]]], oov: str | None
           ) -> list[str]:
    """``words`` with those missing from the lexicon replaced by ``oov``."""
    return [w if w in prons else oov for w in words] if oov is not None else words


def transcribed(text: dict[str, list[str]], empty: list[str]) -> list[str]:
    """The utterances with words (their DAGs are built and aligned), in ``text``'s order;
    those without are appended to ``empty``."""
    out: list[str] = []
    for utt, words in text.items():
        (out if words else empty).append(utt)
    return out


@dataclass
class Prons:
    """What a job builds its utterances' DAGs from: the lexicon's pronunciations as phone
    ids, the silence phone, the ``--oov`` word (lexicon-sized: sent to every job)."""

    table: dict[str, list[tuple[int, ...]]]
    sil: int
    oov: str | None = None

    def only(self, words: Iterable[str]) -> Prons:
        """These words' pronunciations alone (and ``oov``'s): what one job's transcripts
        need, not the whole lexicon in every job (6.4 MB a job for 30k words)."""
        keep = set(words) | ({self.oov} if self.oov is not None else set())
        return Prons({w: self.table[w] for w in sorted(keep) if w in self.table}, self.sil,
                     self.oov)

    def dags(self, text: dict[str, list[str]], utts: list[str], source: Path
             ) -> dict[str, PhoneDag]:
        """The phone DAG of each of ``utts`` (checked by the parent to have words, each in
        the lexicon or mapped), from its transcript in ``text``."""
        dags: dict[str, PhoneDag] = {}
        for utt in utts:
            words = mapped(text.get(utt, []), self.table, self.oov)
            missing = [w for w in words if w not in self.table]
            if not words or missing:
                now = f"{missing[0]!r} is not in the lexicon" if missing else "empty"
                raise InputError(f"utterance {utt!r}: its transcript changed during the run "
                                 f"({now})", source)
            dags[utt] = phone_dag([self.table[w] for w in words], self.sil)
        return dags

"""The pronunciation lexicon: espeak's isolated-word forms plus the forms it uses in context.

espeak pronounces a word differently inside a sentence (THE is ``D @`` 3013 times
and ``D i`` 425 times), so the lexicon built only from isolated words would not
match the audio. Each utterance's phones are aligned (edit distance) to the
concatenated isolated forms of its words; a different in-context form seen at
least twice becomes a variant.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import kaldialign

from asrtrain.core.atomic import write_text
from asrtrain.synth.phones import PHONES, SIL, fold_word

MIN_VARIANT_COUNT = 2
_EPS = "<eps>"

Lexicon = dict[str, list[tuple[str, ...]]]


def isolated_pronunciations(words: Iterable[str], engine) -> tuple[dict[str, tuple[str, ...]],
                                                                   list[str]]:
    """Each upper-case word's isolated form (en-us), and the words espeak gave no phones."""
    engine.set_voice("en-us")
    prons: dict[str, tuple[str, ...]] = {}
    empty: list[str] = []
    for word in sorted(set(words)):
        phones = tuple(fold_word(engine.phonemize(word.lower())))
        if phones:
            prons[word] = phones
        else:
            empty.append(word)
    return prons, empty


def context_forms(words: tuple[str, ...], phones: list[str],
                  prons: dict[str, tuple[str, ...]]) -> list[tuple[str, tuple[str, ...]]]:
    """Split an utterance's phones into its words by aligning them to the isolated forms.

    A phone inserted between two words goes to the earlier word.
    """
    ref: list[str] = []
    owner: list[int] = []
    for index, word in enumerate(words):
        ref.extend(prons[word])
        owner.extend([index] * len(prons[word]))
    spans: list[list[str]] = [[] for _ in words]
    position, current = 0, 0
    for ref_phone, hyp_phone in kaldialign.align(ref, phones, _EPS):
        if ref_phone != _EPS:
            current = owner[position]
            position += 1
        if hyp_phone != _EPS:
            spans[current].append(hyp_phone)
    return [(word, tuple(span)) for word, span in zip(words, spans, strict=True)]


def count_variants(utterances: Iterable[tuple[tuple[str, ...], list[str]]],
                   prons: dict[str, tuple[str, ...]]) -> Counter:
    """(word, form) counts of in-context forms that differ from the isolated form."""
    counts: Counter = Counter()
    for words, phones in utterances:
        for word, form in context_forms(words, phones, prons):
            if form and form != prons[word]:
                counts[word, form] += 1
    return counts


def build_lexicon(prons: dict[str, tuple[str, ...]], variants: Counter) -> Lexicon:
    """Isolated form first, then variants seen at least twice (most frequent first)."""
    lexicon: Lexicon = {word: [form] for word, form in prons.items()}
    for (word, form), count in sorted(variants.items(), key=lambda kv: (-kv[1], kv[0])):
        if count >= MIN_VARIANT_COUNT:
            lexicon[word].append(form)
    return lexicon


def write_dict_dir(directory: Path, lexicon: Lexicon) -> None:
    """Kaldi's dict dir: lexicon.txt, (non)silence_phones.txt, optional_silence.txt."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f"{word} {' '.join(form)}\n" for word in sorted(lexicon, key=str.encode)
             for form in lexicon[word]]
    write_text(directory / "lexicon.txt", "".join(lines))
    write_text(directory / "nonsilence_phones.txt", "".join(f"{p}\n" for p in PHONES))
    write_text(directory / "silence_phones.txt", f"{SIL}\n")
    write_text(directory / "optional_silence.txt", f"{SIL}\n")
    write_text(directory / "extra_questions.txt", "")

"""Pronunciation variants learned from the training alignments (Kaldi's ``get_prons.sh`` idea).

In running speech words lose and gain phones (A: eI → @, THERE before a vowel: D e@ → D e@ r).
A decoding graph that only knows isolated forms forces those frames onto other words.
Each training utterance's phone string (silence removed) is split into its words by
dynamic programming, each word taking the stretch of phones closest (edit distance) to
one of its lexicon pronunciations; a stretch that differs from every listed form becomes
a variant when seen ``min_count`` times. A phone that fits either neighbour goes to the
earlier word, where espeak puts it (THERE IS: D e@ r | I z). Utterances whose split costs more than a third
of their phones are left out (a transcript and an alignment that disagree).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence

log = logging.getLogger("asrtrain.lang.prons")
SLACK = 2  # a stretch may be this many phones shorter or longer than the word's forms


def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance of two short phone strings."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def split_words(words: Sequence[str], phones: Sequence[str],
                prons: dict[str, list[tuple[str, ...]]],
                cache: dict[tuple[str, tuple[str, ...]], int] | None = None
                ) -> tuple[list[tuple[str, ...]], int] | None:
    """The phone stretch of each word, minimising the summed edit distance; None if a word
    has no pronunciation or no split exists. ``cache`` keeps distances across calls."""
    cache = {} if cache is None else cache
    n = len(phones)
    inf = float("inf")
    cost = [[inf] * (n + 1) for _ in range(len(words) + 1)]
    back = [[0] * (n + 1) for _ in range(len(words) + 1)]
    cost[0][0] = 0
    for i, w in enumerate(words):
        forms = prons.get(w)
        if not forms:
            return None
        lo = max(1, min(len(f) for f in forms) - SLACK)
        hi = max(len(f) for f in forms) + SLACK
        for j in range(n + 1):
            if cost[i][j] == inf:
                continue
            for k in range(j + lo, min(j + hi, n) + 1):
                stretch = tuple(phones[j:k])
                d = cache.get((w, stretch))
                if d is None:
                    d = cache[(w, stretch)] = min(edit_distance(f, stretch) for f in forms)
                c = cost[i][j] + d
                if c <= cost[i + 1][k]:  # ties: the earlier word keeps the phone (linking r)
                    cost[i + 1][k], back[i + 1][k] = c, j
    if cost[len(words)][n] == inf:
        return None
    out: list[tuple[str, ...]] = []
    k = n
    for i in range(len(words), 0, -1):
        j = back[i][k]
        out.append(tuple(phones[j:k]))
        k = j
    return out[::-1], int(cost[len(words)][n])


def learn_variants(utterances: Iterable[tuple[Sequence[str], Sequence[str]]],
                   prons: dict[str, list[tuple[str, ...]]], min_count: int = 1
                   ) -> tuple[list[tuple[str, tuple[str, ...]]], dict[str, int]]:
    """New ``(word, pron)`` pairs from ``(words, phones)`` of training utterances."""
    seen: Counter[tuple[str, tuple[str, ...]]] = Counter()
    stats = {"utterances": 0, "used": 0, "unsplit": 0, "disagree": 0}
    cache: dict[tuple[str, tuple[str, ...]], int] = {}
    for words, phones in utterances:
        stats["utterances"] += 1
        got = split_words(words, phones, prons, cache)
        if got is None:
            stats["unsplit"] += 1
            continue
        stretches, cost = got
        if cost * 3 > len(phones):
            stats["disagree"] += 1
            continue
        stats["used"] += 1
        for w, stretch in zip(words, stretches, strict=True):
            if stretch not in prons[w]:
                seen[(w, stretch)] += 1
    new = sorted(k for k, c in seen.items() if c >= min_count)
    stats["variants"] = len(new)
    log.info("pronunciation variants: %d new from %d of %d training utterances (%d without a "
             "split, %d disagreeing with their transcript)", len(new), stats["used"],
             stats["utterances"], stats["unsplit"], stats["disagree"])
    return new, stats

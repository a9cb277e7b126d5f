"""An n-gram LM by interpolated modified Kneser-Ney (Chen & Goodman 1998), written as ARPA.

Nothing installable here writes modified-KN ARPA files (FACTS.md), so the estimate lives in
the project. It follows KenLM's reading of Chen & Goodman: the highest order and n-grams
that start with ``<s>`` use raw counts, the other orders use continuation counts (the
number of distinct left extensions); each order has three discounts D1, D2, D3+ from its
count-of-counts; the unigrams interpolate with the uniform distribution over the
vocabulary. In an interpolated model the back-off weight of a context is exactly its
interpolation weight γ(h), which is what the ARPA file stores. ``min_count`` prunes
n-grams of an order whose raw count is lower; their mass moves into γ(h), so every
distribution still sums to one.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from asrtrain.core.errors import ConfigError

BOS, EOS, UNK = "<s>", "</s>", "<UNK>"
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)
log = logging.getLogger("asrtrain.lang.lm")

Ngram = tuple[str, ...]


@dataclass
class NgramLM:
    """Probabilities p(w|h) of the listed n-grams and back-off weights γ(h), per order."""

    order: int
    vocab: list[str]
    prob: list[dict[Ngram, float]] = field(default_factory=list)     # index n-1
    backoff: list[dict[Ngram, float]] = field(default_factory=list)  # index n-1
    discounts: list[tuple[float, float, float]] = field(default_factory=list)

    def p(self, history: Sequence[str], word: str) -> float:
        """p(word | history) with ARPA back-off semantics (history cut to order-1)."""
        h = tuple(history)[-(self.order - 1):] if self.order > 1 else ()
        weight = 1.0
        while True:
            g = h + (word,)
            got = self.prob[len(g) - 1].get(g)
            if got is not None:
                return weight * got
            if not h:
                return 0.0
            weight *= self.backoff[len(h) - 1].get(h, 1.0)
            h = h[1:]


def parse_min_count(spec: str | Sequence[int] | None, order: int) -> list[int]:
    """``"1,1,2,2"`` → a raw-count cutoff per order (missing orders repeat the last)."""
    if spec is None or spec == "":
        return [1] * order
    try:
        values = [int(v) for v in (spec.split(",") if isinstance(spec, str) else spec)]
    except (TypeError, ValueError):
        raise ConfigError(f"--min-count {spec!r}: expected integers separated by commas, "
                          "like 1,1,2,2") from None
    values = (values + [values[-1]] * order)[:order]
    if values[0] != 1:
        raise ConfigError("--min-count: unigrams cannot be pruned (the first value must be 1)")
    if any(b < a for a, b in zip(values, values[1:], strict=False)) or min(values) < 1:
        raise ConfigError(f"--min-count {spec}: cutoffs must be >= 1 and non-decreasing by order")
    return values


def count_ngrams(sentences: Iterable[Sequence[str]], order: int) -> list[Counter[Ngram]]:
    """Raw counts of every n-gram (n ≤ order) of ``<s> w1 … wn </s>``; none ends in ``<s>``."""
    counts: list[Counter[Ngram]] = [Counter() for _ in range(order)]
    for words in sentences:
        toks = (BOS, *words, EOS)
        for i in range(1, len(toks)):
            for n in range(1, order + 1):
                if i - n + 1 < 0:
                    break
                counts[n - 1][toks[i - n + 1:i + 1]] += 1
    return counts


def adjusted_counts(raw: list[Counter[Ngram]]) -> list[dict[Ngram, int]]:
    """Raw counts at the top order and after ``<s>``; continuation counts below."""
    order = len(raw)
    adj: list[dict[Ngram, int]] = [dict() for _ in range(order)]
    adj[order - 1] = dict(raw[order - 1])
    for n in range(order - 1, 0, -1):
        cont: dict[Ngram, int] = defaultdict(int)
        for g in raw[n]:
            cont[g[1:]] += 1
        # every n-gram not starting with <s> has a left extension, so cont[g] >= 1
        adj[n - 1] = {g: (c if g[0] == BOS else cont[g]) for g, c in raw[n - 1].items()}
    return adj


def discounts(adj: dict[Ngram, int], n: int) -> tuple[float, float, float]:
    """D1, D2, D3+ from the count-of-counts n1..n4 (Chen & Goodman eq. 26)."""
    coc = Counter(c for c in adj.values() if c <= 4)
    n1, n2, n3, n4 = (coc.get(k, 0) for k in (1, 2, 3, 4))
    try:
        y = n1 / (n1 + 2 * n2)
        d = (1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3)
    except ZeroDivisionError:
        d = (-1.0, 0.0, 0.0)
    if not all(0 < dk < k + 1 for k, dk in enumerate(d)):
        log.warning("order %d: count-of-counts %s give no valid discounts; using %s", n,
                    (n1, n2, n3, n4), FALLBACK_DISCOUNTS)
        return FALLBACK_DISCOUNTS
    return d


def _discount(d: tuple[float, float, float], c: int) -> float:
    return d[min(c, 3) - 1]


def estimate(sentences: Iterable[Sequence[str]], order: int = 4, vocab: Iterable[str] = (),
             min_count: str | Sequence[int] | None = None) -> NgramLM:
    """Estimate the interpolated modified-KN model of ``sentences``.

    ``vocab`` adds words that get unigram mass from the uniform floor even if unseen
    (the lexicon's words). ``<s>`` is a context only; ``</s>`` and ``<UNK>`` are words.
    """
    if order < 1:
        raise ConfigError(f"--order must be at least 1, got {order}")
    cutoffs = parse_min_count(min_count, order)
    raw = count_ngrams(sentences, order)
    if not raw[0]:
        raise ConfigError("the LM text has no sentences")
    adj = adjusted_counts(raw)
    words = sorted(({g[0] for g in raw[0]} | set(vocab) | {EOS, UNK}) - {BOS})
    lm = NgramLM(order=order, vocab=words)
    for n in range(1, order + 1):
        d = discounts(adj[n - 1], n)
        lm.discounts.append(d)
        totals: dict[Ngram, int] = defaultdict(int)
        for g, c in adj[n - 1].items():
            totals[g[:-1]] += c
        kept = {g: c for g, c in adj[n - 1].items() if raw[n - 1][g] >= cutoffs[n - 1]}
        if n == 1:
            kept.update({(w,): 0 for w in words if (w,) not in kept})
        alpha: dict[Ngram, float] = {g: max(c - _discount(d, c), 0.0) / totals[g[:-1]] if c else 0.0
                                     for g, c in kept.items()}
        gamma: dict[Ngram, float] = defaultdict(lambda: 1.0)
        for g, a in alpha.items():
            gamma[g[:-1]] -= a
        gamma = {h: max(v, 0.0) for h, v in gamma.items()}
        lm.prob.append({})
        if n > 1:
            lm.backoff[n - 2] = {h: v for h, v in gamma.items() if h in lm.prob[n - 2] or h == (BOS,)}
        for g, a in alpha.items():
            lower = 1.0 / len(words) if n == 1 else lm.p(g[1:-1], g[-1])
            lm.prob[n - 1][g] = a + gamma[g[:-1]] * lower
        lm.backoff.append({})
    lm.prob[0][(BOS,)] = 0.0  # a context only: log10 p = -99 in the ARPA file
    return lm


def _log10(p: float) -> float:
    return math.log10(p) if p > 0 else -99.0


def arpa_text(lm: NgramLM) -> str:
    """The model in ARPA format (log10 probabilities and back-off weights)."""
    out = ["", "\\data\\"]
    out += [f"ngram {n}={len(lm.prob[n - 1])}" for n in range(1, lm.order + 1)]
    for n in range(1, lm.order + 1):
        out += ["", f"\\{n}-grams:"]
        bows = lm.backoff[n - 1] if n < lm.order else {}
        for g in sorted(lm.prob[n - 1]):
            line = f"{_log10(lm.prob[n - 1][g]):.7f}\t{' '.join(g)}"
            if g in bows and n < lm.order:
                line += f"\t{_log10(bows[g]):.7f}"
            out.append(line)
    out += ["", "\\end\\", ""]
    return "\n".join(out)


def write_arpa(path: Path, lm: NgramLM) -> None:
    """Write the ARPA file atomically."""
    from asrtrain.core.atomic import write_text

    write_text(path, arpa_text(lm))


def perplexity(lm: NgramLM, sentences: Iterable[Sequence[str]]) -> tuple[float, int, int]:
    """(perplexity, scored tokens incl. ``</s>``, OOV words skipped) as SRILM counts them."""
    vocab = set(lm.vocab)
    logsum, scored, oov = 0.0, 0, 0
    for words in sentences:
        hist: list[str] = [BOS]
        for w in (*words, EOS):
            if w not in vocab or w == UNK:
                oov += 1  # not scored; as an unlisted context it backs off for free
                hist.append(w)
                continue
            p = lm.p(hist, w)
            logsum += math.log(p) if p > 0 else -230.0
            scored += 1
            hist.append(w)
    return (math.exp(-logsum / scored) if scored else float("inf")), scored, oov

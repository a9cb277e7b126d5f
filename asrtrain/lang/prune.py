"""Entropy pruning (Stolcke 1998) of a back-off LM held as a trie, as SRILM's ``-prune``.

An n-gram is removed when doing so raises the model's perplexity (on its own
distribution) by a relative amount below the threshold: SRILM's ``Ngram::pruneProbs``,
which Kaldi's ``ngram_entropy_pruning.py`` and ``kaldingram prune`` also follow. Its
estimate for removing ``h w`` alone, with p = p(w|h), p' = p(w|h') the backed-off one,
N(h) = 1 − Σ p(·|h) and D(h) = 1 − Σ p'(·|h') over the listed words of h:

    BOW'(h) = (N(h) + p) / (D(h) + p')
    ΔH = −P(h) · ( p · [log p' + log BOW'(h) − log p] + N(h) · [log BOW'(h) − log BOW(h)] )
    change = 10^ΔH − 1

with P(h) the chain-rule probability of the context (``<s>`` counted as ``</s>``).
SRILM prunes the highest order first but every quantity above depends only on lower
orders, which that order's pruning leaves alone; so all changes are computed once, on
the full model, vectorized, and a threshold is then a mask: an n-gram stays if its
change reaches the threshold or it is the context of an n-gram that stays. That makes a
target size (``--prune-ngrams``) a search over thresholds with no re-estimation, and
pruning monotone: a larger threshold keeps a subset. Unigrams are never pruned
(SRILM's ``-minprune 2``). Back-off weights are recomputed afterwards, lowest order
first, so every distribution sums to one again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from asrtrain.core.errors import ConfigError
from asrtrain.lang.trie import NgramTrie

log = logging.getLogger("asrtrain.lang.prune")

PROB_EPSILON = 3e-6   # SRILM's Prob_Epsilon: rounding slack in a back-off's numerator
LOG_ZERO = -99.0
BLOCK = 1 << 20


@dataclass
class Pruned:
    """The pruned trie and what was done."""

    trie: NgramTrie
    threshold: float
    before: list[int]
    after: list[int]
    unprunable: int   # n-grams under a context whose back-off SRILM's checks reject


def context_logprob(trie: NgramTrie, bos: int, eos: int) -> list[np.ndarray]:
    """log10 P(h) of every row of orders 1..N−1 as a history: the chain rule over its
    prefixes, which an ARPA lists, so each factor is a listed probability."""
    first = trie.logp[0].astype(np.float64)
    first[bos] = first[eos]
    out = [first]
    for n in range(2, trie.order):
        out.append(out[-1][trie.parents(n)] + trie.logp[n - 1])
    return out


def backoff_logprob(trie: NgramTrie, n: int) -> np.ndarray:
    """log10 p(w | h') for every row ``h w`` of order ``n`` ≥ 2 (h' = h minus its first word)."""
    out = np.empty(trie.rows(n))
    for lo in range(0, trie.rows(n), BLOCK):
        rows = np.arange(lo, min(trie.rows(n), lo + BLOCK), dtype=np.int64)
        words = trie.ngram_words(n, rows)
        out[rows] = trie.cond_logprob(words[:, 1:-1], words[:, -1])
    return out


def bow_terms(trie: NgramTrie, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(N(h), D(h), usable) for each context row h of order n−1, and p' of order n's rows;
    the rounding slack and degenerate cases as SRILM's ``computeBOW``."""
    parents = trie.parents(n)
    backoff = backoff_logprob(trie, n)
    rows = trie.rows(n - 1)
    num = 1.0 - np.bincount(parents, 10.0 ** trie.logp[n - 1].astype(np.float64), minlength=rows)
    den = 1.0 - np.bincount(parents, 10.0 ** backoff, minlength=rows)
    num[(num < 0) & (num > -PROB_EPSILON)] = 0.0
    den[(den < 0) & (den > -PROB_EPSILON)] = 0.0
    # SRILM: a zero denominator with mass left is rescaled (usable); otherwise a negative
    # numerator, or a non-positive denominator with mass left, is improper
    rescaled = (den == 0) & (num > 0)
    usable = rescaled | ~((num < 0) | ((den <= 0) & (num > PROB_EPSILON)))
    zero = usable & (den <= 0)
    num[zero] = den[zero] = 0.0
    return num, den, usable, backoff


def perplexity_changes(trie: NgramTrie, bos: int, eos: int) -> list[np.ndarray]:
    """SRILM's relative perplexity change for removing each row of orders 2..N alone
    (list index n−2); +inf where the context's back-off is improper (kept, as SRILM)."""
    history = context_logprob(trie, bos, eos)
    out = []
    for n in range(2, trie.order + 1):
        num, den, usable, backoff = bow_terms(trie, n)
        h = trie.parents(n)
        logp = trie.logp[n - 1].astype(np.float64)
        p = 10.0 ** logp
        with np.errstate(divide="ignore", invalid="ignore"):
            new_bow = np.log10(num[h] + p) - np.log10(den[h] + 10.0 ** backoff)
            old_bow = trie.bow[n - 2].astype(np.float64)[h]
            delta_h = -(10.0 ** history[n - 2][h]) * (
                p * (backoff + new_bow - logp) + num[h] * (new_bow - old_bow))
            change = 10.0 ** delta_h - 1.0
        change[~usable[h] | np.isnan(change)] = np.inf
        out.append(change)
    return out


def keep_masks(trie: NgramTrie, changes: list[np.ndarray], threshold: float) -> list[np.ndarray]:
    """Rows of orders 2..N that stay at ``threshold``: change ≥ threshold, or a context of
    a row that stays (SRILM never prunes an n-gram whose back-off node is needed)."""
    masks: list[np.ndarray] = []
    below: np.ndarray | None = None
    for n in range(trie.order, 1, -1):
        keep = changes[n - 2] >= threshold if threshold > 0 else np.ones(trie.rows(n), bool)
        if below is not None:
            keep |= np.bincount(trie.parents(n + 1)[below], minlength=trie.rows(n)) > 0
        masks.append(keep)
        below = keep
    return masks[::-1]


def kept_count(trie: NgramTrie, masks: list[np.ndarray]) -> int:
    return trie.count(1) + sum(int(m.sum()) for m in masks)


def threshold_for(trie: NgramTrie, changes: list[np.ndarray], target: int) -> float:
    """The smallest threshold that keeps at most ``target`` n-grams (all orders)."""
    if target < trie.count(1):
        raise ConfigError(f"--prune-ngrams {target}: fewer than the model's {trie.count(1)} "
                          "unigrams, which pruning keeps")
    if sum(trie.counts()) <= target:
        return 0.0
    values = np.unique(np.concatenate([c[np.isfinite(c)] for c in changes]))
    values = values[values > 0]
    lo, hi = 0, values.shape[0]      # count(values[k]) falls as k grows; find the first ≤ target
    while lo < hi:
        mid = (lo + hi) // 2
        if kept_count(trie, keep_masks(trie, changes, float(values[mid]))) <= target:
            hi = mid
        else:
            lo = mid + 1
    if lo == values.shape[0]:
        return float(np.nextafter(values[-1], np.inf)) if values.size else np.inf
    return float(values[lo])


def apply_masks(trie: NgramTrie, masks: list[np.ndarray]) -> NgramTrie:
    """A new trie with the kept rows; back-off weights recomputed."""
    out = NgramTrie(order=trie.order, vocab_size=trie.vocab_size, logp=[trie.logp[0].copy()],
                    bow=[trie.bow[0].copy()] if trie.order > 1 else [trie.bow[0].copy()],
                    word=[trie.word[0]], first=[])
    for n in range(2, trie.order + 1):
        keep = masks[n - 2]
        parents = trie.parents(n)[keep]
        if n > 2:   # renumber the kept contexts of order n−1
            new_row = np.cumsum(masks[n - 3]) - 1
            parents = new_row[parents]
        ctx_rows = out.rows(n - 1)
        first = np.zeros(ctx_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(parents, minlength=ctx_rows), out=first[1:])
        out.first.append(first.astype(trie.first[n - 2].dtype))
        out.word.append(trie.word[n - 1][keep])
        out.logp.append(trie.logp[n - 1][keep])
        if n < trie.order:
            out.bow.append(trie.bow[n - 1][keep])
    recompute_bows(out)
    return out


def recompute_bows(trie: NgramTrie) -> int:
    """Every context's back-off from its listed words, orders 1..N−1 in turn (SRILM's
    ``recomputeBOWs``); returns how many contexts were improper (set to log 0)."""
    improper = 0
    for n in range(2, trie.order + 1):
        num, den, usable, _ = bow_terms(trie, n)
        with np.errstate(divide="ignore", invalid="ignore"):
            bow = np.where((num == 0) & (den == 0), 0.0, np.log10(num) - np.log10(den))
        bow = np.where(usable, bow, LOG_ZERO)
        improper += int((~usable).sum())
        trie.bow[n - 2] = np.maximum(bow, LOG_ZERO).astype(np.float32)
        trie.drop_cache()
    return improper


def prune(trie: NgramTrie, bos: int, eos: int, threshold: float | None = None,
          target: int | None = None) -> Pruned:
    """Prune at ``threshold``, or at the threshold that keeps at most ``target`` n-grams."""
    if (threshold is None) == (target is None):
        raise ConfigError("give a pruning threshold or a target number of n-grams, not both")
    before = trie.counts()
    changes = perplexity_changes(trie, bos, eos)
    improper = sum(int(np.isinf(c).sum()) for c in changes)
    if target is not None:
        threshold = threshold_for(trie, changes, target)
    assert threshold is not None
    if threshold < 0:
        raise ConfigError(f"--prune-threshold {threshold}: must be >= 0")
    masks = keep_masks(trie, changes, threshold)
    out = apply_masks(trie, masks)
    after = out.counts()
    if trie.order > 1 and sum(before[1:]) > 0 and sum(after[1:]) == 0:
        largest = max((float(c[np.isfinite(c)].max()) for c in changes if np.isfinite(c).any()),
                      default=0.0)
        raise ConfigError(f"pruning at threshold {threshold:g} removes every n-gram above the "
                          f"unigrams; thresholds below {largest:.3g} keep some")
    log.info("pruning at threshold %.3g: n-grams %s -> %s", threshold, before, after)
    return Pruned(trie=out, threshold=threshold, before=before, after=after,
                  unprunable=improper)

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
from collections.abc import Iterator
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


def context_blocks(trie: NgramTrie, n: int) -> Iterator[tuple[int, int]]:
    """Ranges [c0, c1) of order n−1's contexts whose children in order ``n`` number about
    BLOCK: a context's children all fall in one block, so its sums are complete there."""
    f = trie.first[n - 2]
    c, end = 0, trie.rows(n - 1)
    while c < end:
        c1 = int(np.searchsorted(f, int(f[c]) + BLOCK, side="right")) - 1
        c1 = min(max(c1, c + 1), end)
        yield c, c1
        c = c1


@dataclass
class BowBlock:
    """SRILM's back-off terms for contexts [c0, c1) of order n−1 and their children."""

    num: np.ndarray        # N(h) = 1 − Σ p(w|h), per context
    den: np.ndarray        # D(h) = 1 − Σ p(w|h'), per context
    usable: np.ndarray     # SRILM's computeBOW accepts the context
    parent: np.ndarray     # each child's context, 0-based in the block
    logp: np.ndarray       # log10 p(w|h) of each child (float64)
    backoff: np.ndarray    # log10 p(w|h') of each child


def bow_block(trie: NgramTrie, n: int, c0: int, c1: int) -> BowBlock:
    """The back-off terms of contexts [c0, c1), with the rounding slack and degenerate
    cases of SRILM's ``computeBOW``."""
    f = trie.first[n - 2]
    r0, r1 = int(f[c0]), int(f[c1])
    parent = np.repeat(np.arange(c1 - c0, dtype=np.int64), np.diff(f[c0:c1 + 1]))
    words = trie.ngram_words(n, np.arange(r0, r1, dtype=np.int64))
    backoff = trie.cond_logprob(words[:, 1:-1], words[:, -1])
    logp = trie.logp[n - 1][r0:r1].astype(np.float64)
    num = 1.0 - np.bincount(parent, 10.0 ** logp, minlength=c1 - c0)
    den = 1.0 - np.bincount(parent, 10.0 ** backoff, minlength=c1 - c0)
    num[(num < 0) & (num > -PROB_EPSILON)] = 0.0
    den[(den < 0) & (den > -PROB_EPSILON)] = 0.0
    # SRILM: a zero denominator with mass left is rescaled (usable); otherwise a negative
    # numerator, or a non-positive denominator with mass left, is improper
    rescaled = (den == 0) & (num > 0)
    usable = rescaled | ~((num < 0) | ((den <= 0) & (num > PROB_EPSILON)))
    zero = usable & (den <= 0)
    num[zero] = den[zero] = 0.0
    return BowBlock(num=num, den=den, usable=usable, parent=parent, logp=logp, backoff=backoff)


def perplexity_changes(trie: NgramTrie, bos: int, eos: int) -> list[np.ndarray]:
    """SRILM's relative perplexity change for removing each row of orders 2..N alone
    (list index n−2); +inf where the context's back-off is improper (kept, as SRILM)."""
    history = context_logprob(trie, bos, eos)
    out = []
    for n in range(2, trie.order + 1):
        change = np.empty(trie.rows(n))
        f = trie.first[n - 2]
        for c0, c1 in context_blocks(trie, n):
            b = bow_block(trie, n, c0, c1)
            h, p = b.parent, 10.0 ** b.logp
            with np.errstate(divide="ignore", invalid="ignore"):
                new_bow = np.log10(b.num[h] + p) - np.log10(b.den[h] + 10.0 ** b.backoff)
                old_bow = trie.bow[n - 2][c0:c1].astype(np.float64)[h]
                delta_h = -(10.0 ** history[n - 2][c0:c1][h]) * (
                    p * (b.backoff + new_bow - b.logp) + b.num[h] * (new_bow - old_bow))
                got = 10.0 ** delta_h - 1.0
            got[~b.usable[h] | np.isnan(got)] = np.inf
            change[int(f[c0]):int(f[c1])] = got
        out.append(change)
    return out


def _kept_children(first: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """How many children of each context (children ranges ``first``) are kept."""
    cum = np.zeros(keep.shape[0] + 1, dtype=np.int64)
    np.cumsum(keep, out=cum[1:])
    return cum[first[1:]] - cum[first[:-1]]


def keep_masks(trie: NgramTrie, changes: list[np.ndarray], threshold: float) -> list[np.ndarray]:
    """Rows of orders 2..N that stay at ``threshold``: change ≥ threshold, or a context of
    a row that stays (SRILM never prunes an n-gram whose back-off node is needed)."""
    masks: list[np.ndarray] = []
    below: np.ndarray | None = None
    for n in range(trie.order, 1, -1):
        keep = changes[n - 2] >= threshold if threshold > 0 else np.ones(trie.rows(n), bool)
        if below is not None:
            keep |= _kept_children(trie.first[n - 1], below) > 0
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
    values = np.concatenate([c[np.isfinite(c) & (c > 0)] for c in changes])
    values.sort()
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
                    bow=[trie.bow[0].copy()], word=[trie.word[0]], first=[])
    for n in range(2, trie.order + 1):
        keep = masks[n - 2]
        cum = np.zeros(keep.shape[0] + 1, dtype=np.int64)
        np.cumsum(keep, out=cum[1:])
        first = cum[trie.first[n - 2]]   # kept rows before each old context's children
        if n > 2:   # only the kept contexts of order n−1 remain (a dropped one kept no child)
            first = np.r_[first[:-1][masks[n - 3]], first[-1]]
        out.first.append(first.astype(trie.first[n - 2].dtype))
        out.word.append(trie.word[n - 1][keep])
        out.logp.append(trie.logp[n - 1][keep])
        if n < trie.order:
            out.bow.append(trie.bow[n - 1][keep])
    recompute_bows(out)
    out.drop_cache()
    return out


def recompute_order_bows(trie: NgramTrie, n: int) -> int:
    """The back-offs of order n−1's contexts from their children in order ``n``; the
    lower orders' back-offs must be right already. Returns the improper contexts."""
    improper = 0
    bow = trie.bow[n - 2]
    for c0, c1 in context_blocks(trie, n):
        b = bow_block(trie, n, c0, c1)
        with np.errstate(divide="ignore", invalid="ignore"):
            got = np.where((b.num == 0) & (b.den == 0), 0.0, np.log10(b.num) - np.log10(b.den))
        got = np.where(b.usable, got, LOG_ZERO)
        improper += int((~b.usable).sum())
        bow[c0:c1] = np.maximum(got, LOG_ZERO)
    return improper


def recompute_bows(trie: NgramTrie) -> int:
    """Every context's back-off from its listed words, orders 1..N−1 in turn (SRILM's
    ``recomputeBOWs``); returns how many contexts were improper (set to log 0)."""
    return sum(recompute_order_bows(trie, n) for n in range(2, trie.order + 1))


def prune(trie: NgramTrie, bos: int, eos: int, threshold: float | None = None,
          target: int | None = None) -> Pruned:
    """Prune at ``threshold``, or at the threshold that keeps at most ``target`` n-grams."""
    if (threshold is None) == (target is None):
        raise ConfigError("give a pruning threshold or a target number of n-grams, not both")
    before = trie.counts()
    changes = perplexity_changes(trie, bos, eos)
    trie.drop_cache()  # the lookup keys: not needed until the back-offs are recomputed
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
    trie.drop_cache()
    log.info("pruning at threshold %.3g: n-grams %s -> %s", threshold, before, after)
    return Pruned(trie=out, threshold=threshold, before=before, after=after,
                  unprunable=improper)

"""Building an ``LmStore``'s arrays from a trie: costs with the back-offs folded in, links.

See ``lmstore``'s docstring for what is folded and why. Work goes by blocks of rows so
that the word matrices this needs stay small whatever the size of the model.
"""

from __future__ import annotations

import math

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.lang.trie import NgramTrie

LN10 = math.log(10.0)
BLOCK = 1 << 20


def longest_suffix(trie: NgramTrie, n: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, row) of the longest listed proper suffix of each row of order ``n``;
    order 0 is the empty suffix."""
    words = trie.ngram_words(n, rows)
    order = np.zeros(rows.shape[0], dtype=np.int64)
    row = np.zeros(rows.shape[0], dtype=np.int64)
    todo = np.arange(rows.shape[0])
    for j in range(1, n):
        if todo.size == 0:
            break
        got = trie.find(words[todo, j:])
        hit = got >= 0
        order[todo[hit]] = n - j
        row[todo[hit]] = got[hit]
        todo = todo[~hit]
    return order, row


def fold(trie: NgramTrie, bos: int, eos: int, unk: int | None) -> tuple[list[dict], dict]:
    """Per order, the store's arrays (``word``, ``cost``, and below the top order
    ``bocost``, ``bolink``, ``first``), and its meta.json record."""
    top = trie.order
    base = [0, 1]
    for n in range(1, top - 1):
        base.append(base[-1] + trie.rows(n))
    if base[-1] + (trie.rows(top - 1) if top > 1 else 0) >= 2**31 - 1:
        raise InputError(f"{sum(trie.counts())} n-grams: more LM states than int32 ids hold")
    nxt: list[np.ndarray] = []     # per order < top: the state after the n-gram
    carry: list[np.ndarray] = []   # per order < top: log10 back-offs folded into its cost
    orders: list[dict] = []
    for n in range(1, top + 1):
        rows = trie.rows(n)
        entry = {"word": trie.word[n - 1] if n > 1 else np.zeros(0, np.int32),
                 "cost": np.empty(rows, np.float32)}
        if n < top:
            entry.update(bocost=np.empty(rows, np.float32), bolink=np.empty(rows, np.int32),
                         first=trie.first[n - 1])
            nxt.append(np.empty(rows, np.int32))
            carry.append(np.empty(rows, np.float32))
        for lo in range(0, rows, BLOCK):
            _fold_block(trie, n, lo, min(rows, lo + BLOCK), base, nxt, carry, entry)
        orders.append(entry)
    trie.drop_cache()
    if not trie.present[bos] or not trie.present[eos]:
        raise InputError("the LM has no <s> or no </s> unigram")
    start = int(nxt[0][bos]) if top > 1 else 0
    meta = {"format": "asrtrain-lmstore-1", "order": top, "vocab_size": trie.vocab_size,
            "counts": trie.counts(), "bos": bos, "eos": eos,
            "unk": unk if unk is not None and bool(trie.present[unk]) else None,
            "base": base[:top], "start": start}
    return orders, meta


def _fold_block(trie: NgramTrie, n: int, lo: int, hi: int, base: list[int],
                nxt: list[np.ndarray], carry: list[np.ndarray], entry: dict) -> None:
    """Rows [lo, hi) of order ``n``: folded cost, and below the top order the back-off
    cost, link, next state and carried fold."""
    top = trie.order
    idx = np.arange(lo, hi, dtype=np.int64)
    logp = trie.logp[n - 1][lo:hi].astype(np.float64)
    bow = trie.bow[n - 1][lo:hi].astype(np.float64) if n < top else np.zeros(hi - lo)
    kids = np.diff(trie.first[n - 1][lo:hi + 1]) > 0 if n < top else np.zeros(hi - lo, bool)
    s_next = np.zeros(hi - lo, dtype=np.int64)   # next state of the longest proper suffix
    s_fold = np.zeros(hi - lo)
    if n > 1:
        so, sr = longest_suffix(trie, n, idx)
        for m in np.unique(so[so > 0]).tolist():
            sel = np.flatnonzero(so == m)
            s_next[sel] = nxt[m - 1][sr[sel]]
            s_fold[sel] = carry[m - 1][sr[sel]]
    own = np.where(kids, 0.0, bow + s_fold)
    cost = -LN10 * (logp + own)
    cost[np.isnan(cost)] = np.inf  # order 1: ids the model lacks
    entry["cost"][lo:hi] = cost
    if n < top:
        entry["bocost"][lo:hi] = -LN10 * (bow + s_fold)
        entry["bolink"][lo:hi] = s_next
        nxt[n - 1][lo:hi] = np.where(kids, base[n] + idx, s_next)
        carry[n - 1][lo:hi] = own

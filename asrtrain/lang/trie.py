"""A back-off n-gram model as sorted arrays per order: the form every LM step here works on.

Order 1 is indexed by word id (``words.txt``); an n-gram of order n ≥ 2 is a row of
order n's arrays, which are sorted by (its context's row in order n−1, its word), so the
children of a context are one contiguous range (``first``): a trie in CSR form, as
KenLM's and Kaldi's ``ConstArpaLm``. A row costs 4 bytes of word id, 4 of log10 p, and
below the top order 4 of back-off and 4 of child offset; no string or tuple is kept.

Every query is vectorized over a batch (``find``, ``cond_logprob``): reading, pruning,
writing and the rescoring store (``lmstore``) all go through them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from asrtrain.lang.arpa import ArpaChunk, ArpaReader, ArpaStats

MISSING = -1
BLOCK = 1 << 20


@dataclass
class NgramTrie:
    """log10 p (``logp``), log10 back-off (``bow``), word ids (``word``) and child ranges
    (``first``) per order; list index n−1 is order n. Order 1's arrays are indexed by word
    id and a word the model lacks has ``logp`` NaN; ``word[0]`` is unused."""

    order: int
    vocab_size: int
    logp: list[np.ndarray]
    bow: list[np.ndarray]
    word: list[np.ndarray]
    first: list[np.ndarray]
    _keys: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    # -- shape ---------------------------------------------------------------------------
    def count(self, n: int) -> int:
        """Listed n-grams of order ``n``."""
        return int(self.present.sum()) if n == 1 else int(self.logp[n - 1].shape[0])

    def counts(self) -> list[int]:
        return [self.count(n) for n in range(1, self.order + 1)]

    @property
    def present(self) -> np.ndarray:
        """Which word ids are unigrams of the model."""
        return ~np.isnan(self.logp[0])

    def rows(self, n: int) -> int:
        """Rows of order ``n``'s arrays (order 1: the vocabulary size)."""
        return int(self.logp[n - 1].shape[0])

    def nbytes(self) -> int:
        return sum(a.nbytes for arrs in (self.logp, self.bow, self.word, self.first) for a in arrs)

    def parents(self, n: int) -> np.ndarray:
        """The context row (in order n−1) of every row of order ``n`` ≥ 2."""
        f = self.first[n - 2]
        return np.repeat(np.arange(f.shape[0] - 1, dtype=np.int64), np.diff(f))

    def has_children(self, n: int) -> np.ndarray:
        """Which rows of order ``n`` are the context of some listed n-gram."""
        if n == self.order:
            return np.zeros(self.rows(n), dtype=bool)
        return np.diff(self.first[n - 1]) > 0

    def ngram_words(self, n: int, rows: np.ndarray | None = None) -> np.ndarray:
        """The word ids of rows (default: all) of order ``n`` as an int32 matrix [rows, n]."""
        if rows is None:
            rows = np.arange(self.rows(n), dtype=np.int64)
        if n == 1:
            return rows.astype(np.int32)[:, None]
        out = np.empty((rows.shape[0], n), dtype=np.int32)
        out[:, n - 1] = self.word[n - 1][rows]
        for m in range(n, 1, -1):
            rows = np.searchsorted(self.first[m - 2], rows, side="right") - 1  # the context row
            out[:, m - 2] = self.word[m - 2][rows] if m > 2 else rows
        return out

    # -- lookups ---------------------------------------------------------------------------
    def keys(self, n: int) -> np.ndarray:
        """Sorted int64 keys ``context row × V + word`` of order ``n`` ≥ 2 (cached)."""
        got = self._keys.get(n)
        if got is None:
            got = self._keys[n] = self.parents(n) * self.vocab_size + self.word[n - 1]
        return got

    def drop_cache(self) -> None:
        self._keys.clear()

    def child(self, n: int, rows: np.ndarray, words: np.ndarray) -> np.ndarray:
        """Row in order n+1 of (row of order ``n``, word), MISSING where not listed;
        ``n`` 0 is the empty context (the unigrams); a MISSING row stays MISSING."""
        words = np.asarray(words, dtype=np.int64)
        if n == 0:
            ok = (words >= 0) & (words < self.vocab_size)
            out = np.where(ok, words, 0)
            return np.where(ok & ~np.isnan(self.logp[0][out]), out, MISSING)
        rows = np.asarray(rows, dtype=np.int64)
        keys = self.keys(n + 1)
        want = rows * self.vocab_size + words
        at = np.searchsorted(keys, want)
        hit = (rows >= 0) & (at < keys.shape[0])
        hit &= keys[np.minimum(at, keys.shape[0] - 1)] == want
        return np.where(hit, at, MISSING)

    def find(self, ids: np.ndarray) -> np.ndarray:
        """Row of each n-gram ``ids`` [B, m] in order m, MISSING where not listed."""
        rows = self.child(0, np.zeros(ids.shape[0], np.int64), ids[:, 0])
        for k in range(1, ids.shape[1]):
            rows = self.child(k, rows, ids[:, k])
        return rows

    def cond_logprob(self, hist: np.ndarray, words: np.ndarray) -> np.ndarray:
        """log10 p(word | hist) with ARPA back-off, float64 [B]; ``hist`` [B, k], k < order.
        NaN where the word is not a unigram."""
        k = hist.shape[1]
        out = np.full(hist.shape[0], np.nan)
        acc = np.zeros(hist.shape[0])
        todo = np.ones(hist.shape[0], dtype=bool)
        for j in range(k + 1):
            n = k - j  # context length
            ctx = self.find(hist[:, j:]) if n else np.zeros(hist.shape[0], np.int64)
            got = self.child(n, ctx, words)
            hit = todo & (got >= 0)
            out[hit] = acc[hit] + self.logp[n][got[hit]]
            todo &= ~hit
            if n and todo.any():
                listed = todo & (ctx >= 0)
                acc[listed] += self.bow[n - 1][ctx[listed]]
        return out


def _order1(vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    return np.full(vocab_size, np.nan, dtype=np.float32), np.zeros(vocab_size, dtype=np.float32)


def build_trie(reader: ArpaReader, vocab_size: int) -> NgramTrie:
    """Read the whole ARPA stream into a trie; bad structure is an InputError with its line.

    An order's rows are kept as they arrive (context row, word, log10 p, back-off, line:
    20 bytes a row, no text) and sorted into the trie when its section ends.
    """
    logp1, bow1 = _order1(vocab_size)
    trie: NgramTrie | None = None
    pending: dict[str, list[np.ndarray]] = {}
    current = 1
    for chunk in reader.read():
        if trie is None:
            trie = NgramTrie(order=len(reader.stats.declared), vocab_size=vocab_size,
                             logp=[logp1], bow=[bow1], word=[np.zeros(0, np.int32)], first=[])
        if chunk.order != current:
            _finish_order(trie, current, pending, reader)
            pending, current = {}, chunk.order
        if chunk.order == 1:
            _add_unigrams(trie, chunk, reader)
            continue
        for name, arr in zip(("ctx", "word", "logp", "bow", "line"), _chunk_rows(trie, chunk, reader),
                             strict=True):
            pending.setdefault(name, []).append(arr)
    if trie is None:
        trie = NgramTrie(order=len(reader.stats.declared), vocab_size=vocab_size, logp=[logp1],
                         bow=[bow1], word=[np.zeros(0, np.int32)], first=[])
    while current <= trie.order:
        _finish_order(trie, current, pending, reader)
        pending, current = {}, current + 1
    trie.drop_cache()
    return trie


def _add_unigrams(trie: NgramTrie, chunk: ArpaChunk, reader: ArpaReader) -> None:
    ids = chunk.ids[:, 0]
    rows = np.argsort(ids, kind="stable")
    twice = rows[1:][ids[rows[1:]] == ids[rows[:-1]]]          # within the chunk
    again = np.flatnonzero(~np.isnan(trie.logp[0][ids]))        # listed by an earlier chunk
    bad = np.concatenate([twice, again])
    if bad.size:
        raise reader.error("unigram listed twice (as spelled, or as two spellings of <unk>)",
                           int(chunk.lines[bad].min()))
    trie.logp[0][ids] = chunk.logp
    trie.bow[0][ids] = chunk.bow


def _chunk_rows(trie: NgramTrie, chunk: ArpaChunk, reader: ArpaReader) -> tuple[np.ndarray, ...]:
    """(context row, word, log10 p, back-off, line) of a chunk's n-grams, checked: every
    word is a unigram and the context is listed (ARPA's rule)."""
    absent = ~trie.present[chunk.ids]
    if absent.any():
        k = int(np.flatnonzero(absent.any(axis=1))[0])
        raise reader.error(f"{chunk.order}-gram with a word that is not among the unigrams",
                           int(chunk.lines[k]))
    ctx = trie.find(chunk.ids[:, :-1]) if chunk.order > 2 else chunk.ids[:, 0].astype(np.int64)
    if (ctx < 0).any():
        k = int(np.flatnonzero(ctx < 0)[0])
        raise reader.error(f"{chunk.order}-gram whose context (its first {chunk.order - 1} "
                           "words) is not listed as an n-gram", int(chunk.lines[k]))
    small = trie.rows(chunk.order - 1) < 2**31 - 1
    return (ctx.astype(np.int32) if small else ctx, chunk.ids[:, -1].copy(), chunk.logp, chunk.bow,
            chunk.lines.astype(np.int64 if chunk.lines[-1] >= 2**31 - 1 else np.int32))


def _take(pending: dict[str, list[np.ndarray]], name: str, dtype) -> np.ndarray:
    """One field's rows in arrival order; the chunks' arrays are freed as it goes."""
    parts = pending.pop(name, [])
    out = np.concatenate(parts) if parts else np.zeros(0, dtype)
    parts.clear()
    return out


def _finish_order(trie: NgramTrie, n: int, pending: dict[str, list[np.ndarray]],
                  reader: ArpaReader) -> None:
    """Sort order ``n``'s rows into the trie and link order n−1's contexts to them."""
    if n == 1:
        return
    key = _take(pending, "ctx", np.int64).astype(np.int64) * trie.vocab_size
    key += _take(pending, "word", np.int32)
    perm = np.argsort(key, kind="stable")
    key = key[perm]
    dup = np.flatnonzero(key[1:] == key[:-1])
    if dup.size:
        lines = _take(pending, "line", np.int64)
        raise reader.error(f"{n}-gram listed twice (as spelled, or as two spellings of <unk>)",
                           int(max(lines[perm[dup[0]]], lines[perm[dup[0] + 1]])))
    pending.pop("line", None)
    ctx_rows = trie.rows(n - 1)
    first = np.zeros(ctx_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(key // trie.vocab_size, minlength=ctx_rows), out=first[1:])
    trie.first.append(_index(first))
    trie.word.append((key % trie.vocab_size).astype(np.int32))
    trie.logp.append(_take(pending, "logp", np.float32)[perm])
    bow = _take(pending, "bow", np.float32)
    if n < trie.order:
        trie.bow.append(bow[perm])
        trie._keys[n] = key    # for the next order's context lookups
    del bow, perm


def _index(a: np.ndarray) -> np.ndarray:
    """Offsets as int32 where they fit (half the bytes), else int64."""
    return a.astype(np.int32) if a.size == 0 or a[-1] < 2**31 - 1 else a


def read_trie(path: Path, vocab: dict[str, int]) -> tuple[NgramTrie, ArpaStats]:
    """The ARPA file ``path`` over the ids of ``vocab`` (a words.txt), and what was skipped."""
    reader = ArpaReader(path, vocab)
    trie = build_trie(reader, max(vocab.values()) + 1)
    return trie, reader.stats


def write_arpa(trie: NgramTrie, path: Path, names: dict[int, str]) -> None:
    """The trie as an ARPA file (atomically), in blocks of rows; ``names`` maps id → word."""
    from asrtrain.core.atomic import atomic_open
    from asrtrain.lang.arpa import format_rows

    lookup = np.array([names.get(i, "") for i in range(trie.vocab_size)], dtype=object)
    with atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write("\n\\data\\\n")
        fh.write("".join(f"ngram {n}={c}\n" for n, c in enumerate(trie.counts(), start=1)))
        for n in range(1, trie.order + 1):
            fh.write(f"\n\\{n}-grams:\n")
            rows_all = np.flatnonzero(trie.present) if n == 1 else None
            total = rows_all.shape[0] if rows_all is not None else trie.rows(n)
            for lo in range(0, total, BLOCK):
                rows = (rows_all[lo:lo + BLOCK] if rows_all is not None
                        else np.arange(lo, min(total, lo + BLOCK), dtype=np.int64))
                words = lookup[trie.ngram_words(n, rows)].tolist()
                bow = trie.bow[n - 1][rows] if n < trie.order else None
                fh.write(format_rows(words, trie.logp[n - 1][rows], bow))
        fh.write("\n\\end\\\n")

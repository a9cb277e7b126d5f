"""The full LM for rescoring, as memory-mapped arrays: ``LmStore`` (``lang/lm_full/``).

Kaldi rescores lattices with the full LM held as a ``ConstArpaLm``; this is its
counterpart: the trie of ``lang/trie.py`` written as one ``.npy`` file per array and
memory-mapped on load, so a 36M-n-gram 4-gram costs its pages, not a Python object per
n-gram. Costs are G.fst's: ``−ln 10 · log10 p``, back-off included, float32.

A state is an integer naming the *effective* history: the longest suffix of the words
so far that is the context of some listed n-gram (KenLM's state minimization). Two
paths with the same state have the same future costs, so a rescorer may merge them.
State 0 is the empty history; the context at row i of order n is ``base[n] + i``.

What makes one lookup per level enough, as in KenLM, is folding at build time:

* ``cost`` of an n-gram g includes the back-off weights of g and of its listed suffixes
  that are not contexts (a well-formed ARPA gives them weight 1, so usually nothing):
  those are paid by whatever word comes next, and g's next state skips them;
* ``bocost`` of a context h is its back-off plus the same fold for the longest listed
  suffix of h minus its first word, and ``bolink`` is the state that back-off lands in
  (the longest suffix of that with children).

Scoring w in state h then walks h, bolink(h), … until one has the child w (paying each
``bocost``), adds that n-gram's ``cost``, and goes on down the same chain to the first
match with children: the next state.
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrtrain.core.atomic import atomic_path
from asrtrain.core.errors import InputError
from asrtrain.lang.trie import NgramTrie

LN10 = math.log(10.0)
FORMAT = "asrtrain-lmstore-1"
ROOT = 0


@dataclass
class _Order:
    """One order's arrays (order 1 indexed by word id; ``word`` empty there)."""

    word: np.ndarray
    cost: np.ndarray
    bocost: np.ndarray | None = None   # orders < N
    bolink: np.ndarray | None = None   # orders < N
    first: np.ndarray | None = None    # orders < N: children in order n+1


class LmStore:
    """A back-off LM scored by state; see the module's docstring for the layout."""

    order: int

    def __init__(self, orders: list[_Order], meta: dict, path: Path | None = None) -> None:
        self._o = orders
        self.meta = meta
        self.path = path
        self.order = int(meta["order"])
        self.vocab_size = int(meta["vocab_size"])
        self.bos, self.eos = int(meta["bos"]), int(meta["eos"])
        self.unk: int | None = meta.get("unk")
        self.base = [int(b) for b in meta["base"]]  # base[n] for n = 0..order-1 (base[0] = 0)
        self._start = int(meta["start"])

    # -- the interface the rescorer codes against ---------------------------------------
    @classmethod
    def load(cls, path: Path) -> LmStore:
        """Memory-map a store written by :meth:`save`."""
        path = Path(path)
        meta_path = path / "meta.json"
        if not meta_path.exists():
            raise InputError("not an LM store (no meta.json)", path)
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != FORMAT:
            raise InputError(f"LM store format {meta.get('format')!r}, expected {FORMAT}", path)
        orders = []
        for n in range(1, int(meta["order"]) + 1):
            def arr(name: str, n: int = n) -> np.ndarray:
                return np.load(path / f"{name}.{n}.npy", mmap_mode="r")
            top = n == int(meta["order"])
            orders.append(_Order(word=arr("word") if n > 1 else np.zeros(0, np.int32),
                                 cost=arr("cost"),
                                 bocost=None if top else arr("bocost"),
                                 bolink=None if top else arr("bolink"),
                                 first=None if top else arr("first")))
        return cls(orders, meta, path)

    def start_state(self) -> int:
        """The state of the history ``<s>``."""
        return self._start

    def score(self, state: int, word: int) -> tuple[float, int]:
        """(−ln p(word | history) with back-off, the state after it)."""
        word = self._known(word)
        cost = 0.0
        n, row = self._decode(state)
        while True:
            got = self._child(n, row, word)
            if got >= 0:
                break
            o = self._o[n - 1]
            cost += float(o.bocost[row])      # type: ignore[index]
            n, row = self._decode(int(o.bolink[row]))  # type: ignore[index]
        cost += float(self._o[n].cost[got])
        return cost, self._next(n, row, got, word)

    def final_cost(self, state: int) -> float:
        """−ln p(``</s>`` | history)."""
        return self.score(state, self.eos)[0]

    # -- batches -------------------------------------------------------------------------
    def score_batch(self, states: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`score` over arrays: (costs float64, next states int64)."""
        states = np.asarray(states, dtype=np.int64)
        words = self._known_batch(np.asarray(words, dtype=np.int64))
        cost = np.zeros(states.shape[0])
        nxt = np.full(states.shape[0], ROOT, dtype=np.int64)
        order, row = self._decode_batch(states)
        found = np.full(states.shape[0], -1, dtype=np.int64)
        todo = np.ones(states.shape[0], dtype=bool)
        while todo.any():                                 # back off to the word
            idx = np.flatnonzero(todo)
            got = self._child_batch(order[idx], row[idx], words[idx])
            hit = got >= 0
            found[idx[hit]] = got[hit]
            miss = idx[~hit]
            for n in np.unique(order[miss]).tolist():
                sel = miss[order[miss] == n]
                o = self._o[n - 1]
                cost[sel] += o.bocost[row[sel]]
                order[sel], row[sel] = self._decode_batch(np.asarray(o.bolink[row[sel]], np.int64))
            todo[idx[hit]] = False
        for n in np.unique(order).tolist():
            sel = np.flatnonzero(order == n)
            cost[sel] += self._o[n].cost[found[sel]]
        todo = np.ones(states.shape[0], dtype=bool)
        while todo.any():                                 # on down the chain: the next state
            idx = np.flatnonzero(todo)
            for n in np.unique(order[idx]).tolist():
                sel = idx[order[idx] == n]
                g = found[sel]
                ok = np.zeros(sel.shape[0], dtype=bool)
                if n + 1 < self.order:
                    f = self._o[n].first
                    at = np.maximum(g, 0)
                    ok = (g >= 0) & (np.asarray(f[at + 1]) > np.asarray(f[at]))
                    nxt[sel[ok]] = self.base[n + 1] + g[ok]
                    todo[sel[ok]] = False
                rest = sel[~ok]
                if n == 0:
                    todo[rest] = False                     # no unigram context: the root
                    continue
                o = self._o[n - 1]
                order[rest], row[rest] = self._decode_batch(np.asarray(o.bolink[row[rest]], np.int64))
                found[rest] = self._child_batch(order[rest], row[rest], words[rest])
        return cost, nxt

    def sentence_cost(self, words: list[int]) -> float:
        """−ln p of ``<s> words </s>``."""
        state, total = self._start, 0.0
        for w in words:
            c, state = self.score(state, w)
            total += c
        return total + self.final_cost(state)

    def has_word(self, word: int) -> bool:
        """Whether ``word`` is a unigram of the LM (else :meth:`score` maps it to ``<unk>``)."""
        return 0 <= word < self.vocab_size and math.isfinite(float(self._o[0].cost[word]))

    def nbytes(self) -> int:
        return sum(a.nbytes for o in self._o for a in (o.word, o.cost, o.bocost, o.bolink, o.first)
                   if a is not None)

    def counts(self) -> list[int]:
        return [int(c) for c in self.meta["counts"]]

    # -- internals -----------------------------------------------------------------------
    def _known(self, word: int) -> int:
        if self.has_word(word):
            return word
        if self.unk is not None:
            return self.unk
        raise InputError(f"word id {word} is not in the LM, which has no <unk> to map it to",
                         self.path)

    def _known_batch(self, words: np.ndarray) -> np.ndarray:
        inside = (words >= 0) & (words < self.vocab_size)
        ok = inside & np.isfinite(self._o[0].cost[np.where(inside, words, 0)])
        if ok.all():
            return words
        if self.unk is None:
            bad = int(words[np.flatnonzero(~ok)[0]])
            raise InputError(f"word id {bad} is not in the LM, which has no <unk> to map it to",
                             self.path)
        return np.where(ok, words, self.unk)

    def _decode(self, state: int) -> tuple[int, int]:
        """(context length n, row in order n); n 0 is the root."""
        if state == ROOT:
            return 0, 0
        n = bisect.bisect_right(self.base, state) - 1
        return n, state - self.base[n]

    def _decode_batch(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = np.searchsorted(np.asarray(self.base[1:], np.int64), states, side="right")
        n = np.where(states == ROOT, 0, n)
        base = np.asarray(self.base, np.int64)[n]
        return n.astype(np.int64), np.where(n == 0, 0, states - base)

    def _child(self, n: int, row: int, word: int) -> int:
        """Row in order n+1 of (context row of order n, word), −1 if not listed."""
        if n == 0:
            return word
        f = self._o[n - 1].first
        lo, hi = int(f[row]), int(f[row + 1])  # type: ignore[index]
        words = self._o[n].word
        at = bisect.bisect_left(words, word, lo, hi)
        return at if at < hi and int(words[at]) == word else -1

    def _child_batch(self, order: np.ndarray, row: np.ndarray, words: np.ndarray) -> np.ndarray:
        out = np.where(order == 0, words, -1)
        for n in np.unique(order[order > 0]).tolist():
            sel = np.flatnonzero(order == n)
            f = self._o[n - 1].first
            lo = np.asarray(f[row[sel]], np.int64)
            hi = np.asarray(f[row[sel] + 1], np.int64)
            out[sel] = _search(self._o[n].word, lo, hi, words[sel])
        return out

    def _next(self, n: int, row: int, got: int, word: int) -> int:
        """The state after ``word`` was found at row ``got`` of order n+1 under (n, row)."""
        while True:
            if got >= 0 and n + 1 < self.order:
                f = self._o[n].first
                if int(f[got + 1]) > int(f[got]):  # type: ignore[index]
                    return self.base[n + 1] + got
            if n == 0:
                return ROOT
            n, row = self._decode(int(self._o[n - 1].bolink[row]))  # type: ignore[index]
            got = self._child(n, row, word)

    # -- building ------------------------------------------------------------------------
    @classmethod
    def from_trie(cls, trie: NgramTrie, bos: int, eos: int, unk: int | None) -> LmStore:
        """Fold the trie's back-offs into costs and links (in memory; :meth:`save` writes)."""
        from asrtrain.lang.lmstore_build import fold

        orders, meta = fold(trie, bos, eos, unk)
        return cls([_Order(**o) for o in orders], meta)

    def save(self, path: Path) -> None:
        """Write the arrays and meta.json into directory ``path``, atomically."""
        with atomic_path(path) as tmp:
            tmp.mkdir()
            for n, o in enumerate(self._o, start=1):
                for name in ("word", "cost", "bocost", "bolink", "first"):
                    a = getattr(o, name)
                    if a is not None and not (name == "word" and n == 1):
                        np.save(tmp / f"{name}.{n}.npy", np.ascontiguousarray(a))
            meta = dict(self.meta, bytes=self.nbytes())
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def _search(arr: np.ndarray, lo: np.ndarray, hi: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Vectorized binary search of ``want`` in each sorted range ``arr[lo:hi]``; −1 if absent."""
    end = hi.copy()
    lo = lo.copy()
    hi = hi.copy()
    while True:
        live = np.flatnonzero(lo < hi)
        if live.size == 0:
            break
        mid = (lo[live] + hi[live]) >> 1
        right = np.asarray(arr[mid]) < want[live]
        lo[live[right]] = mid[right] + 1
        hi[live[~right]] = mid[~right]
    inside = lo < end
    out = np.full(lo.shape[0], -1, dtype=np.int64)
    hit = np.flatnonzero(inside)
    hit = hit[np.asarray(arr[lo[hit]]) == want[hit]]
    out[hit] = lo[hit]
    return out

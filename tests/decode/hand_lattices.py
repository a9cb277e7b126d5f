"""Lattices built by hand in ``WordLattice``'s shape, every path enumerated by brute force,
and a test LM (``lang/lm.py``) behind the ``LmStore`` interface the rescorer uses."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from asrtrain.decode.lattice import WordLattice
from asrtrain.lang.lm import BOS, EOS, NgramLM


def random_lattice(rng: np.random.Generator, states: int = 8, extra_arcs: int = 12,
                   vocab: int = 5, frames: int = 30, epsilon: float = 0.15,
                   finals: int = 2) -> WordLattice:
    """A random acyclic lattice numbered topologically: each state has a time, an arc's
    string covers the frames between its states' times, a final string the rest, so every
    complete path spans ``frames`` frames as a real lattice does."""
    t = [0] + sorted(rng.choice(np.arange(1, frames), size=states - 1, replace=False).tolist())
    pairs = [(int(rng.integers(0, s)), s) for s in range(1, states)]  # every state reachable
    for _ in range(extra_arcs):
        a, b = sorted(rng.choice(states, size=2, replace=False).tolist())
        pairs.append((a, b))
    src = np.array([a for a, _ in pairs], dtype=np.int32)
    dst = np.array([b for _, b in pairs], dtype=np.int32)
    n = len(pairs)
    word = np.where(rng.random(n) < epsilon, 0, rng.integers(1, vocab + 1, size=n)).astype(np.int32)
    lengths = np.array([t[b] - t[a] for a, b in pairs])
    final = {states - 1} | set(rng.choice(states, size=finals - 1).tolist())
    flen = np.array([frames - t[s] if s in final else 0 for s in range(states)])
    return WordLattice(
        src=src, dst=dst, word=word,
        graph=rng.uniform(0.0, 6.0, size=n).astype(np.float32),
        acoustic=(rng.uniform(5.0, 40.0, size=n) * np.maximum(lengths, 1)).astype(np.float32),
        ilabels=rng.integers(1, 40, size=int(lengths.sum())).astype(np.int32),
        ilabel_offsets=np.r_[0, np.cumsum(lengths)].astype(np.int32),
        final_graph=np.array([rng.uniform(0, 3) if s in final else np.inf for s in range(states)],
                             dtype=np.float32),
        final_acoustic=np.array([rng.uniform(5, 40) * flen[s] if s in final else np.inf
                                 for s in range(states)], dtype=np.float32),
        final_ilabels=rng.integers(1, 40, size=int(flen.sum())).astype(np.int32),
        final_offsets=np.r_[0, np.cumsum(flen)].astype(np.int32))


def all_paths(lat: WordLattice) -> Iterator[tuple[list[int], int]]:
    """Every complete path as (arc ids, final state), by depth-first enumeration."""
    out: dict[int, list[int]] = {}
    for a in range(lat.num_arcs):
        out.setdefault(int(lat.src[a]), []).append(a)

    def walk(s: int, arcs: list[int]) -> Iterator[tuple[list[int], int]]:
        if np.isfinite(lat.final_graph[s]):
            yield list(arcs), s
        for a in out.get(s, []):
            yield from walk(int(lat.dst[a]), arcs + [a])

    if lat.num_states:
        yield from walk(0, [])


def path_cost(lat: WordLattice, arcs: list[int], end: int, lmwt: float, wip: float) -> float:
    """Graph + wip·words + acoustic/lmwt of one path, summed arc by arc."""
    total = float(lat.final_graph[end]) + float(lat.final_acoustic[end]) / lmwt
    for a in arcs:
        total += float(lat.graph[a]) + wip * (lat.word[a] != 0) + float(lat.acoustic[a]) / lmwt
    return total


def words_of(lat: WordLattice, arcs: list[int]) -> tuple[int, ...]:
    return tuple(int(lat.word[a]) for a in arcs if lat.word[a])


class NgramStore:
    """``lang/lm.py``'s NgramLM behind the LmStore interface (tests only): word ids are
    ``words.txt``'s, a state is the last order−1 words (never merged: equal costs
    whatever the merging), costs are −ln p as in G.fst."""

    def __init__(self, lm: NgramLM, words: dict[int, str]) -> None:
        self.lm, self.words, self.order = lm, words, lm.order
        self._ids: dict[tuple[str, ...], int] = {}
        self._hist: list[tuple[str, ...]] = []
        self.queries = 0

    def _state(self, h: tuple[str, ...]) -> int:
        h = h[-(self.order - 1):] if self.order > 1 else ()
        if h not in self._ids:
            self._ids[h] = len(self._hist)
            self._hist.append(h)
        return self._ids[h]

    def start_state(self) -> int:
        return self._state((BOS,))

    def score(self, state: int, word: int) -> tuple[float, int]:
        self.queries += 1
        h, w = self._hist[state], self.words[word]
        p = self.lm.p(h, w)
        return (-math.log(p) if p > 0 else math.inf), self._state(h + (w,))

    def score_batch(self, states: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        got = [self.score(int(s), int(w)) for s, w in zip(states, words, strict=True)]
        return (np.array([c for c, _ in got], dtype=np.float64).reshape(-1),
                np.array([s for _, s in got], dtype=np.int64).reshape(-1))

    def final_cost(self, state: int) -> float:
        p = self.lm.p(self._hist[state], EOS)
        return -math.log(p) if p > 0 else math.inf

    def sequence_cost(self, words: tuple[int, ...]) -> float:
        """−ln p(w1 … wn </s> | <s>) by the LM itself, for brute-force checks."""
        h: list[str] = [BOS]
        total = 0.0
        for w in words:
            total -= math.log(self.lm.p(h, self.words[w]))
            h.append(self.words[w])
        return total - math.log(self.lm.p(h, EOS))


def paths_with_words(lat: WordLattice, words: list[int]) -> list[tuple[list[int], int]]:
    """Every complete path whose word sequence is ``words`` (a DFS cut at the first word
    that differs)."""
    out: dict[int, list[int]] = {}
    for a in range(lat.num_arcs):
        out.setdefault(int(lat.src[a]), []).append(a)
    found: list[tuple[list[int], int]] = []

    def walk(s: int, k: int, arcs: list[int]) -> None:
        if k == len(words) and np.isfinite(lat.final_graph[s]):
            found.append((list(arcs), s))
        for a in out.get(s, []):
            w = int(lat.word[a])
            if w == 0 or (k < len(words) and w == words[k]):
                walk(int(lat.dst[a]), k + (w != 0), arcs + [a])

    if lat.num_states:
        walk(0, 0, [])
    return found

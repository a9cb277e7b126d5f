"""LmStore against ARPA back-off (lm.py's NgramLM.p), against G.fst from kaldilm, and its
state minimization: a state is the whole history as far as any future cost goes."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
from gwalk import g_path_cost  # tests/lang, on the path through conftest

from asrtrain.core.errors import InputError
from asrtrain.lang.lm import estimate, write_arpa
from asrtrain.lang.lmstore import LmStore
from asrtrain.lang.trie import read_trie

WORDS = [f"W{i}" for i in range(25)]
SPECIAL = ["<UNK>", "#0", "<s>", "</s>"]


def _vocab(extra: tuple[str, ...] = ()) -> dict[str, int]:
    body = sorted(set(WORDS) | {"EXTRA"} | set(extra))
    return {w: i for i, w in enumerate(["<eps>", *body, *SPECIAL])}


def _sentences(seed: int, n: int = 300) -> list[list[str]]:
    rng = random.Random(seed)
    # a skewed vocabulary, so that high orders repeat and cut-offs bite
    return [[rng.choice(WORDS[:rng.randint(3, len(WORDS))]) for _ in range(rng.randint(1, 8))]
            for _ in range(n)]


def _store(tmp_path: Path, order: int, min_count: str | None, seed: int = 0):
    lm = estimate(_sentences(seed), order=order, vocab=[*WORDS, "EXTRA"], min_count=min_count)
    arpa = tmp_path / f"lm{order}.arpa"
    write_arpa(arpa, lm)
    vocab = _vocab()
    trie, _ = read_trie(arpa, vocab)
    store = LmStore.from_trie(trie, vocab["<s>"], vocab["</s>"], vocab["<UNK>"])
    store.save(tmp_path / f"store{order}")
    return lm, LmStore.load(tmp_path / f"store{order}"), vocab, arpa


@pytest.mark.parametrize(("order", "min_count"), [(1, None), (2, None), (3, None),
                                                  (4, "1,1,2,2"), (5, "1,2,2,3")])
def test_costs_are_arpa_backoff(tmp_path, order, min_count):
    lm, store, vocab, _ = _store(tmp_path, order, min_count)
    rng = random.Random(order)
    states, words, ref = [], [], []
    for _ in range(200):
        sent = [rng.choice([*WORDS, "EXTRA", "<UNK>"]) for _ in range(rng.randint(0, 10))]
        hist, state = ["<s>"], store.start_state()
        for w in [*sent, "</s>"]:
            cost, nxt = store.score(state, vocab[w])
            expect = -math.log(lm.p(hist, w))
            assert cost == pytest.approx(expect, abs=1e-5), (hist, w)
            states.append(state)
            words.append(vocab[w])
            ref.append(expect)
            hist.append(w)
            state = nxt
        assert store.final_cost(state) == pytest.approx(-math.log(lm.p(hist, "</s>")), abs=1e-5)
    costs, nxt = store.score_batch(np.array(states), np.array(words))
    np.testing.assert_allclose(costs, ref, atol=1e-5)
    assert nxt.tolist() == [store.score(s, w)[1] for s, w in zip(states, words, strict=True)]


def test_a_state_decides_every_future_cost(tmp_path):
    """Histories that reach one state give every next word the same cost."""
    lm, store, vocab, _ = _store(tmp_path, 4, "1,1,2,2")
    rng = random.Random(1)
    futures: dict[int, list[float]] = {}
    listed = [w for w in [*WORDS, "EXTRA", "</s>"]]
    merged = 0
    for _ in range(300):
        hist = ["<s>", *[rng.choice(WORDS[:8]) for _ in range(rng.randint(0, 6))]]
        state = store.start_state()
        for w in hist[1:]:
            state = store.score(state, vocab[w])[1]
        costs = [-math.log(lm.p(hist, w)) for w in listed]
        if state in futures:
            merged += 1
            np.testing.assert_allclose(costs, futures[state], atol=1e-5)
        futures[state] = costs
    assert merged > 100  # the test saw histories merged, not only distinct states


def test_costs_are_g_fst_path_costs(tmp_path):
    import kaldilm

    _, store, vocab, arpa = _store(tmp_path, 4, "1,1,2,2")
    words_txt = tmp_path / "words.txt"
    words_txt.write_text("".join(f"{w} {i}\n" for w, i in vocab.items()))
    kaldilm.arpa2fst(str(arpa), str(tmp_path / "G.fst"), disambig_symbol="#0",
                     read_symbol_table=str(words_txt))
    rng = random.Random(2)
    for _ in range(20):
        sent = [rng.choice(WORDS[:10]) for _ in range(rng.randint(1, 9))]
        g = g_path_cost(tmp_path / "G.fst", vocab, sent)
        assert store.sentence_cost([vocab[w] for w in sent]) == pytest.approx(g, abs=1e-4), sent


def test_unknown_words(tmp_path):
    _, store, vocab, arpa = _store(tmp_path, 3, None)
    state = store.start_state()
    assert store.score(state, vocab["<UNK>"]) == store.score(state, 10_000)  # out of range
    with_missing = _vocab(("NOTINLM",))
    trie, _ = read_trie(arpa, with_missing)
    store = LmStore.from_trie(trie, with_missing["<s>"], with_missing["</s>"], None)
    with pytest.raises(InputError, match="not in the LM"):
        store.score(store.start_state(), with_missing["NOTINLM"])


def test_store_is_compact_and_mapped(tmp_path):
    _, store, _, _ = _store(tmp_path, 4, None)
    assert isinstance(store._o[1].word, np.memmap)
    per_ngram = store.nbytes() / sum(store.counts()[1:])
    assert per_ngram < 24  # word, cost (+ back-off, link, offset below the top order)


# Odd but legal: contexts with a back-off weight and no children (B, "A B"), a trigram
# whose suffix bigram is not listed ("A B C" without "B C"), a back-off on a unigram that
# is never a context (C).
ODD_ARPA = """
\\data\\
ngram 1=6
ngram 2=5
ngram 3=2

\\1-grams:
-0.8\t</s>
-99\t<s>\t-0.25
-0.5\tA\t-0.3
-0.6\tB\t-0.2
-0.9\tC\t-0.15
-1.2\t<UNK>

\\2-grams:
-0.3\t<s> A\t-0.1
-0.4\tA B\t-0.35
-0.5\tA C
-0.2\tB </s>
-0.7\t<s> B

\\3-grams:
-0.1\t<s> A B
-0.2\tA B C

\\end\\
"""


def _parse(text: str):
    """A tiny reader into lm.py's NgramLM, for the reference probabilities."""
    from asrtrain.lang.lm import NgramLM

    order = max(int(ln[6]) for ln in text.splitlines() if ln.startswith("ngram "))
    lm = NgramLM(order=order, vocab=[], prob=[{} for _ in range(order)],
                 backoff=[{} for _ in range(order)])
    n = 0
    for line in text.splitlines():
        if line.startswith("\\") and line.endswith("-grams:"):
            n = int(line[1])
        elif line == "\\end\\":
            break
        elif n and line.strip():
            parts = line.split("\t")
            g = tuple(parts[1].split())
            lm.prob[n - 1][g] = 10 ** float(parts[0])
            if len(parts) > 2:
                lm.backoff[n - 1][g] = 10 ** float(parts[2])
    return lm


def test_odd_backoffs_are_folded_exactly(tmp_path):
    import itertools

    import kaldilm

    arpa = tmp_path / "odd.arpa"
    arpa.write_text(ODD_ARPA)
    lm = _parse(ODD_ARPA)
    vocab = {w: i for i, w in enumerate(["<eps>", "A", "B", "C", "<UNK>", "#0", "<s>", "</s>"])}
    trie, _ = read_trie(arpa, vocab)
    store = LmStore.from_trie(trie, vocab["<s>"], vocab["</s>"], vocab["<UNK>"])
    words_txt = tmp_path / "words.txt"
    words_txt.write_text("".join(f"{w} {i}\n" for w, i in vocab.items()))
    kaldilm.arpa2fst(str(arpa), str(tmp_path / "G.fst"), disambig_symbol="#0",
                     read_symbol_table=str(words_txt))
    for k in range(5):
        for sent in itertools.product("ABC", repeat=k):
            hist = ["<s>", *sent, "</s>"]
            ref = -sum(math.log(lm.p(hist[:i], hist[i])) for i in range(1, len(hist)))
            got = store.sentence_cost([vocab[w] for w in sent])
            assert got == pytest.approx(ref, abs=1e-5), sent
            assert got == pytest.approx(g_path_cost(tmp_path / "G.fst", vocab, list(sent)),
                                        abs=1e-4), sent

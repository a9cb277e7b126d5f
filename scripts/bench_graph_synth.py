"""A synthetic lang of a chosen size for ``bench_graph.py``: dict dir, 3-gram ARPA, tree.

Sizes are what shapes HCLG, so they are set directly: N words of 2–12 phones over 40
phones (a phone-bigram source, so words share prefixes as real ones do; 10% of the
words get a second pronunciation), ranked by a Zipf law with short words frequent; a
3-gram ARPA whose bigrams and trigrams are the most frequent ones of a Zipf-sampled text
(a count-pruned LM: every trigram's prefix and suffix bigram is listed), each listed
word's probability its lower-order one times a log-normal factor, 40% of each context's
mass left to the back-off and the back-off weights computed by the project's own code
(``prune.recompute_order_bows``), written by ``trie.write_arpa``; and a context tree of
about ``pdfs`` pdfs from the project's ``build_tree`` on phone alignments of sentences
sampled from the same law.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

NUM_PHONES = 40
SIL = "sil"
BIGRAM_SHARE = 8 / 13        # of the n-grams above the unigrams (800k : 500k)


def phone_names() -> list[str]:
    return [f"p{k:02d}" for k in range(NUM_PHONES)]


def zipf(n: int) -> np.ndarray:
    """Word probabilities by rank (Zipf's law, s = 1, shifted as Mandelbrot's)."""
    p = 1.0 / (np.arange(n) + 10.0)
    return p / p.sum()


# -- the lexicon ---------------------------------------------------------------------------
def pronunciations(n: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """``n`` phone strings, shortest first (the frequent words are short); about 2% are
    homophones of an earlier one, the rest distinct."""
    start = rng.dirichlet(np.full(NUM_PHONES, 0.5))
    cum = np.cumsum(rng.dirichlet(np.full(NUM_PHONES, 0.3), size=NUM_PHONES), axis=1)
    lengths = np.sort(np.clip(rng.binomial(14, 0.45, size=n) + 1, 2, 12))
    out: list[tuple[int, ...] | None] = [None] * n
    seen: set[tuple[int, ...]] = set()
    todo = np.arange(n)
    while todo.size:
        seq = np.empty((todo.size, 12), dtype=np.int64)
        seq[:, 0] = rng.choice(NUM_PHONES, size=todo.size, p=start)
        for i in range(1, 12):
            u = rng.random(todo.size)[:, None]
            seq[:, i] = np.minimum((u > cum[seq[:, i - 1]]).sum(axis=1), NUM_PHONES - 1)
        again = []
        for k, row, homophone in zip(todo.tolist(), seq.tolist(), rng.random(todo.size) < 0.02,
                                     strict=True):
            pron = tuple(row[:lengths[k]])
            if pron in seen and not homophone:
                again.append(k)
            else:
                seen.add(pron)
                out[k] = pron
        todo = np.array(again, dtype=np.int64)
    return out  # type: ignore[return-value]


def variant(pron: tuple[int, ...], rng: np.random.Generator) -> tuple[int, ...]:
    """A second pronunciation: one phone replaced."""
    at = int(rng.integers(len(pron)))
    other = (pron[at] + 1 + int(rng.integers(NUM_PHONES - 1))) % NUM_PHONES
    return (*pron[:at], other, *pron[at + 1:])


def write_dict_dir(dest: Path, words: int, seed: int = 0) -> list[tuple[int, ...]]:
    """A Kaldi dict dir of ``words`` words ``w0000000``… (rank order); returns each word's
    first pronunciation (phone indices)."""
    rng = np.random.default_rng(seed)
    names = phone_names()
    prons = pronunciations(words, rng)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "silence_phones.txt").write_text(f"{SIL}\n")
    (dest / "optional_silence.txt").write_text(f"{SIL}\n")
    (dest / "nonsilence_phones.txt").write_text("".join(f"{p}\n" for p in names))
    lines = []
    second = rng.random(words) < 0.1
    for k, pron in enumerate(prons):
        lines.append(f"w{k:07d} {' '.join(names[p] for p in pron)}\n")
        if second[k]:
            lines.append(f"w{k:07d} {' '.join(names[p] for p in variant(pron, rng))}\n")
    (dest / "lexicon.txt").write_text("".join(lines))
    return prons


# -- the 3-gram ----------------------------------------------------------------------------
def sample_text(words: int, tokens: int, rng: np.random.Generator) -> np.ndarray:
    """Sentences ``<s> w… </s>`` as word ids 1..words (``<s>`` = words+1, ``</s>`` = words+2)."""
    bos, eos = words + 1, words + 2
    lengths = rng.integers(5, 25, size=max(1, tokens // 15))
    body = rng.choice(np.arange(1, words + 1), size=int(lengths.sum()), p=zipf(words))
    sid = np.repeat(np.arange(lengths.size), lengths)
    sent = np.empty(body.size + 2 * lengths.size, dtype=np.int64)
    sent[np.arange(body.size) + 2 * sid + 1] = body
    heads = np.r_[0, np.cumsum(lengths)[:-1]] + 2 * np.arange(lengths.size)
    sent[heads], sent[heads + lengths + 1] = bos, eos
    return sent


def frequent(keys: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """The ``n`` most frequent distinct keys (ties broken at random), sorted."""
    uniq, count = np.unique(keys, return_counts=True)
    if uniq.size <= n:
        return uniq
    order = np.lexsort((rng.random(uniq.size), -count))
    return np.sort(uniq[order[:n]])


def ngram_keys(sent: np.ndarray, n: int, V: int) -> np.ndarray:
    """Keys Σ w_i·V^(n−1−i) of the text's n-grams that do not cross a sentence."""
    bos, eos = V - 2, V - 1
    win = np.lib.stride_tricks.sliding_window_view(sent, n)
    ok = (win[:, 1:] != bos).all(axis=1) & (win[:, :-1] != eos).all(axis=1)
    win = win[ok]
    key = win[:, 0].copy()
    for i in range(1, n):
        key = key * V + win[:, i]
    return key


def select_ngrams(words: int, bigrams: int, trigrams: int, rng: np.random.Generator
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Bigram and trigram word-id matrices, sorted; every trigram's two bigrams listed."""
    V = words + 3                   # ids 1..words, <s>, </s>; 0 is <eps>
    tokens = max(4 * bigrams, 10_000)
    while True:
        sent = sample_text(words, tokens, rng)
        bi = frequent(ngram_keys(sent, 2, V), bigrams, rng)
        tri_all = ngram_keys(sent, 3, V)
        del sent
        ok = np.isin(tri_all // V, bi) & np.isin(tri_all % (V * V), bi)
        tri = frequent(tri_all[ok], trigrams, rng)
        if bi.size >= bigrams and tri.size >= trigrams:
            break
        tokens *= 2
    return (np.stack([bi // V, bi % V], axis=1).astype(np.int32),
            np.stack([tri // (V * V), (tri // V) % V, tri % V], axis=1).astype(np.int32))


def ngram_trie(words: int, bi: np.ndarray, tri: np.ndarray, rng: np.random.Generator):
    """The normalized back-off trie over ids 1..words, ``<s>``, ``</s>``."""
    from bench_lm import append_order

    from asrtrain.lang.trie import NgramTrie

    V = words + 3
    bos, eos = V - 2, V - 1
    uni = np.r_[zipf(words), 1.0 / 15]              # the words and </s> (a sentence: 15)
    logp1 = np.full(V, np.nan, np.float32)
    logp1[1:words + 1] = np.log10(uni[:-1] / uni.sum())
    logp1[eos], logp1[bos] = np.log10(uni[-1] / uni.sum()), -99.0
    trie = NgramTrie(order=3, vocab_size=V, logp=[logp1], bow=[np.zeros(V, np.float32)],
                     word=[np.zeros(0, np.int32)], first=[])
    for grams in (bi, tri):
        append_order(trie, grams, rng)
    return trie


def split_ngrams(words: int, ngrams: int) -> tuple[int, int]:
    """(bigrams, trigrams) for ``ngrams`` n-grams in all, 8 : 5 above the unigrams."""
    rest = max(ngrams - words - 2, 2)
    bigrams = max(1, round(rest * BIGRAM_SHARE))
    return bigrams, max(1, rest - bigrams)


def write_arpa(dest: Path, words: int, ngrams: int, seed: int = 0) -> list[int]:
    """The 3-gram ARPA; returns its n-gram counts per order."""
    from asrtrain.lang.trie import write_arpa as write

    rng = np.random.default_rng(seed + 1)
    bi, tri = select_ngrams(words, *split_ngrams(words, ngrams), rng)
    trie = ngram_trie(words, bi, tri, rng)
    names = {0: "<eps>", **{k: f"w{k - 1:07d}" for k in range(1, words + 1)},
             words + 1: "<s>", words + 2: "</s>"}
    write(trie, dest, names)
    return trie.counts()


# -- the tree ------------------------------------------------------------------------------
def alignments(prons: list[tuple[int, ...]], utterances: int, rng: np.random.Generator):
    """Frame alignments (phone ids: sil 1, phones 2..41) of Zipf-sampled sentences,
    silence at the ends and sometimes between words, phones of 3–11 frames."""
    from asrtrain.lang.hmm import FrameAlignment

    p = zipf(len(prons))
    for u in range(utterances):
        segs: list[tuple[int, int]] = [(1, int(rng.integers(10, 40)))]
        for w in rng.choice(len(prons), size=int(rng.integers(5, 20)), p=p):
            segs += [(ph + 2, int(rng.integers(3, 12))) for ph in prons[w]]
            if rng.random() < 0.2:
                segs.append((1, int(rng.integers(5, 30))))
        segs.append((1, int(rng.integers(10, 40))))
        lens = np.array([n for _, n in segs])
        yield FrameAlignment(np.repeat([ph for ph, _ in segs], lens),
                             np.cumsum(lens)[:-1].tolist(), utt=f"u{u}")


def write_tree(dest: Path, prons: list[tuple[int, ...]], pdfs: int, utterances: int,
               seed: int = 0) -> int:
    """The tree JSON (``prepare lang``'s format) with about ``pdfs`` pdfs; its pdf count."""
    from asrtrain.lang.hmm import estimate_topology
    from asrtrain.lang.tree import build_tree

    rng = np.random.default_rng(seed + 2)
    train = list(alignments(prons, utterances, rng))
    topo = estimate_topology(train, range(1, NUM_PHONES + 2), sil_phones=[1])
    tree, _ = build_tree(train, topo, ci_phones=[1], num_pdfs=pdfs)
    dest.write_text(json.dumps(tree.to_json()) + "\n")
    return tree.num_pdfs


def make_lang_inputs(work: Path, words: int, ngrams: int, pdfs: int, utterances: int,
                     seed: int = 0) -> dict:
    """``work``/dict, ``work``/lm.arpa and ``work``/tree; their sizes."""
    prons = write_dict_dir(work / "dict", words, seed)
    counts = write_arpa(work / "lm.arpa", words, ngrams, seed)
    num_pdfs = write_tree(work / "tree", prons, pdfs, utterances, seed)
    lexicon = (work / "dict" / "lexicon.txt").read_text().count("\n")
    return {"words": words, "prons": lexicon, "ngrams": counts, "pdfs": num_pdfs}

"""Entropy pruning: the pruned model still normalizes, threshold 0 keeps everything, larger
thresholds keep subsets, what goes is what changes the model least, a target size is
met with the least pruning, and the result is SRILM's (through kaldingram)."""

from __future__ import annotations

import importlib.util
import math
import random

import numpy as np
import pytest
from needs import missing

from asrtrain.core.errors import ConfigError
from asrtrain.lang.lm import estimate, write_arpa
from asrtrain.lang.lmstore import LmStore
from asrtrain.lang.prune import keep_masks, perplexity_changes, prune
from asrtrain.lang.trie import read_trie
from asrtrain.lang.trie import write_arpa as write_trie_arpa

WORDS = [f"W{i}" for i in range(40)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A 4-gram of a Zipf-ish random text, as the ARPA file and its trie."""
    rng = random.Random(3)
    weights = [1.0 / (k + 1) for k in range(len(WORDS))]
    sents = [rng.choices(WORDS, weights, k=rng.randint(2, 12)) for _ in range(800)]
    lm = estimate(sents, order=4, min_count="1,1,1,2")
    path = tmp_path_factory.mktemp("prune") / "lm.arpa"
    write_arpa(path, lm)
    vocab = {w: i for i, w in enumerate(["<eps>", *sorted(lm.vocab), "#0", "<s>"])}
    trie, _ = read_trie(path, vocab)
    return path, trie, vocab


def _ngrams(trie) -> list[set[tuple[int, ...]]]:
    return [set(map(tuple, trie.ngram_words(n, None if n > 1 else np.flatnonzero(trie.present))
                    .tolist())) for n in range(1, trie.order + 1)]


def test_pruned_model_normalizes(model):
    _, trie, vocab = model
    pruned = prune(trie, vocab["<s>"], vocab["</s>"], threshold=1e-4)
    assert sum(pruned.after) < 0.5 * sum(pruned.before)
    store = LmStore.from_trie(pruned.trie, vocab["<s>"], vocab["</s>"], vocab["<UNK>"])
    words = np.array([i for w, i in vocab.items() if store.has_word(i) and w != "<s>"])
    contexts = [0] + [store.base[n] + r for n in range(1, pruned.trie.order)
                      for r in np.flatnonzero(pruned.trie.has_children(n)).tolist()]
    for state in contexts:
        costs, _ = store.score_batch(np.full(words.shape[0], state), words)
        assert np.exp(-costs).sum() == pytest.approx(1.0, abs=1e-4), state


def test_threshold_zero_keeps_everything(model):
    _, trie, vocab = model
    pruned = prune(trie, vocab["<s>"], vocab["</s>"], threshold=0.0)
    assert pruned.after == pruned.before == trie.counts()
    # back-offs recomputed from the same probabilities: equal up to the ARPA's 7 decimals
    # (amplified where a context's listed words leave little mass to back off with)
    for n in range(trie.order - 1):
        np.testing.assert_allclose(pruned.trie.bow[n], trie.bow[n], atol=1e-4)


def test_larger_thresholds_keep_subsets(model):
    _, trie, vocab = model
    kept = [_ngrams(prune(trie, vocab["<s>"], vocab["</s>"], threshold=t).trie)
            for t in (0.0, 1e-6, 1e-5, 1e-4, 1e-3)]
    for bigger, smaller in zip(kept, kept[1:], strict=False):
        assert all(s <= b for s, b in zip(smaller, bigger, strict=True))
        assert sum(map(len, smaller)) <= sum(map(len, bigger))
    assert sum(map(len, kept[-1])) < sum(map(len, kept[0]))


def test_what_goes_changes_the_model_least(model):
    _, trie, vocab = model
    changes = perplexity_changes(trie, vocab["<s>"], vocab["</s>"])
    threshold = float(np.quantile(np.concatenate(changes), 0.6))
    masks = keep_masks(trie, changes, threshold)
    for n in range(2, trie.order + 1):
        change, keep = changes[n - 2], masks[n - 2]
        assert (change[~keep] < threshold).all()      # only small changes go
        saved = keep & (change < threshold)            # a small one stays only as a context
        if n < trie.order:
            needed = np.zeros(trie.rows(n), bool)
            needed[trie.parents(n + 1)[masks[n - 1]]] = True
            assert (needed[saved]).all()
        else:
            assert not saved.any()


def test_target_size_is_met_with_the_least_pruning(model):
    _, trie, vocab = model
    target = sum(trie.counts()) // 10
    pruned = prune(trie, vocab["<s>"], vocab["</s>"], target=target)
    assert sum(pruned.after) <= target
    changes = perplexity_changes(trie, vocab["<s>"], vocab["</s>"])
    finer = np.unique(np.concatenate(changes))
    finer = finer[finer < pruned.threshold].max()
    assert trie.count(1) + sum(int(m.sum()) for m in keep_masks(trie, changes, finer)) > target


def test_bad_pruning_requests(model):
    _, trie, vocab = model
    with pytest.raises(ConfigError, match="removes every n-gram above the unigrams"):
        prune(trie, vocab["<s>"], vocab["</s>"], threshold=10.0)
    with pytest.raises(ConfigError, match="fewer than the model's"):
        prune(trie, vocab["<s>"], vocab["</s>"], target=5)


def test_same_as_srilm_through_kaldingram(model, tmp_path, monkeypatch):
    """kaldingram's prune is Kaldi's ngram_entropy_pruning.py (SRILM's algorithm). It gives
    the history ``<s>`` alone P = 10^-99 where SRILM's ``computeContextProb`` uses P(</s>),
    so it prunes every "<s> w" bigram without children; with SRILM's rule put back, its
    n-grams and back-offs are ours."""
    if importlib.util.find_spec("kaldingram") is None:
        missing("kaldingram is not installed (the dev extra installs it)")
    import kaldingram.prune as kprune
    path, trie, vocab = model
    original = kprune.Arpa.log_joint_prob

    def srilm_context_prob(self, sequence):
        if tuple(sequence) == (self.SOS,):
            return self.log_p_raw((self.EOS,))
        return original(self, sequence)

    monkeypatch.setattr(kprune.Arpa, "log_joint_prob", srilm_context_prob)
    threshold = 2e-5
    lm = kprune.ArpaParser().loadf(str(path))[0]
    kprune.prune(lm, threshold, 1)
    kprune.ArpaParser().dumpf(lm, str(tmp_path / "kaldingram.arpa"))
    theirs, _ = read_trie(tmp_path / "kaldingram.arpa", vocab)
    ours = prune(trie, vocab["<s>"], vocab["</s>"], threshold=threshold).trie
    assert ours.counts() == theirs.counts() and ours.counts() != trie.counts()
    assert _ngrams(ours) == _ngrams(theirs)
    write_trie_arpa(ours, tmp_path / "ours.arpa", {i: w for w, i in vocab.items()})
    ours, _ = read_trie(tmp_path / "ours.arpa", vocab)  # both rounded to 7 decimals
    for n in range(trie.order):
        np.testing.assert_allclose(ours.logp[n], theirs.logp[n], atol=1e-6, equal_nan=True)
        if n < trie.order - 1:
            np.testing.assert_allclose(ours.bow[n], theirs.bow[n], atol=1e-5)


def test_pruning_raises_perplexity_a_little(model):
    from asrtrain.lang.lang_lm import perplexity

    _, trie, vocab = model
    rng = random.Random(9)
    weights = [1.0 / (k + 1) for k in range(len(WORDS))]
    held_out = [rng.choices(WORDS, weights, k=rng.randint(2, 12)) for _ in range(200)]
    ppl = []
    for t in (0.0, 1e-5, 1e-3):
        pruned = prune(trie, vocab["<s>"], vocab["</s>"], threshold=t).trie
        store = LmStore.from_trie(pruned, vocab["<s>"], vocab["</s>"], vocab["<UNK>"])
        ppl.append(perplexity(store, held_out, vocab)[0])
    assert all(math.isfinite(p) for p in ppl)
    assert ppl[0] < ppl[2] < 1.5 * ppl[0]

"""The modified Kneser-Ney LM against values computed by hand, its ARPA file, perplexity."""

from __future__ import annotations

import math

import pytest

from asrtrain.core.errors import ConfigError
from asrtrain.lang.lm import arpa_text, discounts, estimate, perplexity, write_arpa

# Bigram counts of <s> s </s> (hand-counted):
#   <s> C 3, <s> D 2, <s> E 2, C </s> 4, and seven bigrams seen once
#   (A </s>, C C, D </s>, D C, E </s>, E A, E E)
# count-of-counts n1..n4 = 7, 2, 1, 1:  Y = 7/11,
#   D1 = 1 - 2Y·2/7 = 7/11, D2 = 2 - 3Y·1/2 = 23/22, D3+ = 3 - 4Y·1/1 = 5/11
# Unigram continuation counts (distinct left words, <s> included):
#   </s> 4, C 3, E 2, A 1, D 1 (total 11); n1..n4 = 2, 1, 1, 1: Y = 1/2,
#   D1 = 1/2, D2 = 1/2, D3+ = 1; γ() = (½·2 + ½·1 + 1·2)/11 = 3.5/11
# Vocabulary for the uniform floor: A C D E </s> <UNK> (6).
TEXT = ["C C", "C", "E", "E E A", "C", "D C", "D"]
P1 = {"C": 15.5 / 66, "</s>": 21.5 / 66, "A": 6.5 / 66, "D": 6.5 / 66, "E": 12.5 / 66,
      "<UNK>": 3.5 / 66}
GAMMA_C = 12 / 55            # (D1·1 + D3·1) / 5
GAMMA_BOS = 4 / 11           # (D2·2 + D3·1) / 7
P2 = {
    ("C", "</s>"): (4 - 5 / 11) / 5 + GAMMA_C * P1["</s>"],
    ("C", "C"): (1 - 7 / 11) / 5 + GAMMA_C * P1["C"],
    ("C", "A"): GAMMA_C * P1["A"],                       # unseen: pure back-off
    ("<s>", "C"): (3 - 5 / 11) / 7 + GAMMA_BOS * P1["C"],
    ("<s>", "D"): (2 - 23 / 22) / 7 + GAMMA_BOS * P1["D"],
    ("E", "E"): (1 - 7 / 11) / 3 + (7 / 11 * 3 / 3) * P1["E"],  # E: three singletons
}


@pytest.fixture(scope="module")
def bigram():
    return estimate([s.split() for s in TEXT], order=2)


def test_discounts_match_hand_values(bigram):
    assert bigram.discounts[1] == pytest.approx((7 / 11, 23 / 22, 5 / 11))
    assert bigram.discounts[0] == pytest.approx((0.5, 0.5, 1.0))


def test_probabilities_match_hand_values(bigram):
    for w, p in P1.items():
        assert bigram.p([], w) == pytest.approx(p, rel=1e-12), w
    for (h, w), p in P2.items():
        assert bigram.p([h], w) == pytest.approx(p, rel=1e-12), (h, w)
    assert bigram.backoff[0][("C",)] == pytest.approx(GAMMA_C)
    assert bigram.backoff[0][("<s>",)] == pytest.approx(GAMMA_BOS)


def test_arpa_lists_log10_values(bigram):
    text = arpa_text(bigram)
    assert "ngram 1=7" in text and "ngram 2=11" in text
    line = next(ln for ln in text.splitlines() if ln.endswith("\tC") or "\tC\t" in ln)
    prob, word, bow = line.split("\t")
    assert word == "C"
    assert float(prob) == pytest.approx(math.log10(P1["C"]), abs=1e-6)
    assert float(bow) == pytest.approx(math.log10(GAMMA_C), abs=1e-6)
    assert any(ln.startswith("-99") and ln.split("\t")[1] == "<s>" for ln in text.splitlines())


@pytest.mark.parametrize("min_count", [None, "1,2,2"])
def test_every_distribution_sums_to_one(min_count):
    text = [s.split() for s in TEXT * 2 + ["A C D E", "E A C C", "D D E"]]
    lm = estimate(text, order=3, min_count=min_count)
    contexts = {g[:-1] for n in (1, 2) for g in lm.prob[n]} | {()}
    for h in contexts:
        assert sum(lm.p(list(h), w) for w in lm.vocab) == pytest.approx(1.0, abs=1e-9), h


def test_pruning_removes_rare_ngrams():
    text = [s.split() for s in TEXT]
    full, pruned = estimate(text, order=3), estimate(text, order=3, min_count="1,1,2")
    assert len(pruned.prob[2]) < len(full.prob[2])
    assert all(g in full.prob[2] for g in pruned.prob[2])


def test_perplexity_by_hand(bigram):
    ppl, scored, oov = perplexity(bigram, [["C"], ["C", "ZZZ"]])
    logp = 2 * math.log(P2[("<s>", "C")]) + math.log(P2[("C", "</s>")])
    # after the OOV ZZZ the context backs off to the unigram </s>
    logp += math.log(P1["</s>"])
    assert (scored, oov) == (4, 1)
    assert ppl == pytest.approx(math.exp(-logp / 4))


def test_kaldilm_reads_the_arpa(tmp_path):
    import kaldilm

    lm = estimate([s.split() for s in TEXT * 3 + ["A C D E", "E A C C"]], order=4)
    write_arpa(tmp_path / "lm.arpa", lm)
    text = kaldilm.arpa2fst(str(tmp_path / "lm.arpa"), str(tmp_path / "G.fst"), disambig_symbol="#0",
                            write_symbol_table=str(tmp_path / "words.txt"))
    assert (tmp_path / "G.fst").stat().st_size > 0
    assert len(text.splitlines()) > 10
    assert "#0" in (tmp_path / "words.txt").read_text()


def test_bad_min_count():
    with pytest.raises(ConfigError, match="non-decreasing"):
        estimate([["A"]], order=3, min_count="1,3,2")
    with pytest.raises(ConfigError, match="unigrams"):
        estimate([["A"]], order=2, min_count="2,2")


def test_degenerate_counts_fall_back_to_fixed_discounts():
    assert discounts({("a",): 1, ("b",): 1}, 1) == (0.5, 1.0, 1.5)

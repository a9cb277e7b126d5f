"""``prepare lang --arpa`` and ``--prune-*`` on the mini corpus, as a user runs them: the
vocabulary counted both ways, G built from the pruned LM, the full LM in lm_full/, and a
broken ARPA or contradictory options as one error line."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from gwalk import g_path_cost

from asrtrain.lang.lang_lm import load_lms
from asrtrain.lang.lexicon import read_symbols
from asrtrain.lang.lm import estimate, write_arpa
from asrtrain.lang.trie import read_trie


@pytest.fixture(scope="module")
def user_arpa(mini_corpus, tmp_path_factory):
    """A gzipped 3-gram with a word the lexicon lacks (ZEBRA, and THE from the LM text)
    and without a lexicon word (REED)."""
    text = [ln.split() for ln in (mini_corpus / "lm_text").read_text().splitlines() if ln.strip()]
    text = [[w for w in s if w != "REED"] or ["A"] for s in text]
    text += [["A", "ZEBRA", "READ"], ["ZEBRA", "CAT"]]
    lm = estimate(text * 3, order=3)
    root = tmp_path_factory.mktemp("user_arpa")
    write_arpa(root / "lm.arpa", lm)
    (root / "lm.arpa.gz").write_bytes(gzip.compress((root / "lm.arpa").read_bytes()))
    return root / "lm.arpa.gz"


def _lang(run_cli, mini_corpus, out, *args):
    return run_cli("prepare", "lang", mini_corpus / "dict", *args[:1], mini_corpus, out,
                   "--order", "3", "--num-pdfs", "40", *args[1:])


def test_arpa_in_pruned_first_pass_full_lm_kept(run_cli, mini_corpus, user_arpa, tmp_path):
    out = tmp_path / "lang"
    full_counts = read_trie(user_arpa, {w: i for i, w in enumerate(
        ["</s>", "<s>", "<unk>", "A", "AT", "CAT", "CATS", "DOG", "GOOD", "READ",
         ])})[0].counts()  # in the lexicon's words
    target = sum(full_counts) - 12
    proc = _lang(run_cli, mini_corpus, out, "-", "--arpa", user_arpa, "--prune-ngrams", target)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "lm_report.json").read_text())
    assert report["arpa_words_not_in_lexicon"] == 2                  # THE, ZEBRA
    assert report["lexicon_words_not_in_lm"] == 1 and report["lexicon_words_not_in_lm_examples"] == ["REED"]
    assert report["arpa"]["skipped"][0] == 2 and all(report["arpa"]["skipped"])
    assert sum(report["ngrams_first"]) <= target < sum(report["ngrams_full"])
    log = next((out / "log").glob("prepare-lang.*.log")).read_text()
    assert "2 words are not in the lexicon" in log and "cannot be recognized" in log
    assert "first pass" in proc.stdout

    words = read_symbols(out / "words.txt")
    first_pass, _ = read_trie(out / "lm.arpa", words)
    assert first_pass.counts() == report["ngrams_first"]
    first, full = load_lms(out)
    assert first.counts() == report["ngrams_first"] and full.counts() == report["ngrams_full"]
    # G is the first pass: its path costs are the first-pass store's, not the full one's
    diffs = []
    for sent in (["A", "CAT"], ["A", "GOOD", "DOG", "READ"], ["CATS", "AT", "A", "DOG"]):
        ids = [words[w] for w in sent]
        g = g_path_cost(out / "G.fst", words, sent)
        assert first.sentence_cost(ids) == pytest.approx(g, abs=1e-4)
        diffs.append(abs(full.sentence_cost(ids) - g))
    assert max(diffs) > 1e-3
    assert (out / "graph" / "HCLG.fst").exists()


def test_text_lm_pruned_keeps_the_estimate(mini_corpus, tmp_path):
    from asrtrain.lang.lang_lm import Pruning
    from asrtrain.lang.prepare import prepare_lang

    out = tmp_path / "lang"
    figures = prepare_lang(mini_corpus / "dict", mini_corpus / "lm_text", mini_corpus, out,
                           order=3, num_pdfs=40, pruning=Pruning(threshold=1e-3))
    assert (out / "lm_full.arpa").exists() and (out / "lm_first").is_dir()
    assert sum(figures["ngrams_first"]) < sum(figures["ngrams"])
    assert figures["dev_perplexity_first"] > 1 and figures["dev_perplexity_full"] > 1
    words = read_symbols(out / "words.txt")
    assert read_trie(out / "lm_full.arpa", words)[0].counts() == figures["ngrams"]


def test_unpruned_arpa_writes_no_first_store(mini_corpus, user_arpa, tmp_path):
    from asrtrain.lang.prepare import prepare_lang

    out = tmp_path / "lang"
    figures = prepare_lang(mini_corpus / "dict", None, mini_corpus, out, num_pdfs=40,
                           arpa=user_arpa)
    assert figures["ngrams_first"] == figures["ngrams"] and not (out / "lm_first").exists()
    first, full = load_lms(out)
    assert first is full
    np.testing.assert_array_equal(read_trie(out / "lm.arpa", read_symbols(out / "words.txt"))[0]
                                  .counts(), figures["ngrams"])


@pytest.mark.parametrize(("args", "needles"), [
    (("LMTEXT", "--arpa", "ARPA"), ("LM_TEXT and --arpa",)),
    (("-",), ("LM_TEXT is '-'",)),
    (("-", "--arpa", "ARPA", "--prune-ngrams", "10", "--prune-threshold", "1e-6"),
     ("alternatives",)),
    (("-", "--arpa", "ARPA", "--prune-threshold", "10"), ("removes every n-gram",)),
    (("-", "--arpa", "BROKEN"), ("broken.arpa: line 3:", "ngram N=COUNT")),
])
def test_bad_lm_options_and_files(run_cli, one_error, mini_corpus, user_arpa, tmp_path, args,
                                  needles):
    broken = tmp_path / "broken.arpa"
    broken.write_text("\\data\\\nngram 1=3\nngram 2=x\n\n")
    subst = {"LMTEXT": mini_corpus / "lm_text", "ARPA": user_arpa, "BROKEN": broken}
    out = tmp_path / "lang"
    proc = _lang(run_cli, mini_corpus, out, *[subst.get(a, a) for a in args])
    one_error(proc.stdout + proc.stderr, 1, proc.returncode, *needles)
    assert not (out / "graph").exists()

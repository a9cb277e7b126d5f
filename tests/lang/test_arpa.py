"""Reading ARPA files into a trie: plain or gzipped, words outside the lexicon counted and
skipped, every kind of broken file one InputError naming the file and the line."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from asrtrain.core.errors import InputError
from asrtrain.lang.lm import estimate, write_arpa
from asrtrain.lang.trie import read_trie
from asrtrain.lang.trie import write_arpa as write_trie_arpa

GOOD = """some tool's comment before the data

\\data\\
ngram 1=5
ngram 2=4
ngram 3=1

\\1-grams:
-1.0\t</s>
-99\t<s>\t-0.3
-0.5\ta\t-0.2
-0.7\tb\t-0.1
-1.5\t<unk>

\\2-grams:
-0.2\t<s> a\t-0.05
-0.3\ta b
-0.4\tb </s>
-0.6 a a

\\3-grams:
-0.1\t<s> a b

\\end\\
"""
VOCAB = {w: i for i, w in enumerate(["<eps>", "a", "b", "<UNK>", "#0", "<s>", "</s>"])}


def _write(tmp_path: Path, text: str, name: str = "lm.arpa") -> Path:
    path = tmp_path / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_plain_and_gzipped_read_the_same(tmp_path):
    plain, _ = read_trie(_write(tmp_path, GOOD), VOCAB)
    # gzip is recognized by its magic bytes, not the name
    zipped, stats = read_trie(_write(tmp_path, GOOD, "lm.gz"), VOCAB)
    other, _ = read_trie(_write(tmp_path, GOOD, "no_suffix.gz").rename(tmp_path / "x"), VOCAB)
    assert plain.counts() == zipped.counts() == other.counts() == [5, 4, 1]
    for n in range(3):
        np.testing.assert_array_equal(plain.logp[n], zipped.logp[n])
    assert stats.skipped == [0, 0, 0]
    # <unk> is the lexicon's <UNK>; a space-separated line reads like a tab-separated one
    assert plain.logp[0][VOCAB["<UNK>"]] == pytest.approx(-1.5)
    row = plain.find(np.array([[VOCAB["a"], VOCAB["a"]]]))[0]
    assert plain.logp[1][row] == pytest.approx(-0.6)


def test_words_outside_the_lexicon_are_skipped_and_counted(tmp_path):
    vocab = {w: i for w, i in VOCAB.items() if w != "b"}
    trie, stats = read_trie(_write(tmp_path, GOOD), vocab)
    assert stats.declared == [5, 4, 1]
    assert stats.kept == [4, 2, 0] and stats.skipped == [1, 2, 1]
    assert dict(stats.oov_words) == {"b": 4}
    assert trie.counts() == [4, 2, 0]


def test_write_and_read_again(tmp_path):
    lm = estimate([s.split() for s in ["a b a", "b b", "a", "a b b a"]] * 3, order=3)
    write_arpa(tmp_path / "lm.arpa", lm)
    vocab = {w: i for i, w in enumerate(["<eps>", "a", "b", "<UNK>", "#0", "<s>", "</s>"])}
    trie, _ = read_trie(tmp_path / "lm.arpa", vocab)
    write_trie_arpa(trie, tmp_path / "again.arpa", {i: w for w, i in vocab.items()})
    again, _ = read_trie(tmp_path / "again.arpa", vocab)
    assert again.counts() == trie.counts() == [len(p) for p in lm.prob]
    for n in range(3):
        np.testing.assert_allclose(again.logp[n], trie.logp[n], atol=1e-6)
        if n < 2:
            np.testing.assert_allclose(again.bow[n], trie.bow[n], atol=1e-6)


BROKEN = [
    ("no header", GOOD.replace("\\data\\", "\\dat\\"), "no \\\\data\\\\ header", None),
    ("bad count line", GOOD.replace("ngram 2=4", "ngram two=4"), "ngram N=COUNT", 5),
    ("orders not 1..N", GOOD.replace("ngram 2=4\n", ""), "not 1..N", None),
    ("count mismatch", GOOD.replace("ngram 2=4", "ngram 2=5"), "has 4 n-grams where", 20),
    ("bad number", GOOD.replace("-0.3\ta b", "-0.x\ta b"), "is not a number", 17),
    ("bad backoff", GOOD.replace("\t-0.2\n", "\tnan\n"), "not a finite number", 11),
    ("too many fields", GOOD.replace("-0.4\tb </s>", "-0.4\tb </s> a -1 -2"), "needs", 18),
    ("wrong section", GOOD.replace("\\3-grams:", "\\4-grams:"), "expected the \\\\3-grams", 21),
    ("no end", GOOD.replace("\\end\\\n", ""), "ends", None),
    ("context not listed", GOOD.replace("<s> a b", "b a b"), "context", 22),
    ("word not a unigram", GOOD.replace("-0.6 a a", "-0.6 a <s>").replace("-99\t<s>\t-0.3\n", "")
     .replace("ngram 1=5", "ngram 1=4"), "not among the unigrams", None),
    ("duplicate", GOOD.replace("-0.6 a a", "-0.6 a b"), "listed twice", 19),
    ("duplicate unk", GOOD.replace("-1.5\t<unk>", "-1.5\t<UNK>\n-1.5\t<unk>")
     .replace("ngram 1=5", "ngram 1=6"), "listed twice", 14),
]


@pytest.mark.parametrize(("what", "text", "message", "line"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_files_name_the_line(tmp_path, what, text, message, line):
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match=message) as err:
        read_trie(path, VOCAB)
    assert str(err.value).startswith(f"{path}: line ")
    if line is not None:
        assert str(err.value).startswith(f"{path}: line {line}:"), str(err.value)


def test_truncated_gzip(tmp_path):
    lm = estimate([s.split() for s in ["a b a", "b b", "a", "a b b a"]] * 50, order=3)
    write_arpa(tmp_path / "lm.arpa", lm)
    data = gzip.compress((tmp_path / "lm.arpa").read_bytes())
    (tmp_path / "cut.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"line \d+: the (gzip stream is truncated|file ends)"):
        read_trie(tmp_path / "cut.gz", VOCAB)


def test_not_utf8(tmp_path):
    path = tmp_path / "lm.arpa"
    path.write_bytes(GOOD.replace("-0.3\ta b", "-0.3\ta \xe9").encode("latin-1"))
    with pytest.raises(InputError, match=r"line 17: not UTF-8"):
        read_trie(path, VOCAB)

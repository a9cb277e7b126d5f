"""Lexicon reading, disambiguation symbols, symbol tables and L."""

from __future__ import annotations

import pytest

from asrtrain.core.errors import InputError
from asrtrain.lang.lexicon import lexicon_fst, phone_table, read_dict_dir, read_symbols, word_table


def test_homophones_and_prefixes_get_disambiguation_symbols(mini_corpus):
    lex = read_dict_dir(mini_corpus / "dict", mini_corpus / "phones.txt")
    sym = {(w, p): s for w, p, s in lex.disambig}
    assert sym[("READ", ("r", "i", "d"))] == "#1"
    assert sym[("REED", ("r", "i", "d"))] == "#2"
    assert sym[("A", ("a",))] == "#1"            # a prefix of AT
    assert sym[("AT", ("a", "t"))] is None
    assert sym[("CAT", ("k", "ae", "t"))] == "#1"  # a prefix of CATS
    assert lex.num_disambig == 2


def test_tables_keep_corpus_phone_ids(mini_corpus):
    lex = read_dict_dir(mini_corpus / "dict", mini_corpus / "phones.txt")
    ptab = phone_table(lex)
    corpus = read_symbols(mini_corpus / "phones.txt")
    assert all(ptab[p] == i for p, i in corpus.items())
    assert [p for p in ptab if p.startswith("#")] == ["#0", "#1", "#2"]
    wtab = word_table(lex)
    assert wtab["<eps>"] == 0 and "<UNK>" in wtab and wtab["</s>"] == len(wtab) - 1


def test_l_disambig_transduces_pronunciations(mini_corpus):
    import kaldifst

    lex = read_dict_dir(mini_corpus / "dict", mini_corpus / "phones.txt")
    ptab, wtab = phone_table(lex), word_table(lex)
    L = lexicon_fst(lex, disambig=True)
    # the phone string of "REED" with its disambiguation symbol maps to REED only
    seq = [ptab[p] for p in ("r", "i", "d", "#2")]
    acceptor = kaldifst.compile("".join(f"{i} {i + 1} {s} {s}\n" for i, s in enumerate(seq))
                                + f"{len(seq)}\n")
    kaldifst.arcsort(acceptor, sort_type="olabel")
    kaldifst.arcsort(L, sort_type="ilabel")
    out = kaldifst.compose(acceptor, L)
    best = kaldifst.shortest_path(out)
    ok, _, words, _ = kaldifst.get_linear_symbol_sequence(best)
    assert ok and words == [wtab["REED"]]


def test_unknown_phone_in_lexicon_names_line(tmp_path, mini_corpus):
    import shutil

    d = tmp_path / "dict"
    shutil.copytree(mini_corpus / "dict", d)
    with open(d / "lexicon.txt", "a") as fh:
        fh.write("ZED z e d\n")
    with pytest.raises(InputError, match=r"lexicon.txt: line \d+: word 'ZED' uses unknown phone 'z'"):
        read_dict_dir(d, mini_corpus / "phones.txt")

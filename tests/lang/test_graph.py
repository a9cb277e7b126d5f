"""prepare lang end to end on the mini corpus: outputs, HCLG's labels and self-loops."""

from __future__ import annotations

import json

import numpy as np
import pytest

from asrtrain.lang.fstio import read_const


def test_lang_dir_outputs(mini_lang):
    out, figures = mini_lang
    for name in ("phones.txt", "words.txt", "L.fst", "L_disambig.fst", "lm.arpa", "G.fst", "tree",
                 "tree.pdfs.txt", "num_pdfs", "pdf_ali/train.scp", "pdf_ali/dev.scp",
                 "pdf_ali/test.scp", "graph/HCLG.fst", "graph/words.txt", "graph/info.json"):
        assert (out / name).exists(), name
    num_pdfs = int((out / "num_pdfs").read_text())
    assert num_pdfs == figures["num_pdfs"] and 33 <= num_pdfs <= 60
    info = json.loads((out / "graph" / "info.json").read_text())
    assert info["tree_id"] == (out / "pdf_ali" / "tree_id").read_text().strip() == figures["tree_id"]
    assert set(figures["sizes"]) == {"G", "LG", "CLG", "Ha", "HCLGa", "HCLG"}
    assert figures["lm_oov_tokens"] == 1          # THE is not in the lexicon
    assert figures["dev_perplexity"] > 1


def test_pdf_alignments_are_targets(mini_lang, mini_corpus):
    import kaldiio

    out, figures = mini_lang
    phones = kaldiio.load_scp(str(mini_corpus / "train" / "ali.scp"))
    pdfs = kaldiio.load_scp(str(out / "pdf_ali" / "train.scp"))
    assert list(pdfs) == list(phones)
    for utt in phones:
        assert pdfs[utt].dtype == np.int32 and len(pdfs[utt]) == len(phones[utt])
        assert 0 <= pdfs[utt].min() and pdfs[utt].max() < figures["num_pdfs"]


def test_hclg_labels_and_self_loops(mini_lang):
    out, figures = mini_lang
    arcs = read_const(out / "graph" / "HCLG.fst")
    assert arcs.il.max() <= figures["num_pdfs"] and arcs.il.min() >= 0   # pdf+1, no #n left
    words = int(arcs.ol.max())
    assert words <= max(int(x.split()[1]) for x in (out / "words.txt").read_text().splitlines())
    loops = arcs.src == arcs.dst
    assert loops.any()
    # a state's self-loop carries the pdf of every arc entering the state
    loop_label = dict(zip(arcs.src[loops].tolist(), arcs.il[loops].tolist(), strict=True))
    assert len(loop_label) == int(loops.sum())            # at most one loop per state
    for d, il in zip(arcs.dst[~loops].tolist(), arcs.il[~loops].tolist(), strict=True):
        if d in loop_label:
            assert il == loop_label[d]
    # and every arc with a pdf leads to a state that has that pdf's loop
    entered = arcs.dst[~loops][arcs.il[~loops] > 0]
    assert all(d in loop_label for d in entered.tolist())


def test_const_fst_roundtrip(tmp_path):
    import kaldifst

    from asrtrain.lang.fstio import to_arcs, to_vector_fst

    fst = kaldifst.compile("0 1 3 4 0.5\n0 2 5 0 1.5\n1 2 0 7\n2 0.25\n")
    arcs = to_arcs(fst)
    assert arcs.src.tolist() == [0, 0, 1] and arcs.dst.tolist() == [1, 2, 2]
    assert arcs.il.tolist() == [3, 5, 0] and arcs.ol.tolist() == [4, 0, 7]
    assert arcs.w.tolist() == [0.5, 1.5, 0.0] and arcs.finals == {2: 0.25}
    again = to_vector_fst(arcs)
    assert again.to_str() == fst.to_str()


def test_self_loops_split_states_entered_by_two_pdfs():
    from asrtrain.lang.fstio import Arcs
    from asrtrain.lang.graph import add_self_loops

    # 0 -pdf0-> 2, 1 -pdf1-> 2, 0 -eps-> 1, 2 -pdf1-> 3 (final): state 2 is entered by two pdfs
    arcs = Arcs(src=np.array([0, 1, 0, 2]), dst=np.array([2, 2, 1, 3]), il=np.array([1, 2, 0, 2]),
                ol=np.array([5, 0, 0, 6]), w=np.zeros(4), finals={3: 0.0}, start=0, num_states=4)
    out = add_self_loops(arcs, np.array([0.5, 0.8]), scale=1.0)
    assert out.num_states == 5
    loops = {(int(s), int(i)) for s, d, i in zip(out.src, out.dst, out.il, strict=True) if s == d}
    assert loops == {(2, 1), (4, 2), (3, 2)}          # state 2 for pdf 0, its copy 4 for pdf 1
    into = {(int(s), int(d)) for s, d, i in zip(out.src, out.dst, out.il, strict=True) if s != d}
    assert (0, 2) in into and (1, 4) in into and (2, 3) in into and (4, 3) in into
    cost = {(int(s), int(d), int(i)): float(w) for s, d, i, w in
            zip(out.src, out.dst, out.il, out.w, strict=True)}
    assert cost[(2, 2, 1)] == pytest.approx(-np.log(0.5))
    assert cost[(4, 3, 2)] == pytest.approx(-np.log(0.2))   # leaving pdf 1's state
    assert out.finals[3] == pytest.approx(-np.log(0.2))

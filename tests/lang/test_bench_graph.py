"""scripts/bench_graph.py's synthetic lang: a valid ARPA of the asked size, a lexicon and a
tree that ``prepare lang``'s graph steps build HCLG from."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import bench_graph_synth

    work = tmp_path_factory.mktemp("bench_graph")
    got = bench_graph_synth.make_lang_inputs(work, words=200, ngrams=1200, pdfs=200,
                                             utterances=60)
    return work, got


def test_sizes_and_lexicon(synth):
    work, got = synth
    import bench_graph_synth

    bigrams, trigrams = bench_graph_synth.split_ngrams(200, 1200)
    assert bigrams == 614 and trigrams == 384                # 998 in the ratio 8 : 5
    assert got["ngrams"] == [202, bigrams, trigrams] and sum(got["ngrams"]) == 1200
    lines = (work / "dict" / "lexicon.txt").read_text().splitlines()
    words = [ln.split()[0] for ln in lines]
    assert len(set(words)) == 200 and 200 < len(lines) == got["prons"] < 245   # ~10% variants
    assert all(2 <= len(ln.split()) - 1 <= 12 for ln in lines)
    assert 123 <= got["pdfs"] <= 200          # 41 phones × 3 states at least


def test_arpa_reads_and_is_normalized(synth):
    import numpy as np

    from asrtrain.lang.trie import read_trie

    work, got = synth
    vocab = {"<eps>": 0, **{f"w{k:07d}": k + 1 for k in range(200)}, "<s>": 201, "</s>": 202}
    trie, _ = read_trie(work / "lm.arpa", vocab)
    assert trie.counts() == got["ngrams"]
    # p(· | h) over the vocabulary sums to one with the back-offs
    words = np.array([*range(1, 201), 202])
    for hist in ([1, 2], [201, 1], [5]):
        h = np.tile(np.array(hist, dtype=np.int32), (words.size, 1))
        total = float((10.0 ** trie.cond_logprob(h, words.astype(np.int32))).sum())
        assert total == pytest.approx(1.0, abs=1e-3)


def test_graph_builds(synth):
    import bench_graph

    from asrtrain.lang.fstio import read_const

    work, _ = synth
    res = bench_graph.build(work)        # kaldilm reads the ARPA (G), then the graph
    assert set(bench_graph.STEPS) <= set(res["steps"])
    arcs = read_const(work / "lang" / "graph" / "HCLG.fst")
    assert (arcs.num_states, int(arcs.src.size)) == tuple(res["sizes"]["HCLG"])
    assert all(x["peak_mb"] > 0 and x["cpu"] >= 0 for x in res["steps"].values())

"""The LM-weight sweep on lattices: one DP for the whole grid against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hand_lattices import all_paths, path_cost, paths_with_words, random_lattice, words_of

from asrtrain.decode.lattice_sweep import best_paths, state_levels

GRID = [(w, p) for w in (1.0, 4.0, 8.0, 12.0, 30.0) for p in (-1.0, 0.0, 0.5, 1.0, 3.0)]


@pytest.mark.parametrize("seed", range(12))
def test_best_path_of_every_setting_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    lat = random_lattice(rng, states=int(rng.integers(2, 10)), extra_arcs=int(rng.integers(0, 14)))
    paths = list(all_paths(lat))
    assert paths
    got = best_paths(lat, GRID)
    for (w, p), path in zip(GRID, got, strict=True):
        costs = sorted((path_cost(lat, arcs, end, w, p), i) for i, (arcs, end) in enumerate(paths))
        assert path is not None
        assert path.cost == pytest.approx(costs[0][0], abs=1e-6)
        if len(costs) == 1 or costs[1][0] - costs[0][0] > 1e-6:  # a unique best path
            arcs, end = paths[costs[0][1]]
            assert tuple(path.words) == words_of(lat, arcs)
            frames = [x - 1 for a in arcs for x in lat.arc_string(a)] + \
                     [x - 1 for x in lat.final_string(end)]
            assert path.pdfs == frames
            starts = []
            t = 0
            for a in arcs:
                if lat.word[a]:
                    starts.append(t)
                t += len(lat.arc_string(a))
            assert path.word_frames == starts


@pytest.mark.parametrize("seed", range(6))
def test_the_sweep_equals_one_best_path_per_setting(seed):
    """The lattice's own single-setting best path (``WordLattice.best_path``) agrees."""
    rng = np.random.default_rng(100 + seed)
    lat = random_lattice(rng, states=30, extra_arcs=80, vocab=20, frames=200)
    for (w, p), path in zip(GRID, best_paths(lat, GRID), strict=True):
        one = lat.best_path(w, p)
        assert path is not None and one is not None
        assert path.cost == pytest.approx(one.cost, abs=1e-6)
        assert path.words == one.words and path.pdfs == one.pdfs and len(path.pdfs) == 200


def test_levels_order_every_arc():
    lat = random_lattice(np.random.default_rng(5), states=40, extra_arcs=120, frames=100)
    lev = state_levels(lat)
    assert lev[0] == 0 and np.all(lev[lat.dst] > lev[lat.src])
    # the longest path: some arc into each non-start state comes from one level below
    for s in range(1, lat.num_states):
        assert lev[s] - 1 in set(lev[lat.src[lat.dst == s]].tolist())


def test_no_complete_path_gives_none():
    lat = random_lattice(np.random.default_rng(1), states=5, extra_arcs=3)
    lat.final_graph[:] = np.inf
    assert best_paths(lat, GRID[:3]) == [None, None, None]


def test_written_like_the_one_best_decoder(mini_lang_dec, tmp_path):
    """hyp/<name>.txt and ctm/<name>.ctm per setting (grid.py's names), that score --sweep
    reads; an utterance without a lattice path is an empty hypothesis, counted."""
    from asrtrain.decode.graph_dir import GraphInfo
    from asrtrain.decode.grid import settings
    from asrtrain.decode.lattice_sweep import write_sweep
    from asrtrain.score.sweep import ScoreOptions
    from asrtrain.score.sweep import sweep as score_sweep

    graph = GraphInfo.load(mini_lang_dec / "graph")
    vocab = sorted(i for i, w in graph.words.items() if i and not w.startswith(("#", "<")))
    lats = {}
    for i in range(4):
        lat = random_lattice(np.random.default_rng(i), states=6, extra_arcs=8, vocab=len(vocab))
        lat.word[:] = np.where(lat.word > 0, np.asarray(vocab)[lat.word - 1], 0)
        lats[f"utt{i}"] = lat
    lats["utt4"] = None
    (tmp_path / "hyp").mkdir()
    (tmp_path / "hyp" / "99.txt").write_text("stale\n")
    lmwts, wips = [5.0, 10.0], [0.0, 1.0]
    stats = write_sweep(lats.items(), graph, graph.pdf_info, lmwts, wips, tmp_path)
    names = [name for _, _, name in settings(lmwts, wips)]
    assert sorted(p.stem for p in (tmp_path / "hyp").iterdir()) == sorted(names)
    assert sorted(p.stem for p in (tmp_path / "ctm").iterdir()) == sorted(names)
    assert stats.no_path == ["utt4"] and stats.utterances == 5
    for (w, p, name) in settings(lmwts, wips):
        lines = (tmp_path / "hyp" / f"{name}.txt").read_text().splitlines()
        assert lines[-1] == "utt4"
        for line, (utt, lat) in zip(lines, list(lats.items())[:4], strict=False):
            path = best_paths(lat, [(w, p)])[0]
            assert line.split() == [utt] + [graph.words[x] for x in path.words]
        ctm = (tmp_path / "ctm" / f"{name}.ctm").read_text().splitlines()
        assert len(ctm) == sum(len(ln.split()) - 1 for ln in lines)
    ref = (tmp_path / "hyp" / "10_0.0.txt").read_text()
    (tmp_path / "ref.txt").write_text(ref)
    score_sweep(tmp_path, ScoreOptions(bootstrap=0))
    assert (tmp_path / "wer_10_0.0").read_text().startswith("%WER 0.00")


def test_on_a_real_hclg_the_sweep_is_faster_decoders_one_best(mini_lang_dec, tmp_path):
    """One lattice search at LM weight 10, then every (weight, penalty) against
    kaldi-decoder's FasterDecoder on the penalised graph at that weight. At the search's
    weight they agree, words and cost. Elsewhere the lattice holds, per word sequence,
    the alignment best at the search's weight (as Kaldi's determinized lattices do): where
    that is FasterDecoder's path they agree again; where it is not, the sweep's path can
    cost no less than FasterDecoder's (which searched the whole graph)."""
    import kaldi_decoder
    import kaldiio

    from asrtrain.decode.ctm import read_best_path
    from asrtrain.decode.latgen import LatticeDecoder, SearchOptions
    from asrtrain.decode.penalty import penalized_hclg

    hclg = mini_lang_dec / "graph" / "HCLG.fst"
    num_pdfs = int((mini_lang_dec / "num_pdfs").read_text())
    grid = [(w, p) for w in (6.0, 8.0, 10.0, 13.0, 16.0) for p in (0.0, 1.0)]
    opts = kaldi_decoder.FasterDecoderOptions(beam=20.0, max_active=10**6)
    fsts = {p: penalized_hclg(hclg, p, tmp_path) for p in (0.0, 1.0)}  # outlive the decoders
    faster = {p: kaldi_decoder.FasterDecoder(fst, opts) for p, fst in fsts.items()}
    ours = LatticeDecoder(hclg, SearchOptions(beam=20.0, max_active=10**6, lattice_beam=12.0))
    rng = np.random.default_rng(3)
    same, words, total, changed = 0, 0, 0, 0
    for utt, pdfs in kaldiio.load_scp_sequential(str(mini_lang_dec / "pdf_ali" / "dev.scp")):
        pdfs = np.asarray(pdfs)
        scores = (rng.normal(0, 8.0, (pdfs.size, num_pdfs))
                  + 12.0 * np.eye(num_pdfs)[pdfs]).astype(np.float32)
        lat, _ = ours.decode(scores, 0.1, ours.columns(num_pdfs), utt)
        swept = best_paths(lat, grid)
        for (w, p), path in zip(grid, swept, strict=True):
            faster[p].decode(kaldi_decoder.DecodableCtc(np.ascontiguousarray(scores / w)))
            ok, best = faster[p].get_best_path()
            assert ok and path is not None and len(path.pdfs) == pdfs.size
            total += 1
            ref = read_best_path(best)
            held = [x for x in paths_with_words(lat, ref.words)
                    if [int(v) - 1 for a in x[0] for v in lat.arc_string(a)]
                    + (lat.final_string(x[1]) - 1).tolist() == ref.pdfs]
            if w == 10.0 or held:
                assert held, (utt, w, p)
                assert path.words == ref.words, (utt, w, p)
                assert path.cost == pytest.approx(ref.cost, abs=1e-2)
                same += 1
            else:
                assert path.cost >= ref.cost - 1e-2
            words += path.words == ref.words
        changed += len({tuple(x.words) for x in swept if x is not None}) > 1
    assert changed  # the weights and penalties do change some utterance's words
    # alignments move with the weight under these noisy scores (32 of the 50 best paths are
    # FasterDecoder's exactly), the words far less: 48 of 50 here
    assert same >= total // 2 and words >= 0.9 * total

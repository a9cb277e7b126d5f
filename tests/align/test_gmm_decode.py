"""The ladder's GMMs as decoders: a graph on a rung's tree (``prepare gmm-graph``),
``decode`` with a rung on a features dir, SAT's two passes (``--first-pass``), the SAT
features for the network (``prepare fmllr-feats``), the back-off pdfs' GMMs, and the
refusals (a rung on another tree's graph, a first pass of another tree, not a rung)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ladder_runs import cli  # noqa: E402

WER = re.compile(r"%WER (\d+\.\d\d)")


@pytest.fixture(scope="module")
def graphs(gmm_graphs: Path) -> Path:
    """The mono and SAT rungs' graphs (tests/conftest.py, shared with tests/transcribe)."""
    return gmm_graphs


@pytest.fixture(scope="module")
def decoded(graphs: Path, one_process: Path, tiny_mfcc: Path, tiny_corpus: Path,
            tmp_path_factory) -> tuple[Path, dict[str, float]]:
    """The test split decoded once by mono, LDA+MLLT and SAT (from the LDA+MLLT pass)."""
    out = tmp_path_factory.mktemp("gmm_decodes")
    models, text, feats = one_process / "models", tiny_corpus / "test" / "text", tiny_mfcc / "test"
    wer = {"mono": decode(models / "mono.pt", graphs / "mono", feats, out / "mono", text),
           "lda": decode(models / "lda.pt", graphs / "sat", feats, out / "lda", text)}
    wer["sat"] = decode(models / "sat.pt", graphs / "sat", feats, out / "sat", text,
                        "--first-pass", out / "lda")
    return out, wer


def decode(model: Path, graph: Path, feats: Path, out: Path, text: Path, *extra: object
           ) -> float:
    proc = cli("decode", model, graph, feats, out, "--text", text, "--lattices", "--acwt",
               "0.0833", "--lmwt", "6,10,14", "--nj", "2", "--beam", "10",
               "--max-active", "1000", "--lattice-beam", "5", *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = cli("score", "--sweep", out)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return float(WER.search(proc.stdout.splitlines()[-1]).group(1))


@pytest.mark.slow  # make test runs every rung and SAT's two passes on yesno (tests/recipes)
def test_each_rung_decodes_and_sat_adapts_from_the_first_pass(
        decoded: tuple[Path, dict[str, float]], tiny_mfcc: Path, tiny_corpus: Path):
    from asrtrain.decode.first_pass import read_transforms

    out, wer = decoded
    mono, lda, sat = wer["mono"], wer["lda"], wer["sat"]
    text = tiny_corpus / "test" / "text"
    # a minute of speech and a large-vocabulary LM: the rungs must decode every utterance
    # (their WER on real speech is the custom recipe's yesno test's to check)
    assert all(w <= 100.0 for w in (mono, lda, sat)), (mono, lda, sat)
    utts = {ln.split()[0] for ln in text.read_text().splitlines()}
    for rung in ("mono", "lda", "sat"):
        hyps = [ln.split() for ln in (out / rung / "hyp" / "10.txt").read_text().splitlines()]
        assert {h[0] for h in hyps} == utts and sum(len(h) > 1 for h in hyps) >= len(utts) / 2
    spk = {ln.split()[1] for ln in (tiny_mfcc / "test" / "utt2spk").read_text().splitlines()}
    trans = read_transforms(out / "sat" / "trans.scp")
    assert set(trans) == spk
    assert all(w.shape == (40, 41) and np.isfinite(w).all() for w in trans.values())
    assert any(not np.allclose(w, np.eye(40, 41), atol=1e-3) for w in trans.values())


@pytest.mark.slow  # make test runs every rung and SAT's two passes on yesno (tests/recipes)
def test_sat_features_for_the_network_from_the_first_pass(
        decoded: tuple[Path, dict[str, float]], one_process: Path, tiny_mfcc: Path,
        tmp_path: Path):
    import kaldiio

    from asrtrain.align.saved import load_rung
    from asrtrain.decode.first_pass import read_transforms

    models, out = one_process / "models", decoded[0]
    proc = cli("prepare", "fmllr-feats", models / "sat.pt", tiny_mfcc / "test", tmp_path / "f",
               "--transforms", out / "sat" / "trans.scp")
    assert proc.returncode == 0, proc.stderr[-2000:]
    feats = dict(kaldiio.load_scp_sequential(str(tmp_path / "f" / "feats.scp")))
    rung = load_rung(models / "sat.pt")
    trans = read_transforms(out / "sat" / "trans.scp")
    utt2spk = dict(ln.split() for ln in (tiny_mfcc / "test" / "utt2spk").read_text().splitlines())
    utt = sorted(feats)[0]
    from asrtrain.align.feats import FeatTables

    raw = FeatTables(tiny_mfcc / "test", utt2spk).read(utt)
    rung.front.fmllr = {utt2spk[utt]: trans[utt2spk[utt]]}
    assert np.allclose(feats[utt], rung.front.apply(raw, utt2spk[utt]), atol=1e-4)
    assert (tmp_path / "f" / "utt2spk").is_file()


def test_a_rung_on_another_trees_graph_is_refused(graphs: Path, one_process: Path,
                                                  tiny_mfcc: Path, tmp_path: Path):
    proc = cli("decode", one_process / "models" / "lda.pt", graphs / "mono", tiny_mfcc / "test",
               tmp_path / "x", "--nj", "1")
    assert proc.returncode != 0
    assert "prepare gmm-graph" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.slow  # make test runs every rung and SAT's two passes on yesno (tests/recipes)
def test_a_first_pass_of_another_tree_is_refused(decoded: tuple[Path, dict[str, float]],
                                                 graphs: Path, one_process: Path,
                                                 tiny_mfcc: Path, tmp_path: Path):
    proc = cli("decode", one_process / "models" / "sat.pt", graphs / "sat", tiny_mfcc / "test",
               tmp_path / "sat", "--first-pass", decoded[0] / "mono", "--lattices", "--nj", "1")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "first pass was decoded on a graph of tree" in last, last


def test_not_a_rung_is_refused_in_one_line(gmm_lang: Path, tmp_path: Path):
    bad = tmp_path / "final.pt"
    torch.save({"model": {}, "meta": {}}, bad)
    proc = cli("prepare", "gmm-graph", gmm_lang, bad, tmp_path / "g")
    assert proc.returncode != 0
    assert "not an aligner model" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "g").exists()


def test_backoff_pdfs_get_their_leaves_pooled_frames():
    from asrtrain.align.am import AcousticModel
    from asrtrain.align.backoff import backed_off, fill_backoffs
    from asrtrain.lang.hmm import Topology
    from asrtrain.lang.tree import ContextTree

    row = [{0: 0.5, 1: 0.5}]
    topo = Topology(num_states={1: 1, 2: 1}, trans={1: row, 2: row})
    # phone 2: CI pdf 1, biphone (2, 0, ctx 1) pdf 2, triphones 3 and 4; phone 1: pdf 0
    tree = ContextTree(topo=topo, ci_phones=[1], ci={(1, 0): 0, (2, 0): 1}, bi={(2, 0, 1): 2},
                       tri={(1, 2, 1, 0): 3, (2, 2, 1, 0): 4},
                       pdf_info=[(1, 0), (2, 0), (2, 0), (2, 0), (2, 0)])
    under = backed_off(tree)
    assert sorted(under[1]) == [2, 3, 4] and under[2] == [3] and under[0] == []
    model = AcousticModel.flat(5, torch.zeros(2), torch.ones(2))
    stats = model.zero_stats()
    x3 = torch.tensor([[1.0, 2.0], [3.0, 2.0]])
    x4 = torch.tensor([[5.0, 8.0]])
    model.accumulate(stats, torch.cat([x3, x4]), np.array([3, 3, 4]))
    floor = torch.full((2,), 1e-3)
    model.update(stats, floor)
    assert fill_backoffs(model, stats, under, floor) == 2
    pooled = torch.cat([x3, x4])
    assert torch.allclose(model.means[1, 0], pooled.mean(0).double())
    assert torch.allclose(model.vars[1, 0], pooled.var(0, unbiased=False).double())
    assert torch.allclose(model.means[2, 0], x3.mean(0).double())   # pdf 2 backs off for 3 only
    assert torch.equal(model.means[0, 0], torch.zeros(2, dtype=torch.float64))  # nothing under it


@pytest.mark.slow  # make test runs every rung and SAT's two passes on yesno (tests/recipes)
def test_a_first_pass_without_paths_falls_back_counted(decoded: tuple[Path, dict[str, float]],
                                                       one_process: Path, tiny_mfcc: Path,
                                                       tmp_path: Path, caplog):
    """Utterances the first pass left without a path add no frames (counted, named); a
    speaker left with none keeps the identity, said in the log."""
    import logging
    import shutil

    from asrtrain.decode.first_pass import estimate_transforms
    from asrtrain.decode.gmm_scorer import GmmScorer
    from asrtrain.decode.lattice import WordLattice
    from asrtrain.decode.lattice_io import read_archive, write_archive

    models = one_process / "models"
    utt2spk = dict(ln.split() for ln in (tiny_mfcc / "test" / "utt2spk").read_text().splitlines())
    speakers = sorted(set(utt2spk.values()))
    gone = {u for u, s in utt2spk.items() if s == speakers[0]}   # this speaker's every path
    first = tmp_path / "first"
    shutil.copytree(decoded[0] / "lda", first)
    for arc in sorted(first.glob("lat/lat.*.gz")):
        kept = [(u, WordLattice.from_arcs(0, 0, [], {}) if u in gone else lat)
                for u, lat in read_archive(arc)]
        write_archive(arc, kept)
    scorer = GmmScorer(models / "sat.pt", tiny_mfcc / "test", None)
    with caplog.at_level(logging.INFO, logger="asrtrain"):
        trans, report = estimate_transforms(scorer, first, 12.0)
    assert report.figures()["no_path"] == len(gone)
    assert np.array_equal(trans[speakers[0]], np.eye(40, 41))
    assert f"speaker {speakers[0]}: no (identity)" in caplog.text
    assert "have no path in the first pass" in caplog.text

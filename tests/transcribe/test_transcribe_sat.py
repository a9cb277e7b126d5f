"""A network reading the SAT first pass's fMLLR (``--fmllr-source sat``) exported and run on
audio: export finds the first pass from the records (the test archive's fmllr-feats, its
SAT decode, that decode's LDA+MLLT first pass) and carries both GMMs and their graph;
transcribe runs the first pass per speaker and gives the words of the recipe's path
(decode LDA → decode SAT --first-pass → prepare fmllr-feats → archive → decode). A model
dir without its SAT GMM is refused in one line.

The ladder, its lang and graphs are the session's (tests/conftest.py, shared with
tests/align); this module adds the two GMM decodes, the archives, a small network and its
decode (about 15 s on 2 cores), then each test takes a few seconds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from transcribe_helpers import GRID, SEARCH, run

from asrtrain.cli.main import cli

#: The recipe's GMM search (hybrid.sh: gmm_acwt, gmm_max_active, gmm_lattice_beam), narrowed.
GMM_SEARCH = ["--acwt", "0.0833", "--beam", "10", "--max-active", "1000", "--lattice-beam", "4"]


@pytest.fixture(scope="module")
def sat_exp(one_process: Path, gmm_lang: Path, gmm_graphs: Path, tiny_mfcc: Path,
            tiny_corpus: Path, trained_exp: Path, tmp_path_factory) -> Path:
    """A recipe's work dir with --fmllr-source sat, its paths relative as the recipe's are
    (the records say ``exp/gmm/...``): gmm/decode_{lda,sat}_test, fmllr_sat/test,
    archives, blstm (decode_test scored)."""
    import os

    work = tmp_path_factory.mktemp("sat_exp")
    (work / "ali").symlink_to(one_process)
    (work / "mfcc").symlink_to(tiny_mfcc)
    (work / "graph_tri").symlink_to(gmm_graphs / "sat")
    logmel, text = trained_exp / "data" / "logmel", tiny_corpus / "test" / "text"
    here = Path.cwd()
    os.chdir(work)
    try:
        run("decode", "ali/models/lda.pt", "graph_tri", "mfcc/test", "gmm/decode_lda_test",
            "--nj", "1", "--lattices", "--lmwt", "10", *GMM_SEARCH, "--text", text)
        run("decode", "ali/models/sat.pt", "graph_tri", "mfcc/test", "gmm/decode_sat_test",
            "--nj", "1", "--lattices", "--lmwt", "10", *GMM_SEARCH, "--text", text,
            "--first-pass", "gmm/decode_lda_test")
        run("prepare", "fmllr-feats", "ali/models/sat.pt", "mfcc/test", "fmllr_sat/test",
            "--transforms", "gmm/decode_sat_test/trans.scp")
        num_pdfs = (gmm_lang / "num_pdfs").read_text().strip()
        for split, fmllr in (("train", "ali/fmllr/train"), ("test", "fmllr_sat/test")):
            targets = (["--ali", gmm_lang / "pdf_ali/train.scp", "--num-pdfs", num_pdfs]
                       if split == "train" else [])
            run("prepare", "archive", f"archives/{split}.h5",
                "--stream", f"fmllr={work / fmllr / 'feats.scp'}",
                "--stream", f"logmel={logmel / split / 'feats.scp'}",
                "--cmvn", f"logmel={logmel / split / 'cmvn.scp'}",
                "--utt2spk", tiny_corpus / split / "utt2spk", *targets)
        run("train", "archives/train.h5", "blstm", "--epochs", "12", "--batch", "8",
            "--base-batch", "8", "--lr", "0.5", "--warmup-epochs", "0", "--hidden", "64",
            "--layers", "1", "--proj", "0", "--threads", "1", "--no-resume")
        run("decode", "blstm/final.pt", gmm_lang / "graph", "archives/test.h5",
            "blstm/decode_test", "--nj", "1", "--lattices", *GRID, *SEARCH, "--text", text)
        run("score", "--sweep", "blstm/decode_test")  # a pick (on test: the words matter here)
        run("export", "blstm", "model", "--pick-on", "blstm/decode_test")
    finally:
        os.chdir(here)
    return work


def _table(path: Path) -> dict[str, list[str]]:
    rows = (line.split() for line in path.read_text().splitlines() if line.strip())
    return {r[0]: r[1:] for r in rows}


def test_export_carries_the_first_pass_found_in_the_records(sat_exp: Path):
    model = sat_exp / "model"
    settings = json.loads((model / "settings.json").read_text())
    assert [s["kind"] for s in settings["streams"]] == ["sat", "features"]
    sat = settings["streams"][0]
    assert sat["features"]["type"] == "mfcc" and sat["cmvn"] is None
    stats = json.loads((sat_exp / "gmm/decode_sat_test/decode_stats.json").read_text())
    assert sat["options"]["lmwt"] == pytest.approx(stats["first_pass_lmwt"])   # 1/0.0833
    assert sat["options"]["acwt"] == 0.0833 and sat["options"]["max_active"] == 1000
    assert "decode_lda_test" in sat["options"]["picked"]
    files = json.loads((model / "manifest.json").read_text())["files"]
    assert {"sat/lda.pt", "sat/sat.pt", "sat/graph/HCLG.fst", "sat/graph/tree"} <= set(files)
    assert (model / "sat/sat.pt").read_bytes() == (sat_exp / "ali/models/sat.pt").read_bytes()


def test_transcribe_gives_the_words_of_the_recipes_path(sat_exp: Path, tiny_corpus: Path,
                                                        tmp_path: Path):
    picked = (sat_exp / "blstm/decode_test/best_wer").read_text().split()[-1].split("wer_")[-1]
    ref = _table(sat_exp / f"blstm/decode_test/hyp/{picked}.txt")
    assert sum(len(w) for w in ref.values()) >= 4
    out = tmp_path / "got"
    res = CliRunner().invoke(cli, ["transcribe", str(sat_exp / "model"),
                                   str(tiny_corpus / "test"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert _table(out / "text") == ref
    assert "SAT first pass" in res.stderr


def test_the_first_pass_gives_the_features_of_fmllr_feats(sat_exp: Path, tiny_mfcc: Path,
                                                          tmp_path: Path):
    import kaldiio

    from asrtrain.transcribe.bundle import ModelBundle
    from asrtrain.transcribe.first_pass import SatFirstPass

    bundle = ModelBundle.open(sat_exp / "model")
    first = SatFirstPass(bundle.stream_model("sat"), bundle.settings.streams[0])
    scp, figures = first.features(tiny_mfcc / "test", tmp_path / "sat")
    ours = dict(kaldiio.load_scp_sequential(str(scp)))
    theirs = dict(kaldiio.load_scp_sequential(str(sat_exp / "fmllr_sat/test/feats.scp")))
    assert ours.keys() == theirs.keys()
    assert all(np.array_equal(ours[u], theirs[u]) for u in ours)
    stats = json.loads((sat_exp / "gmm/decode_sat_test/decode_stats.json").read_text())
    assert figures["transforms"] == stats["transforms"] and figures["no_path"] == 0


def test_a_model_dir_without_its_sat_gmm_is_refused_in_one_line(sat_exp: Path, tiny_corpus: Path,
                                                                tmp_path: Path, one_error):
    model = tmp_path / "model"
    shutil.copytree(sat_exp / "model", model)
    (model / "sat/sat.pt").unlink()
    res = CliRunner().invoke(cli, ["transcribe", str(model), str(tiny_corpus / "test")])
    line = one_error(res.output, 1, res.exit_code, "damaged model: sat/sat.pt is missing", str(model))
    assert res.output.strip().splitlines()[-1] == line   # refused before anything is transcribed
    manifest = json.loads((model / "manifest.json").read_text())
    del manifest["files"]["sat/sat.pt"]          # a manifest that does not list it either
    (model / "manifest.json").write_text(json.dumps(manifest))
    res = CliRunner().invoke(cli, ["transcribe", str(model), str(tiny_corpus / "test")])
    line = one_error(res.output, 1, res.exit_code, "the manifest lists no sat/sat.pt", str(model))
    assert res.output.strip().splitlines()[-1] == line


def test_export_without_a_first_pass_to_find_says_which_option(sat_exp: Path, tmp_path: Path,
                                                                one_error):
    exp = tmp_path / "blstm"
    exp.mkdir()
    shutil.copy(sat_exp / "blstm/final.pt", exp / "final.pt")
    res = CliRunner().invoke(cli, ["export", str(exp), str(tmp_path / "m"), "--lmwt", "10"])
    one_error(res.output, 1, res.exit_code, "SAT fMLLR", "give --first-pass DIR")
    res = CliRunner().invoke(cli, ["export", str(exp), str(tmp_path / "m"), "--lmwt", "10",
                                   "--first-pass", str(sat_exp / "gmm/decode_sat_test")])
    assert res.exit_code == 0, res.output
    settings = json.loads((tmp_path / "m/settings.json").read_text())
    assert settings["streams"][0]["options"]["lmwt"] == pytest.approx(1 / 0.0833)


def test_first_pass_options_are_refused_for_a_network_without_sat_input(trained_exp: Path,
                                                                        tmp_path: Path,
                                                                        one_error):
    res = CliRunner().invoke(cli, ["export", str(trained_exp / "exp/blstm"), str(tmp_path / "m"),
                                   "--first-pass", str(tmp_path)])
    one_error(res.output, 1, res.exit_code, "--first-pass", "this one reads features")
    assert not (tmp_path / "m").exists()

"""Word insertion penalty: the penalised graph copy, its effect on hypotheses, output names."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.core.errors import ConfigError, InputError
from asrtrain.decode.decoder import DecodeConfig, decode
from asrtrain.decode.grid import parse_setting, parse_wip, wip_name
from asrtrain.decode.penalty import add_word_penalty, const_bytes, penalized_hclg
from asrtrain.lang.fstio import read_const, to_arcs

WIPS = [-5.0, 0.0, 2.0, 5.0, 20.0]


def _counts(path) -> dict[str, int]:
    return {ln.split()[0]: len(ln.split()) - 1 for ln in path.read_text().splitlines()}


@pytest.fixture(scope="module")
def swept(mini_lang_dec, tmp_path_factory):
    """Oracle dev decoded at LM weights 10 and 30 (weak acoustics) over WIPS."""
    out = tmp_path_factory.mktemp("wip") / "d"
    decode(DecodeConfig(graph=mini_lang_dec / "graph", out=out, nj=1, lmwts=[10.0, 30.0],
                        wips=WIPS, oracle=mini_lang_dec / "pdf_ali" / "dev.scp"))
    return out


def test_penalised_copy_adds_the_penalty_to_word_arcs_only(mini_lang_dec, tmp_path):
    hclg = mini_lang_dec / "graph" / "HCLG.fst"
    base = read_const(hclg)
    buf = const_bytes(hclg, tmp_path)
    changed = add_word_penalty(buf, 0.75)
    (tmp_path / "p.fst").write_bytes(buf)
    copy = read_const(tmp_path / "p.fst")
    words = base.ol != 0
    assert changed == int(words.sum()) > 0
    assert np.array_equal(copy.il, base.il) and np.array_equal(copy.ol, base.ol)
    assert np.array_equal(copy.src, base.src) and np.array_equal(copy.dst, base.dst)
    assert np.allclose(copy.w[words], base.w[words] + 0.75, atol=1e-5)
    assert np.array_equal(copy.w[~words], base.w[~words])
    assert copy.finals == base.finals and copy.start == base.start
    # what the decoder gets: the same arcs through kaldifst, also from a VectorFst graph
    import kaldifst

    vector = tmp_path / "vector" / "HCLG.fst"
    vector.parent.mkdir()
    kaldifst.StdVectorFst(kaldifst.StdConstFst.read(str(hclg))).write(str(vector))
    for graph in (hclg, vector):
        loaded = to_arcs(penalized_hclg(graph, 0.75, tmp_path))
        order = np.lexsort((loaded.il, loaded.src))
        assert np.array_equal(loaded.ol[order], copy.ol)
        assert np.allclose(loaded.w[order], copy.w, atol=1e-6)
    assert not list(tmp_path.glob("tmp*"))                 # the copies' files are gone


def test_a_larger_penalty_never_adds_words(swept):
    for w in ("10", "30"):
        counts = [_counts(swept / "hyp" / f"{w}_{wip_name(p)}.txt") for p in WIPS]
        for utt in counts[0]:
            row = [c[utt] for c in counts]
            assert row == sorted(row, reverse=True), (w, utt, row)
    low, high = (sum(_counts(swept / "hyp" / f"30_{p}.txt").values()) for p in ("0.0", "5.0"))
    assert high < low                                      # with weak acoustics it bites


def test_names_keep_lmwt_alone_with_penalty_zero_only(swept, mini_lang_dec, tmp_path):
    names = sorted(p.stem for p in (swept / "hyp").iterdir())
    assert names == sorted(f"{w}_{p}" for w in ("10", "30")
                           for p in ("-5.0", "0.0", "2.0", "5.0", "20.0"))
    assert parse_setting("30_-5.0") == (30.0, -5.0) and parse_setting("7.5") == (7.5, 0.0)
    plain = tmp_path / "plain"
    decode(DecodeConfig(graph=mini_lang_dec / "graph", out=plain, nj=1, lmwts=[10.0, 30.0],
                        oracle=mini_lang_dec / "pdf_ali" / "dev.scp"))
    assert sorted(p.name for p in (plain / "hyp").iterdir()) == ["10.txt", "30.txt"]
    for w in ("10", "30"):                                 # penalty 0 is the graph itself
        assert (plain / "hyp" / f"{w}.txt").read_text() == \
            (swept / "hyp" / f"{w}_0.0.txt").read_text()
    # a decode over penalties then without: the other names go (a sweep reads them all)
    decode(DecodeConfig(graph=mini_lang_dec / "graph", out=plain, nj=1, lmwts=[10.0],
                        wips=[0.0, 1.0], oracle=mini_lang_dec / "pdf_ali" / "dev.scp"))
    assert sorted(p.name for p in (plain / "hyp").iterdir()) == ["10_0.0.txt", "10_1.0.txt"]


def test_parse_wip():
    assert parse_wip(None) == [0.0] and parse_wip("") == [0.0]
    assert parse_wip("0.0,0.5,1.0") == [0.0, 0.5, 1.0] and parse_wip("-1") == [-1.0]
    with pytest.raises(ConfigError, match="penalties must be finite numbers"):
        parse_wip("0,inf")
    with pytest.raises(ConfigError, match="a penalty is given twice"):
        parse_wip("0,0.0")
    with pytest.raises(ConfigError, match="expected a number or a list A,B,C"):
        parse_wip("0:1")


def test_cli_wip(mini_lang_dec, tmp_path):
    base = ["decode", "-", str(mini_lang_dec / "graph"), "-", str(tmp_path / "out"), "--nj", "1",
            "--oracle", str(mini_lang_dec / "pdf_ali" / "dev.scp"), "--lmwt", "10"]
    res = CliRunner().invoke(cli, [*base, "--wip", "0.0,0.5"])
    assert res.exit_code == 0, res.output
    assert "penalties 0.0, 0.5" in res.output
    assert sorted(p.name for p in (tmp_path / "out" / "hyp").iterdir()) == ["10_0.0.txt",
                                                                             "10_0.5.txt"]
    res = CliRunner().invoke(cli, [*base, "--wip", "x"])
    assert res.exit_code == 2 and "expected a number or a list A,B,C" in res.output


def test_a_truncated_graph_is_named(mini_lang_dec, tmp_path):
    hclg = tmp_path / "HCLG.fst"
    data = (mini_lang_dec / "graph" / "HCLG.fst").read_bytes()
    hclg.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=f"{hclg}: OpenFst cannot read this const FST"):
        penalized_hclg(hclg, 0.5, tmp_path / "work")

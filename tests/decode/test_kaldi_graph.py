"""Decoding a Kaldi-style graph: transition-id input labels, ``--tid2pdf``, no info.json.

The Kaldi graph is our own HCLG relabelled the way Kaldi's transition model labels it
(``asrtrain.decode.kaldi_style``): every pdf gets two transition-ids (self-loop and
forward, numbered in a shuffled order), each arc takes its pdf's self-loop id when it is
a self-loop, else the forward id. The search space and costs are unchanged, so the
hypotheses must be the same as ours.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from asrtrain.core.errors import InputError
from asrtrain.decode.decoder import DecodeConfig, decode
from asrtrain.decode.kaldi_graph import expand, fst_type, read_tid2pdf
from asrtrain.decode.kaldi_style import write_kaldi_graph, write_tid2pdf


def _kaldi_graph(lang: Path, out: Path, fst_kind: str = "const") -> tuple[Path, np.ndarray]:
    tid2pdf = write_kaldi_graph(lang, out, fst_kind)
    return out, tid2pdf


@pytest.fixture(scope="module")
def kaldi(mini_lang_dec, tmp_path_factory):
    work = tmp_path_factory.mktemp("kaldi_graph")
    graph, tid2pdf = _kaldi_graph(mini_lang_dec, work / "graph")
    full = write_tid2pdf(work / "tid2pdf_phones", mini_lang_dec, tid2pdf, with_phones=True)
    short = write_tid2pdf(work / "tid2pdf", mini_lang_dec, tid2pdf, with_phones=False)
    return graph, full, short, tid2pdf


@pytest.fixture(scope="module")
def ours_oracle(mini_lang_dec, mini_corpus_dec, tmp_path_factory):
    out = tmp_path_factory.mktemp("ours") / "oracle"
    decode(DecodeConfig(graph=mini_lang_dec / "graph", out=out, oracle=mini_lang_dec / "pdf_ali/dev.scp",
                        nj=1, lmwts=[8.0, 12.0]))
    return out


def _read(out: Path, kind: str, w: str) -> list[str]:
    ext = "txt" if kind == "hyp" else "ctm"
    return (out / kind / f"{w}.{ext}").read_text().splitlines()


def test_expand_is_one_gather_with_column_k_minus_1_holding_pdf_k(kaldi):
    _, _, short, tid2pdf = kaldi
    tmap = read_tid2pdf(short)
    scores = np.random.default_rng(0).normal(size=(7, int(tid2pdf.max()) + 1)).astype(np.float32)
    wide = expand(scores, tmap)
    assert wide.shape == (7, len(tid2pdf) - 1) and wide.flags["C_CONTIGUOUS"]
    for k in (1, 2, len(tid2pdf) - 1):
        np.testing.assert_array_equal(wide[:, k - 1], scores[:, tid2pdf[k]])


@pytest.mark.parametrize("kind", ["const", "vector"])
def test_oracle_on_kaldi_graph_matches_our_graph(kind, kaldi, mini_lang_dec, ours_oracle, tmp_path,
                                                 caplog):
    graph, full, _, tid2pdf = kaldi
    if kind == "vector":
        graph, _ = _kaldi_graph(mini_lang_dec, tmp_path / "vgraph", "vector")
    assert fst_type(graph / "HCLG.fst") == kind
    assert not (graph / "info.json").exists() and not (graph / "tree").exists()
    out = tmp_path / "kaldi"
    with caplog.at_level(logging.WARNING, logger="asrtrain"):
        figures = decode(DecodeConfig(graph=graph, out=out, oracle=mini_lang_dec / "pdf_ali/dev.scp",
                                      nj=1, lmwts=[8.0, 12.0], tid2pdf=full))
    assert figures["utterances"] == 5 and not figures["failed"] and figures["not_final"] == 0
    for w in ("8", "12"):
        assert _read(out, "hyp", w) == _read(ours_oracle, "hyp", w)
        # phones and HMM states from the map + Kaldi's align_lexicon.int: the same word times
        assert _read(out, "ctm", w) == _read(ours_oracle, "ctm", w)
    warnings = [r.getMessage() for r in caplog.records if "cannot verify" in r.getMessage()]
    assert len(warnings) == 1 and "Kaldi graph" in warnings[0]


def test_map_without_phones_falls_back_on_label_frames(kaldi, mini_lang_dec, ours_oracle, tmp_path):
    graph, _, short, _ = kaldi
    out = tmp_path / "kaldi"
    decode(DecodeConfig(graph=graph, out=out, oracle=mini_lang_dec / "pdf_ali/dev.scp", nj=2,
                        lmwts=[12.0], tid2pdf=short))
    assert _read(out, "hyp", "12") == _read(ours_oracle, "hyp", "12")
    ctm = [ln.split() for ln in _read(out, "ctm", "12")]
    ref = [ln.split() for ln in _read(ours_oracle, "ctm", "12")]
    assert [(r[0], r[4]) for r in ctm] == [(r[0], r[4]) for r in ref]
    for utt in {r[0] for r in ctm}:
        rows = [r for r in ctm if r[0] == utt]
        starts = [float(r[2]) for r in rows]
        assert starts == sorted(starts) and all(float(r[3]) > 0 for r in rows)
        # each word starts where its label is emitted: before its true end
        truth = [r for r in ref if r[0] == utt]
        assert all(s < float(t[2]) + float(t[3]) for s, t in zip(starts, truth, strict=True))


def test_model_on_kaldi_graph_matches_our_graph(trained, kaldi, mini_lang_dec, tmp_path):
    final, dev, _ = trained
    graph, full, _, _ = kaldi
    (graph / "num_pdfs").unlink()                 # a graph without it: the model's outputs count
    try:
        outs = {}
        for name, g, m in (("ours", mini_lang_dec / "graph", None), ("kaldi", graph, full)):
            outs[name] = tmp_path / name
            decode(DecodeConfig(graph=g, out=outs[name], model=final, data=dev, nj=1,
                                lmwts=[10.0], tid2pdf=m))
    finally:
        (graph / "num_pdfs").write_text(f"{int((mini_lang_dec / 'num_pdfs').read_text())}\n")
    assert _read(outs["kaldi"], "hyp", "10") == _read(outs["ours"], "hyp", "10")
    assert len(_read(outs["kaldi"], "hyp", "10")) == 5


def test_kaldi_graph_needs_the_map(kaldi, mini_lang_dec, tmp_path):
    graph, _, _, _ = kaldi
    with pytest.raises(InputError, match="give --tid2pdf"):
        decode(DecodeConfig(graph=graph, out=tmp_path / "d", oracle=mini_lang_dec / "pdf_ali/dev.scp"))


def test_pdf_beyond_the_model_is_a_one_line_error(trained, kaldi, tmp_path):
    from asrtrain.cli.main import cli

    final, dev, _ = trained
    graph, _, short, tid2pdf = kaldi
    rows = short.read_text().splitlines()
    num_pdfs = int(tid2pdf.max()) + 1
    bad = tmp_path / "tid2pdf"
    bad.write_text("\n".join(rows[:-1] + [f"{rows[-1].split()[0]} {num_pdfs}"]) + "\n")
    res = CliRunner().invoke(cli, ["decode", str(final), str(graph), str(dev), str(tmp_path / "d"),
                                    "--tid2pdf", str(bad), "--nj", "1", "--lmwt", "10"])
    assert res.exit_code == 1
    msg = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert len(msg) == 1 and str(bad) in msg[0]
    assert f"maps to pdf {num_pdfs}, but the model has {num_pdfs} outputs" in msg[0]


def test_map_errors(kaldi, tmp_path):
    _, _, short, _ = kaldi
    rows = short.read_text().splitlines()
    gap = tmp_path / "gap"
    gap.write_text("\n".join(r for r in rows if r.split()[0] != "5") + "\n")
    with pytest.raises(InputError, match="transition-id 5 is missing"):
        read_tid2pdf(gap)
    dup = tmp_path / "dup"
    dup.write_text("\n".join(rows + [rows[0]]) + "\n")
    with pytest.raises(InputError, match="repeated"):
        read_tid2pdf(dup)
    junk = tmp_path / "junk"
    junk.write_text("1 x\n")
    with pytest.raises(InputError, match="line 1: expected 'transition-id pdf-id"):
        read_tid2pdf(junk)


def test_graph_with_labels_beyond_the_map_is_refused(kaldi, mini_lang_dec, tmp_path):
    from asrtrain.decode.kaldi_graph import max_ilabel

    graph, _, short, _ = kaldi
    rows = short.read_text().splitlines()
    top = max_ilabel(graph / "HCLG.fst")
    assert top is not None and top > 1
    cut = tmp_path / "cut"
    cut.write_text("\n".join(r for r in rows if int(r.split()[0]) < top) + "\n")
    with pytest.raises(InputError, match=f"the graph has input label {top}, the map only {top - 1}"):
        decode(DecodeConfig(graph=graph, out=tmp_path / "d", oracle=mini_lang_dec / "pdf_ali/dev.scp",
                            tid2pdf=cut))


def test_cli_decodes_a_kaldi_graph_dir_and_warns_once(kaldi, mini_lang_dec, ours_oracle, tmp_path):
    from asrtrain.cli.main import cli

    graph, full, _, _ = kaldi
    out = tmp_path / "d"
    res = CliRunner().invoke(cli, ["decode", "-", str(graph), "-", str(out), "--oracle",
                                   str(mini_lang_dec / "pdf_ali/dev.scp"), "--tid2pdf", str(full),
                                   "--nj", "2", "--lmwt", "8,12"])
    assert res.exit_code == 0, res.output
    assert _read(out, "hyp", "12") == _read(ours_oracle, "hyp", "12")
    logs = "".join(p.read_text() for p in (out / "log").glob("*.log"))
    assert logs.count("is a Kaldi graph (no info.json): cannot verify") == 1


def test_phone_segments_follow_kaldi_topologies():
    from asrtrain.decode.ctm import phone_segments

    info = [(5, 0), (5, 1), (5, 2), (5, 3), (7, 0), (7, 1), (7, 2)]     # label-1 -> (phone, state)
    # Kaldi's silence moves back among states 1-3 inside one phone: still one segment
    assert phone_segments([0, 1, 2, 1, 3, 2, 3], info) == [(5, 0, 7)]
    # the same phone twice (across a word boundary) re-enters state 0
    assert phone_segments([4, 5, 6, 4, 4, 6, 0], info) == [(7, 0, 3), (7, 3, 3), (5, 6, 1)]


def test_kaldi_style_copy_relabels_every_arc_through_its_pdf(kaldi, mini_lang_dec):
    from asrtrain.lang.fstio import read_const

    graph, _, _, tid2pdf = kaldi
    ours, theirs = read_const(mini_lang_dec / "graph/HCLG.fst"), read_const(graph / "HCLG.fst")
    key = np.lexsort((ours.dst, ours.ol, ours.src)), np.lexsort((theirs.dst, theirs.ol, theirs.src))
    a, b = (ours.il[key[0]], ours.src[key[0]]), (theirs.il[key[1]], theirs.src[key[1]])
    np.testing.assert_array_equal(a[1], b[1])
    eps = a[0] == 0
    np.testing.assert_array_equal(b[0][eps], 0)
    np.testing.assert_array_equal(tid2pdf[b[0][~eps]], a[0][~eps] - 1)   # pdf(tid) = ilabel - 1
    assert np.sort(np.unique(b[0][~eps])).size > np.unique(a[0][~eps]).size  # both tids used


def test_transition_id_zero_is_refused(tmp_path):
    bad = tmp_path / "zero"
    bad.write_text("0 3\n1 4\n")
    with pytest.raises(InputError, match="transition-id 0: transition-ids start at 1"):
        read_tid2pdf(bad)

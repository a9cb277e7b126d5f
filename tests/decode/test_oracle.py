"""Decoding from pdf alignments (oracle scores): words, CTM times, outputs, bad input."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.decode.decoder import DecodeConfig, decode
from asrtrain.decode.grid import parse_lmwt


def _wer(ref_path, hyp_path):
    import kaldialign

    ref = dict((ln.split()[0], ln.split()[1:]) for ln in ref_path.read_text().splitlines())
    hyp = dict((ln.split()[0], ln.split()[1:]) for ln in hyp_path.read_text().splitlines())
    errors = [(u, kaldialign.edit_distance(ref[u], hyp.get(u, []))["total"]) for u in ref]
    return sum(e for _, e in errors) / sum(len(r) for r in ref.values()), dict(errors), hyp


@pytest.fixture(scope="module")
def oracle_dev(mini_corpus_dec, mini_lang_dec, tmp_path_factory):
    out = tmp_path_factory.mktemp("dec") / "oracle"
    cfg = DecodeConfig(graph=mini_lang_dec / "graph", out=out,
                       oracle=mini_lang_dec / "pdf_ali" / "dev.scp", nj=1, lmwts=[8.0, 12.0],
                       text=mini_corpus_dec / "dev" / "text")
    return out, decode(cfg)


def test_oracle_recovers_the_words(oracle_dev, mini_corpus_dec):
    out, figures = oracle_dev
    assert sorted(p.name for p in (out / "hyp").iterdir()) == ["12.txt", "8.txt"]
    wer, errors, hyp = _wer(out / "ref.txt", out / "hyp" / "12.txt")
    # the only possible error is the homophone REED -> READ (the LM prefers READ)
    wrong = {u for u, e in errors.items() if e}
    ref = dict((ln.split()[0], ln.split()[1:]) for ln in (out / "ref.txt").read_text().splitlines())
    for u in wrong:
        assert [w.replace("REED", "READ") for w in ref[u]] == hyp[u]
    assert wer <= 1 / 16                      # 16 words, at most the homophone wrong
    assert figures["utterances"] == 5 and figures["not_final"] == 0 and not figures["failed"]
    assert 0 < figures["rtf_decode_per_lmwt"] < 1


def test_ctm_word_times(oracle_dev, mini_corpus_dec):
    import kaldiio

    out, _ = oracle_dev
    ctm = [ln.split() for ln in (out / "ctm" / "12.ctm").read_text().splitlines()]
    hyp = dict((ln.split()[0], ln.split()[1:]) for ln in (out / "hyp" / "12.txt").read_text().splitlines())
    ali = kaldiio.load_scp(str(mini_corpus_dec / "dev" / "ali.scp"))
    for utt, words in hyp.items():
        rows = [r for r in ctm if r[0] == utt]
        assert [r[4] for r in rows] == words
        starts = [float(r[2]) for r in rows]
        ends = [float(r[2]) + float(r[3]) for r in rows]
        assert all(e <= s + 1e-6 for e, s in zip(ends, starts[1:], strict=False))      # in order, no overlap
        phones = ali[utt]
        speech = np.flatnonzero(phones != 1)                              # 1 = sil
        # the first word starts where speech starts, the last ends where it ends
        assert starts[0] == pytest.approx(speech[0] * 0.01, abs=0.015)
        assert ends[-1] == pytest.approx((speech[-1] + 1) * 0.01, abs=0.015)


def test_outputs_and_logs(oracle_dev):
    out, figures = oracle_dev
    assert (out / "log" / "decode.0.log").read_text().count("job 0: 5 utterances") == 1
    assert (out / "decode_stats.json").exists()
    assert figures["ref_oov_tokens"] == 0


@pytest.mark.parametrize("spawned", [True, False])
def test_parallel_jobs_give_the_same_hyps(mini_corpus_dec, mini_lang_dec, oracle_dev, tmp_path,
                                          monkeypatch, caplog, spawned):
    """Jobs in processes of their own, or (jobs too small to be worth one) in this process."""
    from asrtrain.decode import decoder

    out, _ = oracle_dev
    monkeypatch.setattr(decoder, "SPAWN_MIN_FRAMES", 0 if spawned else 10**9)
    cfg = DecodeConfig(graph=mini_lang_dec / "graph", out=tmp_path / "nj2",
                       oracle=mini_lang_dec / "pdf_ali" / "dev.scp", nj=2, lmwts=[12.0])
    with caplog.at_level(logging.INFO, logger="asrtrain"):
        decode(cfg)
    assert (tmp_path / "nj2" / "hyp" / "12.txt").read_text() == (out / "hyp" / "12.txt").read_text()
    assert (tmp_path / "nj2" / "log" / "decode.1.log").read_text().count("job 1: ") == 1
    assert ("run in this process" in caplog.text) != spawned


def test_reference_words_missing_from_lexicon_are_counted(mini_corpus_dec, mini_lang_dec, tmp_path,
                                                          caplog):
    ref = tmp_path / "text"
    lines = (mini_corpus_dec / "dev" / "text").read_text().splitlines()
    lines[1] = lines[1] + " ZEBRA QUAGGA"
    ref.write_text("\n".join(lines) + "\n")
    cfg = DecodeConfig(graph=mini_lang_dec / "graph", out=tmp_path / "d",
                       oracle=mini_lang_dec / "pdf_ali" / "dev.scp", lmwts=[10.0], text=ref)
    with caplog.at_level("WARNING", logger="asrtrain"):
        figures = decode(cfg)
    assert figures["ref_oov_tokens"] == 2
    assert "spk-0001-000001: ZEBRA" in caplog.text


def test_graph_for_another_tree_is_refused(mini_lang_dec, tmp_path):
    ali = tmp_path / "pdf_ali"
    shutil.copytree(mini_lang_dec / "pdf_ali", ali)
    (ali / "tree_id").write_text("0123456789abcdef\n")
    cfg = DecodeConfig(graph=mini_lang_dec / "graph", out=tmp_path / "d", oracle=ali / "dev.scp")
    with pytest.raises(InputError, match="graph was built for tree .* for tree 0123456789abcdef"):
        decode(cfg)


def test_pdf_ids_beyond_the_graph_name_the_utterance(mini_lang_dec, tmp_path):
    import kaldiio

    num_pdfs = int((mini_lang_dec / "num_pdfs").read_text())
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path / 'a.ark'},{tmp_path / 'a.scp'}") as w:
        w("utt-bad", np.array([0, 1, num_pdfs + 3], dtype=np.int32))
    cfg = DecodeConfig(graph=mini_lang_dec / "graph", out=tmp_path / "d", oracle=tmp_path / "a.scp")
    with pytest.raises(InputError, match="utterance utt-bad: pdf id"):
        decode(cfg)


def test_score_checks():
    from asrtrain.decode.loglikes import check_scores

    with pytest.raises(InputError, match="utterance u1: scores have shape \\(4, 7\\), the graph has 9"):
        check_scores("u1", np.zeros((4, 7), np.float32), 9)
    bad = np.zeros((4, 9), np.float32)
    bad[2, 3] = np.nan
    with pytest.raises(InputError, match="utterance u2: 1 non-finite scores \\(first at frame 2\\)"):
        check_scores("u2", bad, 9)


def test_parse_lmwt():
    assert parse_lmwt("8:11", 0.1) == [8, 9, 10, 11]
    assert parse_lmwt("7.5,10", 0.1) == [7.5, 10]
    assert parse_lmwt("", 0.1) == [10.0]
    for bad in ("0:3", "nan", "10,inf", "-1"):
        with pytest.raises(ConfigError, match="LM weights must be finite positive numbers"):
            parse_lmwt(bad, 0.1)
    with pytest.raises(ConfigError, match="--acwt must be a finite positive number"):
        parse_lmwt("", float("nan"))


def test_hyps_of_other_lm_weights_are_removed(mini_lang_dec, tmp_path):
    out = tmp_path / "d"
    base = dict(graph=mini_lang_dec / "graph", out=out, oracle=mini_lang_dec / "pdf_ali" / "dev.scp")
    decode(DecodeConfig(**base, lmwts=[8.0, 9.0]))
    decode(DecodeConfig(**base, lmwts=[10.0]))
    assert sorted(p.name for p in (out / "hyp").iterdir()) == ["10.txt"]
    assert sorted(p.name for p in (out / "ctm").iterdir()) == ["10.ctm"]

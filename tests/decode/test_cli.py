"""The two commands through the CLI: outputs, printed figures, one-line errors."""

from __future__ import annotations

from click.testing import CliRunner

from asrtrain.cli.main import cli


def test_prepare_lang_and_oracle_decode(mini_corpus_dec, tmp_path):
    runner = CliRunner()
    lang = tmp_path / "lang"
    res = runner.invoke(cli, ["prepare", "lang", str(mini_corpus_dec / "dict"),
                              str(mini_corpus_dec / "lm_text"), str(mini_corpus_dec), str(lang),
                              "--order", "3", "--num-pdfs", "50", "--min-count", "1,1,1"])
    assert res.exit_code == 0, res.output
    assert "pdfs (tree" in res.output and "dev perplexity" in res.output and "HCLG" in res.output
    assert list((lang / "log").glob("prepare-lang.*.log"))
    assert (lang / "prepare-lang.config.yaml").exists()
    out = tmp_path / "dec"
    res = runner.invoke(cli, ["decode", "-", str(lang / "graph"), "-", str(out), "--nj", "1",
                              "--oracle", str(lang / "pdf_ali" / "dev.scp"), "--lmwt", "9:10",
                              "--text", str(mini_corpus_dec / "dev" / "text")])
    assert res.exit_code == 0, res.output
    assert "real-time factor" in res.output
    assert sorted(p.name for p in (out / "hyp").iterdir()) == ["10.txt", "9.txt"]
    assert sorted(p.name for p in (out / "ctm").iterdir()) == ["10.ctm", "9.ctm"]
    assert (out / "ref.txt").read_text() == (mini_corpus_dec / "dev" / "text").read_text()
    log = next((out / "log").glob("decode.*.*.log")).read_text()
    assert "real-time factor" in log and "exit status 0" in log


def test_decode_without_model_is_a_one_line_error(mini_lang_dec, tmp_path):
    res = CliRunner().invoke(cli, ["decode", str(tmp_path / "none.pt"), str(mini_lang_dec / "graph"),
                                   "-", str(tmp_path / "out")])
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        f"Error: {tmp_path / 'none.pt'}: MODEL not found (give a file, or use --oracle)"]


def test_bad_min_count_is_a_one_line_error(mini_corpus_dec, tmp_path):
    res = CliRunner().invoke(cli, ["prepare", "lang", str(mini_corpus_dec / "dict"),
                                   str(mini_corpus_dec / "lm_text"), str(mini_corpus_dec),
                                   str(tmp_path / "lang"), "--min-count", "1,3,2"])
    assert res.exit_code == 1
    assert "non-decreasing" in res.output and len(res.output.strip().splitlines()) == 1

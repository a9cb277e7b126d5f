"""The two commands through the CLI: outputs, printed figures, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
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


def test_non_utf8_lexicon_and_bad_min_count_name_the_problem(mini_corpus_dec, tmp_path, run_cli, one_error):
    import shutil

    dict_dir = tmp_path / "dict"
    shutil.copytree(mini_corpus_dec / "dict", dict_dir)
    line = len((dict_dir / "lexicon.txt").read_bytes().splitlines()) + 1
    with open(dict_dir / "lexicon.txt", "ab") as fh:
        fh.write("CAFÉ k a f e\n".encode("latin-1"))
    args = [dict_dir, mini_corpus_dec / "lm_text", mini_corpus_dec, tmp_path / "lang"]
    proc = run_cli("prepare", "lang", *args)
    one_error(proc.stderr, 1, proc.returncode, f"{dict_dir / 'lexicon.txt'}: line {line}: not UTF-8 text (byte 0xC9 at byte offset", "iconv")
    proc = run_cli("prepare", "lang", mini_corpus_dec / "dict", *args[1:], "--min-count", "x")
    one_error(proc.stderr, 1, proc.returncode, "--min-count 'x': expected integers separated by commas")
    assert not (tmp_path / "lang" / "graph").exists()


def test_truncated_hclg_is_an_error_naming_it(mini_lang_dec, tmp_path, run_cli, one_error):
    import shutil

    graph = tmp_path / "graph"
    shutil.copytree(mini_lang_dec / "graph", graph)
    hclg = graph / "HCLG.fst"
    hclg.write_bytes(hclg.read_bytes()[: hclg.stat().st_size // 2])
    proc = run_cli("decode", "-", graph, "-", tmp_path / "out", "--nj", 1,
                   "--oracle", mini_lang_dec / "pdf_ali" / "dev.scp")
    one_error(proc.stderr, 1, proc.returncode, f"{hclg}: OpenFst cannot read this const FST")
    assert not list((tmp_path / "out").glob("hyp/*.txt"))


def test_decode_values_that_cannot_be_right_are_usage_errors(mini_lang_dec, tmp_path):
    base = ["decode", "-", str(mini_lang_dec / "graph"), "-", str(tmp_path / "out"),
            "--oracle", str(mini_lang_dec / "pdf_ali" / "dev.scp")]
    cases = {("--lmwt", "nan"): "LM weights must be finite positive numbers",
             ("--lmwt", "10,inf"): "LM weights must be finite positive numbers",
             ("--lmwt", "0:3"): "LM weights must be finite positive numbers",
             ("--lmwt", "ten"): "expected A:B, a list A,B,C or a number",
             ("--acwt", "inf"): "'inf' is not a finite number",
             ("--beam", "-2"): "'-2' must be greater than 0",
             ("--lmwt", ""): None}
    for (option, value), message in cases.items():
        args = [*base, option, value] + (["--acwt", "nan"] if value == "" else [])
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2, (option, value, res.output)
        assert "Traceback" not in res.output
        if message:
            assert message in res.output, res.output


def test_align_lexicon_with_a_phone_the_graph_lacks_is_one_line(tmp_path: Path) -> None:
    from asrtrain.core.errors import InputError
    from asrtrain.decode.ctm import read_align_lexicon

    path = tmp_path / "align_lexicon.txt"
    path.write_text("YES y\nNO n\n")
    with pytest.raises(InputError, match=r"line 2: phone 'n' of 'NO' is not in the graph's phones.txt"):
        read_align_lexicon(path, {"y": 1})

"""score --lm-text: the reference words split by the LM text's vocabulary, with the errors on each
side, adding up to sclite's counts; in summary.txt, wer.json and the dev-picked report."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.score.pick import pick_on
from asrtrain.score.sweep import ScoreOptions

# KATE and CHINA are outside the LM text; the hypotheses get KATE wrong, delete CHINA once,
# substitute the in-vocabulary LOVES once and insert one word
REF = {"s1-u1": "KATE LOVES CHINA", "s1-u2": "MARK LOVES CHINA", "s2-u3": "WE CALL IT BEAR"}
HYP = {"s1-u1": "PETER LOVES CHINA", "s1-u2": "MARK LIVES", "s2-u3": "WE CALL IT A BEAR"}
LM_TEXT = "MARK LOVES TEA\nWE CALL IT BEAR\nPETER LIVES HERE\n"


def _write(path: Path, utts: dict[str, str]) -> Path:
    path.write_text("".join(f"{u} {t}\n" for u, t in utts.items()))
    return path


def test_the_split_adds_up_to_the_counts_and_names_the_text(tmp_path: Path) -> None:
    ref, hyp = _write(tmp_path / "ref.txt", REF), _write(tmp_path / "hyp.txt", HYP)
    lm = tmp_path / "lm_text"
    lm.write_text(LM_TEXT)
    out = CliRunner().invoke(cli, ["score", str(ref), str(hyp), str(tmp_path / "o"), "--lm-text", str(lm),
                                   "--bootstrap", "0"])
    assert out.exit_code == 0, out.output
    data = json.loads((tmp_path / "o" / "wer.json").read_text())
    v = data["lm_text_vocabulary"]
    # KATE, CHINA, CHINA outside (KATE substituted, the second CHINA deleted); 7 words inside,
    # LOVES -> LIVES wrong; A inserted
    assert (v["outside"], v["outside_wrong"], v["inside"], v["inside_wrong"], v["insertions"]) == (3, 2, 7, 1, 1)
    total = data["total"]
    assert v["inside"] + v["outside"] == total["words"] == 10
    assert v["inside_wrong"] + v["outside_wrong"] == total["substitutions"] + total["deletions"]
    assert v["insertions"] == total["insertions"]
    line = f"reference words outside the LM text ({lm}): 3 of 10 (30.0%), 2 of them wrong (66.7%)"
    assert line in (tmp_path / "o" / "summary.txt").read_text() and line in out.output
    # without the option nothing of it is written
    CliRunner().invoke(cli, ["score", str(ref), str(hyp), str(tmp_path / "p"), "--bootstrap", "0"])
    assert "lm_text_vocabulary" not in json.loads((tmp_path / "p" / "wer.json").read_text())


def test_the_dev_picked_report_gives_the_split_at_the_picked_setting(tmp_path: Path) -> None:
    dirs = {}
    for split in ("dev", "test"):
        d = tmp_path / split
        (d / "hyp").mkdir(parents=True)
        _write(d / "ref.txt", REF)
        _write(d / "hyp" / "10_0.0.txt", HYP)
        _write(d / "hyp" / "12_0.0.txt", REF)   # dev's and test's best: no errors at all
        dirs[split] = d
    lm = tmp_path / "lm_text"
    lm.write_text(LM_TEXT)
    s = pick_on(dirs["test"], dirs["dev"], ScoreOptions(bootstrap=0, lm_text=lm))
    assert s["picked"]["name"] == "12_0.0"
    assert s["lm_text_vocabulary"]["outside_wrong"] == 0 and s["lm_text_vocabulary"]["outside"] == 3
    report = (dirs["test"] / "dev_picked_wer").read_text()
    assert f"# reference words outside the LM text ({lm}): 3 of 10 (30.0%), 0 of them wrong" in report


def test_an_empty_or_missing_lm_text_is_refused_naming_it(tmp_path: Path) -> None:
    ref, hyp = _write(tmp_path / "ref.txt", REF), _write(tmp_path / "hyp.txt", HYP)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    out = CliRunner().invoke(cli, ["score", str(ref), str(hyp), str(tmp_path / "o"), "--lm-text", str(empty)])
    assert out.exit_code != 0 and "empty.txt" in out.output and "holds no words" in out.output
    assert not (tmp_path / "o" / "wer.json").exists()
    out = CliRunner().invoke(cli, ["score", str(ref), str(hyp), str(tmp_path / "o"), "--lm-text",
                                   str(tmp_path / "nope.txt")])
    assert out.exit_code == 2 and "nope.txt" in out.output


def test_a_lang_dir_gives_its_lm_words_and_one_without_them_is_refused(tmp_path: Path) -> None:
    """The recipes pass the lang dir: its lm_words.txt (dev's lines out) splits as the text would."""
    ref, hyp = _write(tmp_path / "ref.txt", REF), _write(tmp_path / "hyp.txt", HYP)
    lang = tmp_path / "lang"
    lang.mkdir()
    (lang / "lm_words.txt").write_text("".join(f"{w}\n" for w in sorted(set(LM_TEXT.split()))))
    out = CliRunner().invoke(cli, ["score", str(ref), str(hyp), str(tmp_path / "o"), "--lm-text", str(lang),
                                   "--bootstrap", "0"])
    assert out.exit_code == 0, out.output
    v = json.loads((tmp_path / "o" / "wer.json").read_text())["lm_text_vocabulary"]
    assert (v["outside"], v["outside_wrong"], v["inside"], v["inside_wrong"]) == (3, 2, 7, 1)
    assert v["lm_text"] == str(lang)
    bare = tmp_path / "arpa_lang"
    bare.mkdir()
    out = CliRunner().invoke(cli, ["score", str(ref), str(hyp), str(tmp_path / "p"), "--lm-text", str(bare)])
    assert out.exit_code != 0 and "arpa_lang" in out.output and "lm_words.txt" in out.output
    assert not (tmp_path / "p" / "wer.json").exists()

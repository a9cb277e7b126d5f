"""``asrtrain score`` and ``asrtrain score --sweep`` end to end, and the report formats."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.score.align import Counts
from asrtrain.score.bootstrap import bootstrap_wer
from asrtrain.score.report import kaldi_lines


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return r.exit_code, r.output


def test_kaldi_line_format() -> None:
    c = Counts(sent=100, words=16234, cor=15100, sub=934, dele=200, ins=100, sent_err=45)
    assert kaldi_lines(c, 2).splitlines() == [
        "%WER 7.60 [ 1234 / 16234, 100 ins, 200 del, 934 sub ]",
        "%SER 45.00 [ 45 / 100 ]",
        "Scored 100 sentences, 2 not present in hyp."]


def test_score_writes_reports(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ref.txt", "sw_1-A_0001 A B C\nsw_1-A_0002 X Y\n"
                                       "en_2-B_0001 THE CAT SAT\nen_2-B_0002 UH HUH\n")
    hyp = _write(tmp_path / "hyp.txt", "sw_1-A_0001 a c d\nsw_1-A_0002 x y z\n"
                                       "en_2-B_0001 the bat sat\n")
    out = tmp_path / "out"
    code, text = _run("score", str(ref), str(hyp), str(out), "--subset", "swbd=sw_*",
                      "--subset", "callhome=en_*", "--bootstrap", "200")
    assert code == 0, text
    assert "%WER 60.00 [ 6 / 10, 2 ins, 3 del, 1 sub ]" in text
    for name in ("summary.txt", "alignments.pra", "confusions.txt", "wer", "wer.json",
                 "score.config.yaml", "fingerprint.json"):
        assert (out / name).is_file(), name
    assert list((out / "log").glob("score.*.log"))
    data = json.loads((out / "wer.json").read_text())
    assert data["total"]["errors"] == 6 and data["total"]["words"] == 10
    assert data["subsets"]["swbd"]["words"] == 5 and data["subsets"]["swbd"]["errors"] == 3
    assert data["subsets"]["callhome"]["words"] == 5
    assert data["subsets"]["callhome"]["deletions"] == 2
    assert data["speakers"]["sw_1-A"]["insertions"] == 2
    assert data["missing_hyp"] == {"count": 1, "utterances": ["en_2-B_0002"]}
    b = data["bootstrap"]["all"]
    assert b["low"] <= data["wer"] <= b["high"] and b["replications"] == 200
    assert data["top_substitutions"] == [["CAT", "BAT", 1]]
    pra = (out / "alignments.pra").read_text()
    assert "id: (sw_1-A_0001)\nSpeaker: sw_1-A\nScores: (#C #S #D #I) 2 0 1 1\n" \
           "REF:  a B c *\nHYP:  a * c D\n" in pra
    wer = (out / "wer").read_text()
    assert wer.startswith("%WER 60.00 [ 6 / 10, 2 ins, 3 del, 1 sub ]\n")
    assert "1 not present in hyp" in wer
    summary = (out / "summary.txt").read_text()
    assert "sw_1-A" in summary and "swbd (sw_*)" in summary
    assert "1 reference utterance(s) had no hypothesis" in summary


def test_score_bad_ctm_is_one_line_error(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ref.txt", "u_1 A B\n")
    hyp = _write(tmp_path / "hyp.ctm", "u_1 1 0.0 0.1 A\nu_1 1 0.2\n")
    r = CliRunner().invoke(cli, ["score", str(ref), str(hyp), str(tmp_path / "o")])
    assert r.exit_code == 1
    assert "Error:" in r.output and "hyp.ctm: line 2" in r.output
    assert not (tmp_path / "o" / "wer.json").exists()


def test_score_usage_errors(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ref.txt", "u_1 A B\n")
    r = CliRunner().invoke(cli, ["score", str(ref)])
    assert r.exit_code == 2 and "REF HYP OUT" in r.output
    r = CliRunner().invoke(cli, ["score", str(ref), str(ref), str(tmp_path / "o"),
                                 "--subset", "nopattern"])
    assert r.exit_code == 1 and "NAME=PATTERN" in r.output


def _decode_dir(tmp_path: Path) -> Path:
    rng = random.Random(3)
    words = "A B C D E F G H".split()
    refs = {f"spk-{s:04d}-{u:06d}": [rng.choice(words) for _ in range(8)]
            for s in range(3) for u in range(5)}
    d = tmp_path / "decode"
    _write(d / "ref.txt", "".join(f"{k} {' '.join(v)}\n" for k, v in refs.items()))
    for lmwt, p in (("8", 0.3), ("10", 0.1), ("12", 0.2)):
        lines = []
        for k, v in refs.items():
            hyp = [w if rng.random() > p else rng.choice(words) for w in v]
            lines.append(f"{k} {' '.join(hyp)}\n")
        _write(d / "hyp" / f"{lmwt}.txt", "".join(lines))
    return d


def test_sweep_writes_wer_files_and_best(tmp_path: Path) -> None:
    d = _decode_dir(tmp_path)
    code, text = _run("score", "--sweep", str(d), "--bootstrap", "0")
    assert code == 0, text
    wers = {}
    for lmwt in ("8", "10", "12"):
        first = (d / f"wer_{lmwt}").read_text().splitlines()[0]
        assert first.startswith("%WER ")
        wers[lmwt] = float(first.split()[1])
        assert (d / "score" / lmwt / "wer.json").is_file()
    best = min(wers, key=lambda k: wers[k])
    assert best == "10"
    line = (d / "best_wer").read_text().strip()
    assert line == (d / "wer_10").read_text().splitlines()[0] + f" {d / 'wer_10'}"
    assert line in text
    sweep = json.loads((d / "score" / "sweep.json").read_text())
    assert sweep["best"] == "10" and set(sweep["weights"]) == {"8", "10", "12"}
    # decode's own fingerprint is not overwritten: ours goes under score/
    assert (d / "score" / "fingerprint.json").is_file()
    assert not (d / "fingerprint.json").exists()


def test_sweep_needs_reference(tmp_path: Path) -> None:
    d = _decode_dir(tmp_path)
    (d / "ref.txt").unlink()
    r = CliRunner().invoke(cli, ["score", "--sweep", str(d)])
    assert r.exit_code == 1 and "pass --ref FILE" in r.output
    other = _write(tmp_path / "text", "spk-0000-000000 A\n")
    r = CliRunner().invoke(cli, ["score", "--sweep", str(d), "--ref", str(other),
                                 "--extra-hyp", "ignore", "--bootstrap", "0"])
    assert r.exit_code == 0, r.output


def test_bootstrap_interval() -> None:
    rng = random.Random(0)
    words = [rng.randint(5, 15) for _ in range(400)]
    errs = [sum(rng.random() < 0.2 for _ in range(w)) for w in words]
    iv = bootstrap_wer(errs, words, 1000, seed=1)
    assert iv.low < iv.wer < iv.high
    assert iv.high - iv.low < 6.0                       # about ±2 points at 20 % on 4k words
    assert bootstrap_wer(errs, words, 1000, seed=1) == iv   # seeded: reproducible
    small = bootstrap_wer(errs[:40], words[:40], 1000, seed=1)
    assert small.high - small.low > iv.high - iv.low   # fewer utterances, wider interval
    assert bootstrap_wer([], [], 100).replications == 0


@pytest.mark.parametrize("unit", ["utterance", "speaker"])
def test_bootstrap_unit_option(tmp_path: Path, unit: str) -> None:
    d = _decode_dir(tmp_path)
    out = tmp_path / "o"
    code, text = _run("score", str(d / "ref.txt"), str(d / "hyp" / "8.txt"), str(out),
                      "--bootstrap", "300", "--bootstrap-unit", unit)
    assert code == 0, text
    b = json.loads((out / "wer.json").read_text())["bootstrap"]["all"]
    assert b["unit"] == unit and b["low"] <= b["wer"] <= b["high"]

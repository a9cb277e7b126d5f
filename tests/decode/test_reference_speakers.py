"""`decode --text` carries the speakers with the reference, so `score --sweep` has them.

Without ``utt2spk`` beside ``OUT/ref.txt`` scoring guesses speakers from utterance ids: the
per-speaker tables get the ids' speakers and ``--bootstrap-unit speaker`` resamples
whatever the ids say. Where the ids name no speaker at all, that bootstrap is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from asrtrain.cli.main import cli

SPEAKERS = {"spk-0001-000000": "alice", "spk-0001-000001": "bob", "spk-0001-000002": "alice",
            "spk-0001-000003": "bob", "spk-0001-000004": "alice"}


def run(*args: object) -> str:
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.output


def decode(lang: Path, data: Path, out: Path) -> None:
    run("decode", "-", lang / "graph", "-", out, "--nj", 1, "--oracle", lang / "pdf_ali" / "dev.scp",
        "--lmwt", 10, "--text", data / "text")


def swept_speakers(out: Path) -> set[str]:
    run("score", "--sweep", out, "--bootstrap", 50, "--bootstrap-unit", "speaker")
    return set(json.loads((out / "score" / "10" / "wer.json").read_text())["speakers"])


def test_the_speakers_travel_with_the_reference(mini_corpus_dec, mini_lang_dec, tmp_path) -> None:
    data = tmp_path / "dev"
    data.mkdir()
    (data / "text").write_text((mini_corpus_dec / "dev" / "text").read_text())
    (data / "utt2spk").write_text("".join(f"{u} {s}\n" for u, s in SPEAKERS.items()))
    out = tmp_path / "dec"
    decode(mini_lang_dec, data, out)
    assert (out / "utt2spk").read_text() == (data / "utt2spk").read_text()
    assert swept_speakers(out) == {"alice", "bob"}
    # decoded again from a text without speakers: the old ones do not stay behind
    (data / "utt2spk").unlink()
    decode(mini_lang_dec, data, out)
    assert not (out / "utt2spk").exists()
    assert swept_speakers(out) == {"spk-0001"}  # what the ids say


def test_a_speaker_bootstrap_without_speakers_is_refused(tmp_path, one_error) -> None:
    (tmp_path / "ref.txt").write_text("a X Y\nb Y Z\nc X\n")
    (tmp_path / "hyp.txt").write_text("a X Y\nb Y\nc X\n")
    args = ["score", str(tmp_path / "ref.txt"), str(tmp_path / "hyp.txt"), str(tmp_path / "o"),
            "--bootstrap", "50", "--bootstrap-unit", "speaker"]
    res = CliRunner().invoke(cli, args)
    one_error(res.output, 1, res.exit_code, str(tmp_path / "ref.txt"), "--bootstrap-unit speaker",
              "3 utterance ids name 3 speakers")
    (tmp_path / "utt2spk").write_text("a s1\nb s1\nc s2\n")
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert set(json.loads((tmp_path / "o" / "wer.json").read_text())["speakers"]) == {"s1", "s2"}

"""Bad input: one clear line naming the file, and nothing dropped without a count."""

from __future__ import annotations

import shutil

import kaldiio
import numpy as np


def invoke(*args: object):
    from click.testing import CliRunner

    from asrtrain.cli.main import cli
    return CliRunner().invoke(cli, [str(a) for a in args])


SMALL = ["--lda-dim", "6", "--splice", "1", "--gmm-components", "4", "--gmm-iters", "2",
         "--iters", "2", "--sat-iters", "0"]


def test_missing_features_say_what_to_run(tmp_path) -> None:
    (tmp_path / "data").mkdir()
    for command in ("ivectors", "fmllr"):
        result = invoke("prepare", command, tmp_path / "data", tmp_path / command)
        assert result.exit_code == 1
        assert "feats.scp: make features first" in result.output


def test_non_finite_features_name_the_utterance(speaker_corpus, tmp_path) -> None:
    data = tmp_path / "data"
    shutil.copytree(speaker_corpus, data)
    feats = dict(kaldiio.load_scp(str(data / "feats.scp")).items())
    feats["spk03-002"] = feats["spk03-002"].copy()
    feats["spk03-002"][5, 2] = np.nan
    kaldiio.save_ark(str(data / "bad.ark"), feats, scp=str(data / "feats.scp"))
    result = invoke("prepare", "ivectors", data, tmp_path / "iv", "--ubm-components", "4",
                    "--dim", "3")
    assert result.exit_code == 1
    assert "feats.scp: 'spk03-002' has non-finite values" in result.output


def test_alignment_mismatches_are_counted_or_refused(speaker_corpus, tmp_path) -> None:
    ali = dict(kaldiio.load_scp(str(speaker_corpus / "ali.scp")).items())
    ali["spk01-001"] = ali["spk01-001"][:-3]
    del ali["spk02-004"]
    kaldiio.save_ark(str(tmp_path / "ali.ark"), ali, scp=str(tmp_path / "ali.scp"))
    out = tmp_path / "fm"
    result = invoke("prepare", "fmllr", speaker_corpus, out, *SMALL, "--ali", tmp_path / "ali.scp")
    assert result.exit_code == 0, result.output
    log_text = next((out / "log").glob("*.log")).read_text()
    assert "1 utterance(s) without alignment and 1 with a frame count" in log_text
    assert "spk01-001" in log_text

    short = {k: v[:-1] for k, v in ali.items()}
    kaldiio.save_ark(str(tmp_path / "short.ark"), short, scp=str(tmp_path / "short.scp"))
    result = invoke("prepare", "fmllr", speaker_corpus, tmp_path / "fm2", *SMALL,
                    "--ali", tmp_path / "short.scp")
    assert result.exit_code == 1
    assert "short.scp: no alignment matches its features' frame count" in result.output
    assert not (tmp_path / "fm2" / "lda.mat").exists()


def test_speaker_without_enough_frames_gets_no_transform(speaker_corpus, tmp_path) -> None:
    data = tmp_path / "data"
    shutil.copytree(speaker_corpus, data)
    feats = dict(kaldiio.load_scp(str(data / "feats.scp")).items())
    feats = {k: v for k, v in feats.items() if not k.startswith("spk05") or k == "spk05-000"}
    feats["spk05-000"] = feats["spk05-000"][:6]
    kaldiio.save_ark(str(data / "cut.ark"), feats, scp=str(data / "feats.scp"))
    lines = [line for line in (data / "utt2spk").read_text().splitlines()
             if not line.startswith("spk05") or line.startswith("spk05-000")]
    (data / "utt2spk").write_text("\n".join(lines) + "\n")
    out = tmp_path / "fm"
    model = tmp_path / "model"
    assert invoke("prepare", "fmllr", speaker_corpus, model, *SMALL, "--ali",
                  speaker_corpus / "ali.scp").exit_code == 0
    result = invoke("prepare", "fmllr", data, out, *SMALL, "--model", model)
    assert result.exit_code == 0, result.output
    log_text = next((out / "log").glob("*.log")).read_text()
    assert "speaker spk05 has 6 frames: no transform instead of a full one" in log_text
    trans = kaldiio.load_scp(str(out / "trans.scp"))["spk05"]
    np.testing.assert_array_equal(trans, np.eye(6, 7, dtype=np.float32))

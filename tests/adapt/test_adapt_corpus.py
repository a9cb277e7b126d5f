"""On the embedded corpus (``tiny_corpus``, ``small_corpus``): MFCC → i-vectors that name the speaker,
fMLLR that raises every speaker's likelihood and pulls the speakers together, and
both streams fused into one archive with log-mel."""

from __future__ import annotations

from pathlib import Path

import kaldiio
import pytest


def invoke(*args: object):
    from click.testing import CliRunner

    from asrtrain.cli.main import cli
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def corpus_and_mfcc(request: pytest.FixtureRequest, name: str, out: Path) -> tuple[Path, Path]:
    """The corpus fixture ``name`` (a missing fixture is an error) and MFCC of its train set."""
    corpus = Path(request.getfixturevalue(name))
    invoke("prepare", "features", corpus / "train", out, "--type", "mfcc", "--nj", "1")
    return corpus, out


@pytest.fixture(scope="module")
def corpus_mfcc(request: pytest.FixtureRequest, tmp_path_factory) -> tuple[Path, Path]:
    """``tiny_corpus``: 2 training speakers, about 30 s of training speech."""
    return corpus_and_mfcc(request, "tiny_corpus", tmp_path_factory.mktemp("adapt_tiny") / "mfcc")


@pytest.fixture(scope="module")
def small_mfcc(request: pytest.FixtureRequest, tmp_path_factory) -> tuple[Path, Path]:
    """``small_corpus``: 6 training speakers with 8-13 utterances each (enough to hold out)."""
    return corpus_and_mfcc(request, "small_corpus", tmp_path_factory.mktemp("adapt_small") / "mfcc")


def held_out_accuracy(ivectors: Path, utt2spk_path: Path) -> tuple[float, int, int]:
    """Each speaker's first half of utterances enrol, the rest are scored."""
    from asrtrain.adapt.ivector import speaker_accuracy
    from asrtrain.data.kaldi_dir import read_utt2spk

    vectors = dict(kaldiio.load_scp(str(ivectors)).items())
    utt2spk = read_utt2spk(utt2spk_path)
    by_spk: dict[str, list[str]] = {}
    for utt in sorted(vectors):
        by_spk.setdefault(utt2spk[utt], []).append(utt)
    enrol, test = {}, {}
    for utts in by_spk.values():
        half = max(1, len(utts) // 2)
        enrol.update({u: vectors[u] for u in utts[:half]})
        test.update({u: vectors[u] for u in utts[half:]})
    return speaker_accuracy(enrol, utt2spk, test, utt2spk), len(by_spk), len(test)


def test_ivectors_name_the_speaker_of_held_out_utterances(small_mfcc, tmp_path) -> None:
    _, mfcc = small_mfcc
    out = tmp_path / "iv"
    invoke("prepare", "ivectors", mfcc, out, "--ubm-components", "16", "--dim", "16",
           "--per-utt", "--iters", "5")
    accuracy, speakers, tested = held_out_accuracy(out / "ivectors.scp", mfcc / "utt2spk")
    assert speakers >= 6 and tested >= 30
    assert accuracy >= 0.9, f"{accuracy:.3f} of {tested} held-out utterances"


def test_fmllr_raises_likelihood_and_shrinks_speaker_spread(corpus_mfcc, tmp_path) -> None:
    import json

    corpus, mfcc = corpus_mfcc
    out = tmp_path / "fm"
    invoke("prepare", "fmllr", mfcc, out, "--ali", corpus / "train" / "ali.scp",
           "--gmm-components", "16", "--min-frames-full", "200")
    summary = json.loads((out / "trans.summary.json").read_text())
    assert summary["speakers_loglike_rose"] == summary["speakers"]
    assert summary["loglike_per_frame_after"] > summary["loglike_per_frame_before"]
    assert summary["speaker_mean_spread_after"] < summary["speaker_mean_spread_before"]
    for spk in summary["per_speaker"].values():
        assert all(b >= a - 1e-9 * abs(a) for a, b in spk["aux"])
        lls = spk["loglikes"]
        assert all(b >= a - 1e-9 * abs(a) for a, b in zip(lls, lls[1:], strict=False))


def test_adapted_streams_fuse_with_logmel(corpus_mfcc, tmp_path) -> None:
    """fMLLR 40 + online i-vectors + log-mel: the paper's layout (small i-vectors here)."""
    from asrtrain.data.archive import Archive

    corpus, mfcc = corpus_mfcc
    invoke("prepare", "fmllr", mfcc, tmp_path / "fm", "--ali", corpus / "train" / "ali.scp",
           "--gmm-components", "8", "--iters", "2", "--sat-iters", "0")
    invoke("prepare", "ivectors", mfcc, tmp_path / "iv", "--ubm-components", "8", "--dim", "10",
           "--iters", "2", "--online", "--period", "10")
    invoke("prepare", "features", corpus / "train", tmp_path / "logmel", "--deltas", "--nj", "1")
    archive = tmp_path / "train.h5"
    invoke("prepare", "archive", archive, "--stream", f"fmllr={tmp_path / 'fm' / 'feats.scp'}",
           "--stream", f"ivector={tmp_path / 'iv' / 'ivectors.scp'}",
           "--stream", f"logmel={tmp_path / 'logmel' / 'feats.scp'}", "--length-tolerance", "0")
    arc = Archive(archive)
    assert arc.feat_dim == 40 + 10 + 120 and arc.skipped == []
    assert [(s["name"], s["dim"]) for s in arc.layout] == [("fmllr", 40), ("ivector", 10),
                                                            ("logmel", 120)]
    utt = arc.utterances[0][0]
    feats, _ = arc.read_utterance(utt)
    rows = kaldiio.load_scp(str(tmp_path / "iv" / "ivectors.scp"))[utt]
    # frame t carries online row t // 10 (fp16 in the archive)
    assert abs(feats[25, 40:50] - rows[2]).max() < 2e-2 * (abs(rows[2]).max() + 1)

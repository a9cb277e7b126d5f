"""``asrtrain prepare features``, ``prepare archive`` and ``info`` as a user runs them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from click.testing import CliRunner
from feature_helpers import make_audio_dir

from asrtrain.cli.main import cli


def invoke(*args: str) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def write_alignments(feats_dir: Path, num_pdfs: int) -> Path:
    """Targets of the right length for every utterance of a features dir."""
    import kaldiio

    from asrtrain.data.kaldi_dir import read_utt2num_frames

    rng = np.random.default_rng(0)
    ali = {u: rng.integers(0, num_pdfs, n).astype(np.int32)
           for u, n in read_utt2num_frames(feats_dir / "utt2num_frames").items()}
    kaldiio.save_ark(str(feats_dir / "ali.ark"), ali, scp=str(feats_dir / "ali.scp"))
    return feats_dir / "ali.scp"


def test_features_then_archive_then_info(tmp_path: Path) -> None:
    from asrtrain.data.archive import Archive
    from asrtrain.data.kaldi_dir import read_utt2num_frames

    data = make_audio_dir(tmp_path)
    feats = tmp_path / "fbank"
    res = invoke("prepare", "features", data, feats, "--deltas", "--nj", "1")
    assert res.exit_code == 0, res.output
    assert "5 utterances" in res.output and "dim 120" in res.output
    assert (feats / "prepare-features.config.yaml").is_file() and list((feats / "log").iterdir())
    ali = write_alignments(feats, 11)
    out = tmp_path / "arch" / "train.h5"
    res = invoke("prepare", "archive", out, "--stream", f"logmel={feats / 'feats.scp'}",
                 "--cmvn", f"logmel={feats / 'cmvn.scp'}", "--utt2spk", feats / "utt2spk",
                 "--ali", ali, "--num-pdfs", 11)
    assert res.exit_code == 0, res.output
    arc = Archive(out)
    assert arc.feat_dim == 120 and arc.num_pdfs == 11
    assert arc.num_frames == sum(read_utt2num_frames(feats / "utt2num_frames").values())
    assert arc.layout[0]["cmvn"] == "means"
    # per-speaker mean normalisation: each speaker's static features average ~0
    for spk in ("spkA", "spkB"):
        x = np.concatenate([arc.read_utterance(u)[0] for u, *_ in arc.utterances
                            if u.startswith(spk)])
        assert np.abs(x[:, :40].mean(axis=0)).max() < 0.02
    assert (tmp_path / "arch" / "train.h5.config.yaml").is_file()
    res = CliRunner().invoke(cli, ["info", str(out)], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    for text in ("asrtrain-archive v2", "logmel", "0–119", "11 pdfs", "cmvn means"):
        assert text in res.output


def test_archive_errors_are_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["prepare", "archive", str(tmp_path / "x.h5"), "--stream",
                                   f"a={tmp_path / 'missing.scp'}"])
    assert res.exit_code == 1 and "Error:" in res.output and "missing.scp" in res.output
    assert "scp file not found" in res.output and not (tmp_path / "x.h5").exists()
    res = CliRunner().invoke(cli, ["prepare", "archive", str(tmp_path / "x.h5"), "--stream", "a"])
    assert res.exit_code == 1 and "expected NAME=VALUE" in res.output


def test_features_error_names_the_file(tmp_path: Path) -> None:
    data = make_audio_dir(tmp_path)
    spk2utt = (data / "spk2utt").read_text()
    (data / "spk2utt").write_text(spk2utt.splitlines()[0] + "\n")   # disagrees with utt2spk
    res = CliRunner().invoke(cli, ["prepare", "features", str(data), str(tmp_path / "out")])
    assert res.exit_code == 1 and "Error:" in res.output and "spk2utt" in res.output


def test_features_without_spk2utt_make_it_from_utt2spk(tmp_path: Path) -> None:
    """A user's dir with utt2spk alone (spk2utt is derived data): OUT gets spk2utt."""
    data = make_audio_dir(tmp_path)
    spk2utt = (data / "spk2utt").read_text()
    (data / "spk2utt").unlink()
    res = CliRunner().invoke(cli, ["prepare", "features", str(data), str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "out" / "spk2utt").read_text() == spk2utt


def test_tiny_corpus_features_and_archive(tiny_corpus: Path, tmp_path: Path) -> None:
    """On the embedded corpus: phone ids as targets, every frame aligned."""
    corpus = tiny_corpus
    from asrtrain.data.archive import Archive
    from asrtrain.data.kaldi_dir import read_table

    feats = tmp_path / "dev"
    res = invoke("prepare", "features", corpus / "dev", feats, "--deltas", "--nj", "1")
    assert res.exit_code == 0, res.output
    num_pdfs = 1 + max(int(v) for v in read_table(corpus / "phones.txt").values())
    out = tmp_path / "dev.h5"
    res = invoke("prepare", "archive", out, "--stream", f"logmel={feats / 'feats.scp'}",
                 "--ali", corpus / "dev" / "ali.scp", "--num-pdfs", num_pdfs,
                 "--length-tolerance", "0")
    assert res.exit_code == 0, res.output
    arc = Archive(out)
    assert arc.skipped == []  # the corpus' alignment has exactly the fbank frame count
    assert len(arc.utterances) == len(read_table(corpus / "dev" / "utt2spk"))
    assert arc.priors[1] > 0  # silence is seen


def test_info_of_a_decoding_archive_lists_skips(tmp_path: Path) -> None:
    import kaldiio
    from feature_helpers import make_streams

    src = make_streams(tmp_path / "src", [30, 40, 50])
    b = dict(src["b"])
    b.pop(sorted(b)[0])
    kaldiio.save_ark(str(tmp_path / "b.ark"), b, scp=str(tmp_path / "b.scp"))
    out = tmp_path / "test.h5"
    res = invoke("prepare", "archive", out, "--stream", f"a={src['a_scp']}",
                 "--stream", f"b={tmp_path / 'b.scp'}", "--chunk", "10")
    assert res.exit_code == 0, res.output
    assert "2 utterances" in res.output and "1 skipped" in res.output
    res = CliRunner().invoke(cli, ["info", str(out)], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    for text in ("none (decoding archive)", "skipped utterances (first 1 of 1)",
                 "spk0-u0000", "missing in stream b", "of 10 frames"):
        assert text in res.output

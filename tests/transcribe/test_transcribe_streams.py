"""The paper's input (fMLLR + i-vector + logmel) exported and remade from audio: the
exported extractor and fMLLR model give the streams decode read, so the same words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transcribe_helpers import GRID, SEARCH, run


@pytest.mark.slow
def test_fmllr_and_ivector_streams_are_remade_from_audio(trained_exp: Path, tiny_corpus: Path,
                                                         tmp_path: Path):
    data, lang = trained_exp / "data", trained_exp / "data" / "lang"
    work, exp = tmp_path, tmp_path / "exp"
    num_pdfs = (lang / "num_pdfs").read_text().strip()
    for split in ("train", "test"):
        run("prepare", "features", tiny_corpus / split, work / "mfcc" / split, "--type", "mfcc",
            "--nj", "1")
    run("prepare", "ivectors", work / "mfcc/train", exp / "ivectors/train", "--ubm-components", "8",
        "--dim", "10", "--online", "--iters", "2", "--ubm-iters", "3")
    run("prepare", "fmllr", work / "mfcc/train", exp / "fmllr/train", "--ali",
        lang / "pdf_ali/train.scp", "--gmm-components", "8", "--lda-dim", "20")
    run("prepare", "ivectors", work / "mfcc/test", exp / "ivectors/test", "--extractor",
        exp / "ivectors/train/extractor", "--online")
    run("prepare", "fmllr", work / "mfcc/test", exp / "fmllr/test", "--model", exp / "fmllr/train",
        "--lda-dim", "20")
    for split in ("train", "test"):
        targets = ["--ali", lang / f"pdf_ali/{split}.scp", "--num-pdfs", num_pdfs] if split == "train" else []
        run("prepare", "archive", work / f"{split}.h5",
            "--stream", f"fmllr={exp / 'fmllr' / split / 'feats.scp'}",
            "--stream", f"ivector={exp / 'ivectors' / split / 'ivectors.scp'}",
            "--stream", f"logmel={data / 'logmel' / split / 'feats.scp'}",
            "--cmvn", f"logmel={data / 'logmel' / split / 'cmvn.scp'}",
            "--utt2spk", tiny_corpus / split / "utt2spk", *targets)
    model = exp / "blstm"
    run("train", work / "train.h5", model, "--epochs", "4", "--batch", "8", "--base-batch", "8",
        "--lr", "0.5", "--warmup-epochs", "0", "--hidden", "32", "--layers", "1", "--proj", "0",
        "--threads", "1", "--no-resume")
    run("decode", model / "final.pt", lang / "graph", work / "test.h5", model / "decode_test",
        "--nj", "1", "--lattices", *GRID, *SEARCH, "--text", tiny_corpus / "test/text")
    run("score", "--sweep", model / "decode_test")  # a pick (on test: only the words matter here)
    out = tmp_path / "model"
    run("export", model, out, "--pick-on", model / "decode_test")
    settings = json.loads((out / "settings.json").read_text())
    assert [s["kind"] for s in settings["streams"]] == ["fmllr", "ivector", "features"]
    assert settings["streams"][0]["options"]["lda_dim"] == 20
    assert (out / "ivector/extractor.npz").is_file() and (out / "fmllr/gmm/gmm.npz").is_file()
    got = tmp_path / "got"
    run("transcribe", out, tiny_corpus / "test", "--out", got)
    picked = (model / "decode_test/best_wer").read_text().split()[-1].split("wer_")[-1]
    hyp = (got / "text").read_text().split("\n")
    ref = (model / f"decode_test/hyp/{picked}.txt").read_text().split("\n")
    assert [h.split() for h in hyp] == [r.split() for r in ref]

"""The whole chain through the CLI on tiny_corpus: lang, features, archives, a few epochs of
a small BLSTM, decode, score. Slow (about a minute): it checks that the stages fit."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from asrtrain.cli.main import cli


def _run(args: list[str]) -> str:
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, f"{args[:2]}: {res.output}"
    return res.output


@pytest.mark.slow
def test_corpus_to_wer(tiny_corpus, tmp_path):
    lang = tmp_path / "lang"
    _run(["prepare", "lang", tiny_corpus / "dict", tiny_corpus / "lm_text", tiny_corpus, lang,
          "--num-pdfs", "200"])
    num_pdfs = (lang / "num_pdfs").read_text().strip()
    for split in ("train", "dev"):
        _run(["prepare", "features", tiny_corpus / split, tmp_path / "feats" / split, "--nj", "1"])
        feats = tmp_path / "feats" / split
        extra = (["--ali", lang / "pdf_ali" / f"{split}.scp", "--num-pdfs", num_pdfs]
                 if split == "train" else [])
        _run(["prepare", "archive", tmp_path / f"{split}.h5", "--stream", f"fbank={feats / 'feats.scp'}",
              "--cmvn", f"fbank={feats / 'cmvn.scp'}", "--utt2spk", feats / "utt2spk", *extra])
    exp = tmp_path / "exp"
    _run(["train", tmp_path / "train.h5", exp, "--epochs", "3", "--batch", "16", "--base-batch", "16",
          "--lr", "0.5", "--warmup-epochs", "0", "--hidden", "32", "--layers", "1", "--proj", "0",
          "--threads", "1", "--no-resume"])
    out = tmp_path / "decode"
    printed = _run(["decode", exp / "final.pt", lang / "graph", tmp_path / "dev.h5", out,
                    "--nj", "2", "--lmwt", "9:10", "--text", tiny_corpus / "dev" / "text"])
    assert "real-time factor" in printed
    assert sorted(p.name for p in (out / "hyp").iterdir()) == ["10.txt", "9.txt"]
    refs = (out / "ref.txt").read_text().splitlines()
    hyps = (out / "hyp" / "10.txt").read_text().splitlines()
    assert [r.split()[0] for r in refs] == [h.split()[0] for h in hyps]
    _run(["score", "--sweep", out])
    assert (out / "best_wer").read_text().startswith("%WER")

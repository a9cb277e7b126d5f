"""On the embedded corpus, a small model learns the phones.

corpus (``tiny_corpus``) → log-mel + deltas (``make_features``) → archives with
per-speaker CMVN and the phone ids of ``ali.scp`` as targets (``write_archive``;
num_pdfs = phones incl. <eps>) → ``train``. Held-out frame accuracy must rise
well above the majority class (silence) within a few epochs.
"""

from __future__ import annotations

from pathlib import Path

from asrtrain.data.archive import Archive
from asrtrain.model.blstm import ModelConfig
from asrtrain.train.config import TrainConfig
from asrtrain.train.trainer import train


def corpus_archive(corpus: Path, split: str, work: Path, num_pdfs: int) -> Path:
    """The split's training archive, made with the library behind `prepare features/archive`."""
    from asrtrain.data.features import FeatureConfig, make_features
    from asrtrain.data.fuse import Stream, read_cmvn_scp
    from asrtrain.data.kaldi_dir import read_utt2spk

    feats = work / split
    make_features(corpus / split, feats, FeatureConfig(type="logmel", deltas=True), nj=1)
    out = work / f"{split}.h5"
    stream = Stream("logmel", feats / "feats.scp", cmvn=read_cmvn_scp(feats / "cmvn.scp"))
    from asrtrain.data.archive_writer import write_archive

    write_archive(out, [stream], ali_scp=str(corpus / split / "ali.scp"), num_pdfs=num_pdfs,
                  utt2spk=read_utt2spk(feats / "utt2spk"))
    return out


def test_small_model_learns_phones_on_the_corpus(tiny_corpus: Path, tmp_path: Path) -> None:
    corpus = tiny_corpus
    from asrtrain.data.kaldi_dir import read_table

    num_pdfs = 1 + max(int(v) for v in read_table(corpus / "phones.txt").values())
    train_h5 = corpus_archive(corpus, "train", tmp_path, num_pdfs)
    dev_h5 = corpus_archive(corpus, "dev", tmp_path, num_pdfs)
    cfg = TrainConfig(archive=train_h5, exp=tmp_path / "exp", valid=dev_h5, epochs=5, batch=16,
                      base_batch=16, lr=0.5, warmup_epochs=0, block_chunks=64, num_threads=1,
                      model=ModelConfig(hidden=32, layers=1, proj=32), log_every=20)
    result = train(cfg)
    dev = Archive(dev_h5)
    majority = dev.priors.max() / dev.priors.sum()
    accs = [row["valid_acc"] for row in result.history]
    assert accs[-1] > majority + 0.15 and accs[-1] > 1.5 * majority, (accs, majority)
    assert result.history[-1]["valid_loss"] < result.history[0]["valid_loss"]

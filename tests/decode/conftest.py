from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


@pytest.fixture(scope="session")
def mini_corpus_dec(mini_corpus):
    """The hand-made corpus of tests/lang/minicorpus.py (shared, tests/conftest.py)."""
    return mini_corpus


@pytest.fixture(scope="session")
def mini_lang_dec(mini_lang):
    """``prepare lang`` on the mini corpus (order 3, about 60 pdfs), shared with tests/lang.
    Tests that change a graph or alignments work on a copy."""
    return mini_lang[0]


DIM = 12


def _features(pdf_scp: Path, out: Path, num_pdfs: int, seed: int) -> Path:
    """A feats.scp whose frames are their pdf's embedding plus noise (a learnable task)."""
    import kaldiio

    embed = np.random.default_rng(7).normal(size=(num_pdfs, DIM))
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    with kaldiio.WriteHelper(f"ark,scp:{out / 'feats.ark'},{out / 'feats.scp'}") as w:
        for utt, pdfs in kaldiio.load_scp_sequential(str(pdf_scp)):
            w(utt, (embed[pdfs] + 0.3 * rng.normal(size=(len(pdfs), DIM))).astype(np.float32))
    return out / "feats.scp"


def _archive(lang: Path, split: str, work: Path, num_pdfs: int, targets: bool) -> Path:
    from asrtrain.data.archive_writer import write_archive
    from asrtrain.data.fuse import Stream

    scp = lang / "pdf_ali" / f"{split}.scp"
    feats = _features(scp, work / f"{split}_feats", num_pdfs, seed=len(split))
    out = work / f"{split}.h5"
    write_archive(out, [Stream("feats", feats)], ali_scp=str(scp) if targets else None,
                  num_pdfs=num_pdfs if targets else None, options={"ali": str(scp)} if targets else {})
    return out


@pytest.fixture(scope="session")
def trained(mini_lang_dec, tmp_path_factory):
    """(final.pt, dev archive without targets): 2-layer BLSTM, 150 full-batch Adam steps."""
    return fit_model(mini_lang_dec, tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="session")
def trained_with_context(trained, tmp_path_factory) -> Path:
    """``trained``'s model saved as one trained with ``train --context 3`` (the context is read
    from ``train_config`` in its metadata, as for a model ``asrtrain train`` wrote)."""
    from asrtrain.model.io import load_final, save_final

    base = load_final(trained[0])
    return save_final(tmp_path_factory.mktemp("context") / "ctx.pt", base.model, base.priors, base.layout,
                      {**base.meta, "train_config": {"context": 3}})


def fit_model(lang: Path, work: Path, dev_targets: bool = False) -> tuple[Path, Path, float]:
    """A BLSTM fitted to ``lang``'s train targets (features: each frame's pdf embedded, plus
    noise), 150 full-batch Adam steps: (final.pt, dev archive, last loss). Tests elsewhere
    (tests/align/test_network_align.py) load this module to fit their own lang."""
    import torch

    from asrtrain.data.archive import Archive
    from asrtrain.model.blstm import BLSTM, ModelConfig
    from asrtrain.model.io import save_final

    torch.manual_seed(0)
    num_pdfs = int((lang / "num_pdfs").read_text())
    train = Archive(_archive(lang, "train", work, num_pdfs, targets=True))
    dev = _archive(lang, "dev", work, num_pdfs, targets=dev_targets)
    model = BLSTM(ModelConfig(input_dim=DIM, hidden=24, layers=1, proj=0, num_pdfs=num_pdfs))
    model.set_normalization(train.mean, train.var)
    x, y = train.read_chunks(0, train.num_chunks)
    x, y = torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.int64))
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    for _ in range(150):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, num_pdfs), y.reshape(-1),
                                                 ignore_index=-1)
        loss.backward()
        opt.step()
    model.eval()
    final = save_final(work / "final.pt", model, train.priors, train.layout,
                       {"archive_header": {"options": train.header["options"]}})
    return final, dev, loss.item()

"""Decoding with a real model: a tiny BLSTM briefly trained on pdf-embedding features."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from asrtrain.core.errors import InputError
from asrtrain.decode.decoder import DecodeConfig, decode

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
    from asrtrain.data.archive import write_archive
    from asrtrain.data.fuse import Stream

    scp = lang / "pdf_ali" / f"{split}.scp"
    feats = _features(scp, work / f"{split}_feats", num_pdfs, seed=len(split))
    out = work / f"{split}.h5"
    write_archive(out, [Stream("feats", feats)], ali_scp=str(scp) if targets else None,
                  num_pdfs=num_pdfs if targets else None, options={"ali": str(scp)} if targets else {})
    return out


@pytest.fixture(scope="module")
def trained(mini_lang_dec, tmp_path_factory):
    """(final.pt, dev archive without targets): 2-layer BLSTM, 150 full-batch Adam steps."""
    import torch

    from asrtrain.data.archive import Archive
    from asrtrain.model.blstm import BLSTM, ModelConfig
    from asrtrain.model.io import save_final

    torch.manual_seed(0)
    num_pdfs = int((mini_lang_dec / "num_pdfs").read_text())
    work = tmp_path_factory.mktemp("model")
    train = Archive(_archive(mini_lang_dec, "train", work, num_pdfs, targets=True))
    dev = _archive(mini_lang_dec, "dev", work, num_pdfs, targets=False)
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


def test_trained_model_decodes_the_dev_set(trained, mini_lang_dec, mini_corpus_dec, tmp_path):
    import kaldialign

    final, dev, loss = trained
    assert loss < 1.0
    out = tmp_path / "decode"
    figures = decode(DecodeConfig(graph=mini_lang_dec / "graph", out=out, model=final, data=dev,
                                  nj=1, lmwts=[10.0], text=mini_corpus_dec / "dev" / "text"))
    ref = dict((ln.split()[0], ln.split()[1:]) for ln in (out / "ref.txt").read_text().splitlines())
    hyp = dict((ln.split()[0], ln.split()[1:]) for ln in (out / "hyp" / "10.txt").read_text().splitlines())
    errors = sum(kaldialign.edit_distance([w.replace("REED", "READ") for w in ref[u]], hyp[u])["total"]
                 for u in ref)
    assert errors <= 1
    assert figures["utterances"] == 5 and figures["rtf_decode_per_lmwt"] < 1


def test_model_for_another_tree_is_refused(trained, mini_lang_dec, tmp_path):
    import shutil

    final, dev, _ = trained
    graph = tmp_path / "graph"
    shutil.copytree(mini_lang_dec / "graph", graph)
    info = (graph / "info.json").read_text()
    tree_id = (graph / "tree_id").read_text().strip()
    (graph / "info.json").write_text(info.replace(tree_id, "ffffffffffffffff"))
    with pytest.raises(InputError, match="graph was built for tree ffffffffffffffff, the model .* "
                                         f"for tree {tree_id}"):
        decode(DecodeConfig(graph=graph, out=tmp_path / "d", model=final, data=dev))


def test_model_with_other_pdf_count_is_refused(trained, mini_lang_dec, tmp_path):
    from asrtrain.model.blstm import BLSTM, ModelConfig
    from asrtrain.model.io import save_final

    _, dev, _ = trained
    num_pdfs = int((mini_lang_dec / "num_pdfs").read_text())
    other = save_final(tmp_path / "other.pt", BLSTM(ModelConfig(input_dim=DIM, hidden=4, layers=1,
                                                                proj=0, num_pdfs=num_pdfs + 5)),
                       np.ones(num_pdfs + 5), [])
    with pytest.raises(InputError, match=f"the model has {num_pdfs + 5} outputs, the graph {num_pdfs} pdfs"):
        decode(DecodeConfig(graph=mini_lang_dec / "graph", out=tmp_path / "d", model=other, data=dev))

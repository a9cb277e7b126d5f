"""Decoding with a real model: a tiny BLSTM briefly trained on pdf-embedding features."""

from __future__ import annotations

import numpy as np
import pytest

from asrtrain.core.errors import InputError
from asrtrain.decode.decoder import DecodeConfig, decode

DIM = 12  # the feature dimension of conftest.trained


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

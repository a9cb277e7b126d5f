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


def test_a_context_model_is_scored_with_its_context_by_decode_and_transcribe(trained, trained_with_context):
    """A model trained with ``--context C`` keeps C in its metadata; ``decode``'s scorer and
    ``transcribe``'s network both read it there and give the same scores, which differ from the
    same weights run on bare chunks."""
    from asrtrain.data.shards import open_archive
    from asrtrain.decode.loglikes import ModelScorer
    from asrtrain.transcribe.network import Network

    final, dev, _ = trained
    decode_scores, bare = ModelScorer(trained_with_context, dev, None), ModelScorer(final, dev, None)
    network = Network(trained_with_context, decode_scores.num_pdfs, device="cpu")
    assert decode_scores.context == network.context == 3 and bare.context == 0
    archive = open_archive(dev)
    transcribe_scores = network.scorer(archive)
    utts = [u for u, frames in decode_scores.utterances() if frames > archive.chunk][:3]   # several chunks
    assert utts
    for utt in utts:
        np.testing.assert_allclose(transcribe_scores(utt), decode_scores(utt), rtol=1e-5, atol=1e-5)
        assert not np.allclose(decode_scores(utt), bare(utt), atol=1e-4)

"""``decode --ensemble``: the networks' mean score, one search; members checked against the graph."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.decode.decoder import DecodeConfig, decode

DIM = 12  # the feature dimension of conftest.trained


def _other_draw(final, tmp_path, seed: int = 7):
    """``final``'s model with perturbed weights: another member on the same tree."""
    import torch

    from asrtrain.model.io import load_final, save_final

    base = load_final(final)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in base.model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    return save_final(tmp_path / "other.pt", base.model, base.priors, base.layout, base.meta)


def test_ensemble_scores_are_the_members_mean(trained, tmp_path):
    from asrtrain.decode.ensemble import EnsembleScorer
    from asrtrain.decode.loglikes import ModelScorer

    final, dev, _ = trained
    other = _other_draw(final, tmp_path)
    ens, a, b = EnsembleScorer([final, other], dev, None), ModelScorer(final, dev, None), \
        ModelScorer(other, dev, None)
    assert ens.utterances() == a.utterances()
    for utt, _ in a.utterances()[:3]:
        assert not np.allclose(a(utt), b(utt), atol=1e-3)   # the members differ
        np.testing.assert_allclose(ens(utt), (a(utt) + b(utt)) / 2, rtol=1e-5, atol=1e-5)


def test_decode_with_an_ensemble_writes_hyps(trained, mini_lang_dec, mini_corpus_dec, tmp_path):
    from asrtrain.cli.main import cli

    final, dev, _ = trained
    other = _other_draw(final, tmp_path)
    out = tmp_path / "decode"
    result = CliRunner().invoke(cli, ["decode", str(final), str(mini_lang_dec / "graph"), str(dev),
                                      str(out), "--nj", "1", "--lmwt", "10", "--ensemble", str(other),
                                      "--text", str(mini_corpus_dec / "dev" / "text")])
    assert result.exit_code == 0, result.output
    hyps = (out / "hyp" / "10.txt").read_text().splitlines()
    assert len(hyps) == 5 and any(len(h.split()) > 1 for h in hyps)


def test_an_ensemble_member_of_another_size_is_refused(trained, mini_lang_dec, tmp_path):
    from asrtrain.model.blstm import BLSTM, ModelConfig
    from asrtrain.model.io import save_final

    final, dev, _ = trained
    num_pdfs = int((mini_lang_dec / "num_pdfs").read_text())
    odd = save_final(tmp_path / "odd.pt", BLSTM(ModelConfig(input_dim=DIM, hidden=4, layers=1, proj=0,
                                                            num_pdfs=num_pdfs + 3)),
                     np.ones(num_pdfs + 3), [])
    with pytest.raises(InputError, match=f"the model has {num_pdfs + 3} outputs"):
        decode(DecodeConfig(graph=mini_lang_dec / "graph", out=tmp_path / "d", model=final, data=dev,
                            ensemble=[odd]))


def test_an_ensemble_member_of_another_tree_is_refused(trained, mini_lang_dec, tmp_path):
    from asrtrain.model.io import load_final, save_final

    final, dev, _ = trained
    base = load_final(final)
    other = save_final(tmp_path / "tree.pt", base.model, base.priors, base.layout,
                       {**base.meta, "tree_id": "ffffffffffffffff"})
    with pytest.raises(InputError, match=f"the model {other} for tree ffffffffffffffff"):
        decode(DecodeConfig(graph=mini_lang_dec / "graph", out=tmp_path / "d", model=final, data=dev,
                            ensemble=[other]))


def test_an_ensemble_is_refused_for_a_gmm(tmp_path):
    from asrtrain.decode.job import make_scorer

    feats = tmp_path / "feats"
    feats.mkdir()
    (feats / "feats.scp").write_text("")
    cfg = DecodeConfig(graph=tmp_path, out=tmp_path / "d", model=tmp_path / "sat.pt", data=feats,
                       ensemble=[tmp_path / "x.pt"])
    with pytest.raises(ConfigError, match="--ensemble averages networks"):
        make_scorer(cfg, 10)

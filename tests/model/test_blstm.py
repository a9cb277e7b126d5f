"""The BLSTM acoustic model: the paper's size, shapes, normalisation, config errors."""

from __future__ import annotations

import pytest
import torch

from asrtrain.core.errors import ConfigError
from asrtrain.model.blstm import BLSTM, ModelConfig


def test_default_is_the_papers_43m_model() -> None:
    cfg = ModelConfig()
    assert (cfg.input_dim, cfg.hidden, cfg.layers, cfg.proj, cfg.num_pdfs) == (260, 512, 6, 256, 32000)
    model = BLSTM(cfg)  # instantiated once: the analytic count must equal the real one
    counted = sum(p.numel() for p in model.parameters())
    assert counted == cfg.num_parameters()
    assert abs(counted - 43_000_000) <= 1_000_000
    assert counted == 43_154_944


def test_train_flops_per_frame_is_about_026_gflop() -> None:
    flops = ModelConfig().train_flops_per_frame()
    assert flops == pytest.approx(0.26e9, rel=0.01)
    # 6 FLOPs per weight per frame (2 forward, 4 backward) up to biases
    assert flops == pytest.approx(6 * ModelConfig().num_parameters(), rel=0.005)


@pytest.mark.parametrize("proj", [0, 3])
def test_tiny_model_shapes_and_count(proj: int) -> None:
    cfg = ModelConfig(input_dim=7, hidden=5, layers=2, proj=proj, num_pdfs=11)
    model = BLSTM(cfg)
    assert sum(p.numel() for p in model.parameters()) == cfg.num_parameters()
    out = model(torch.randn(4, 21, 7))
    assert out.shape == (4, 21, 11)


def test_normalisation_is_inside_the_model() -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(input_dim=3, hidden=4, layers=1, proj=2, num_pdfs=5)
    model = BLSTM(cfg)
    x = torch.randn(2, 6, 3)
    mean, var = torch.tensor([10.0, -5.0, 0.5]), torch.tensor([4.0, 0.25, 9.0])
    expected = model(x)
    model.set_normalization(mean, var)
    shifted = x * var.sqrt() + mean  # the same inputs before normalisation
    assert torch.allclose(model(shifted), expected, atol=1e-5)
    state = model.state_dict()
    assert torch.equal(state["feat_mean"], mean) and torch.allclose(state["feat_std"], var.sqrt())


def test_bad_sizes_and_inputs() -> None:
    with pytest.raises(ConfigError, match="hidden"):
        ModelConfig(hidden=0)
    with pytest.raises(ConfigError, match="unknown model option"):
        ModelConfig.from_dict({"hiden": 3})
    model = BLSTM(ModelConfig(input_dim=3, hidden=2, layers=1, proj=0, num_pdfs=4))
    with pytest.raises(ConfigError, match="dim 4"):
        model.set_normalization(torch.zeros(4), torch.ones(4))
    with pytest.raises(ValueError, match=r"\[B, T, 3\]"):
        model(torch.zeros(2, 5, 4))


def test_constant_columns_are_only_centred() -> None:
    model = BLSTM(ModelConfig(input_dim=3, hidden=2, layers=1, proj=0, num_pdfs=2))
    model.set_normalization([1.0, 2.0, 3.0], [4.0, 0.0, 1e-12])
    assert model.feat_std.tolist() == [2.0, 1.0, 1.0]

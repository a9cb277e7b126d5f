"""--optimizer adam: what the trainer steps with, a resume that is exact, a mismatch refused,
and learners' states merged when a job resumes on another shape."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.core.errors import ConfigError
from asrtrain.model.blstm import ModelConfig
from asrtrain.model.io import load_final
from asrtrain.train.config import TrainConfig
from asrtrain.train.optim import make_optimizer, mean_state, state_kind
from asrtrain.train.trainer import Trainer, train

TINY = ModelConfig(hidden=16, layers=1, proj=8)


def _cfg(archives: tuple[Path, Path], exp: Path, **kw) -> TrainConfig:
    base = dict(archive=archives[0], exp=exp, valid=archives[1], epochs=2, batch=16, base_batch=16,
                lr=0.003, warmup_epochs=0, model=TINY, num_threads=1, select="last", optimizer="adam")
    return TrainConfig(**{**base, **kw})


def test_the_trainer_steps_with_adamw_and_beta1_is_the_momentum(learnable_archives, tmp_path):
    trainer = Trainer(_cfg(learnable_archives, tmp_path / "e", momentum=0.8, weight_decay=0.01))
    opt = trainer.optimizer
    assert isinstance(opt, torch.optim.AdamW)
    assert opt.param_groups[0]["betas"] == (0.8, 0.999) and opt.param_groups[0]["weight_decay"] == 0.01
    assert state_kind(opt.state_dict()) == "adam"
    sgd = Trainer(_cfg(learnable_archives, tmp_path / "s", optimizer="sgd")).optimizer
    assert isinstance(sgd, torch.optim.SGD) and state_kind(sgd.state_dict()) == "sgd"


def test_adam_resumed_after_an_epoch_ends_as_an_unbroken_run(learnable_archives, tmp_path):
    train(_cfg(learnable_archives, tmp_path / "ref"))
    train(_cfg(learnable_archives, tmp_path / "cut", epochs=1))
    train(_cfg(learnable_archives, tmp_path / "cut", epochs=2))   # resumes after epoch 1
    ref = load_final(tmp_path / "ref" / "final.pt").model.state_dict()
    cut = load_final(tmp_path / "cut" / "final.pt").model.state_dict()
    assert ref.keys() == cut.keys()
    for key in ref:
        assert torch.equal(ref[key], cut[key]), key  # a fresh Adam after the resume would differ


def test_resuming_with_another_optimizer_is_refused_naming_it(learnable_archives, tmp_path):
    train(_cfg(learnable_archives, tmp_path / "e", epochs=1, optimizer="sgd", lr=0.3))
    with pytest.raises(ConfigError, match="--optimizer sgd, this run asks for adam"):
        train(_cfg(learnable_archives, tmp_path / "e", epochs=2))


def test_merging_learners_averages_the_moments_and_keeps_the_step():
    states = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        p = torch.nn.Parameter(torch.randn(5))
        opt = make_optimizer("adam", [p], 0.01, 0.9, False, 0.0, torch.device("cpu"))
        for _ in range(3):
            opt.zero_grad()
            (p * torch.randn(5)).sum().backward()
            opt.step()
        states.append(opt.state_dict())
    merged = mean_state(states[0], states)
    for key in ("exp_avg", "exp_avg_sq"):
        want = (states[0]["state"][0][key] + states[1]["state"][0][key]) / 2
        assert torch.allclose(merged["state"][0][key], want)
    assert torch.equal(merged["state"][0]["step"], states[0]["state"][0]["step"])
    # SGD's momentum buffer the same way
    sgd = []
    for value in (1.0, 3.0):
        p = torch.nn.Parameter(torch.zeros(2))
        opt = make_optimizer("sgd", [p], 0.1, 0.9, False, 0.0, torch.device("cpu"))
        p.grad = torch.full((2,), value)
        opt.step()
        sgd.append(opt.state_dict())
    assert torch.equal(mean_state(sgd[0], sgd)["state"][0]["momentum_buffer"], torch.full((2,), 2.0))


def test_nesterov_with_adam_and_an_unknown_optimizer_are_refused(learnable_archives, tmp_path):
    with pytest.raises(ConfigError, match="--nesterov is SGD's"):
        _cfg(learnable_archives, tmp_path, nesterov=True)
    with pytest.raises(ConfigError, match="--optimizer must be one of sgd, adam"):
        _cfg(learnable_archives, tmp_path, optimizer="lamb")
    out = CliRunner().invoke(cli, ["train", str(learnable_archives[0]), str(tmp_path / "x"), "--optimizer", "lamb"])
    assert out.exit_code == 2 and "--optimizer" in out.output

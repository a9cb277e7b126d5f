"""The simulator against the real thing: SSGD equals one learner, gossip keeps the mean and mixes
at the rate the ring's matchings give."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from asrtrain.distributed.topology import matching, mixing_matrix, spectral_gap
from asrtrain.model.config import ModelConfig
from asrtrain.study.simulate import SimConfig, SimTrainer, simulate
from asrtrain.train.config import TrainConfig
from asrtrain.train.trainer import train

ROOT = Path(__file__).resolve().parents[2]
TINY = ModelConfig(hidden=8, layers=1, proj=0, dropout=0.0)


@pytest.fixture(scope="module")
def archives(tmp_path_factory) -> tuple[Path, Path]:
    spec = importlib.util.spec_from_file_location("train_conftest", ROOT / "tests" / "train" / "conftest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    root = tmp_path_factory.mktemp("study_archives")
    return (mod.write_learnable_archive(root / "train.h5", 40, seed=0),
            mod.write_learnable_archive(root / "valid.h5", 10, seed=1))


def _cfg(archives, exp: Path, **kw) -> TrainConfig:
    base = dict(archive=archives[0], valid=archives[1], exp=exp, epochs=2, batch=16, base_batch=16, lr=0.2,
                warmup_epochs=0, momentum=0.5, block_chunks=32, model=TINY, log_every=1000, num_threads=1,
                prefetch=2)
    base.update(kw)
    return TrainConfig(**base)


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def test_simulated_ssgd_is_one_learner_at_the_total_batch(archives, tmp_path):
    one = train(_cfg(archives, tmp_path / "one"))
    result, strategy = simulate(_cfg(archives, tmp_path / "sim"), SimConfig("ssgd", learners=4))
    assert strategy.n == 1
    ref = torch.load(one.final_path, weights_only=False)["state_dict"]
    got = torch.load(result.final_path, weights_only=False)["state_dict"]
    for name in ref:
        assert torch.allclose(ref[name].float(), got[name].float(), atol=1e-5, rtol=0), name
    assert result.history[-1]["valid_loss"] == pytest.approx(one.history[-1]["valid_loss"], abs=1e-5)


def test_h_adpsgd_with_one_super_learner_is_ssgd(archives, tmp_path):
    a, _ = simulate(_cfg(archives, tmp_path / "a", epochs=1), SimConfig("ssgd", learners=4))
    b, s = simulate(_cfg(archives, tmp_path / "b", epochs=1), SimConfig("h-adpsgd", learners=4, group_size=4))
    assert s.n == 1 and s.rounds == 0
    assert a.history[-1]["train_loss"] == b.history[-1]["train_loss"]


@pytest.mark.parametrize("topology", ["ring", "random-ring"])
def test_adpsgd_at_lr_0_keeps_the_mean_and_mixes_as_the_matchings_say(archives, tmp_path, topology):
    sim = SimConfig("adpsgd", learners=8, topology=topology, delay=0, perturb=1.0, gossip_seed=3)
    trainer = SimTrainer(_cfg(archives, tmp_path / "exp", lr=0.0, momentum=0.0, epochs=1), sim)
    s = trainer.sim_strategy
    x0 = torch.stack([torch.cat([t.reshape(-1) for t in ps]) for ps in s.params]).double()
    mean0 = x0.mean(0)
    net = trainer.strategy.wrap(trainer.model)
    batches = trainer.loader.epoch(1, list(range(trainer.loader.num_blocks)))
    from asrtrain.train.device import ahead

    for batch in ahead(batches, trainer.device):
        trainer.train_step(net, batch, 0.0)
    x = torch.stack([torch.cat([t.reshape(-1) for t in ps]) for ps in s.params]).double()
    assert torch.allclose(x.mean(0), mean0, atol=1e-6, rtol=0)
    # the same rounds as pure linear algebra on the initial weights
    expect = x0.numpy()
    for k in range(s.rounds):
        expect = mixing_matrix(matching(8, k, topology, 3, sim.reshuffle_every)) @ expect
    assert np.allclose(x.numpy(), expect, atol=1e-5)
    # and no slower than the spectral gap's bound: spread² shrinks by (1 − gap) a round in expectation
    rate = (s.spread[-1] / s.spread[0]) ** (1 / s.rounds)
    bound = (1 - spectral_gap(8, topology, 3, sim.reshuffle_every, rounds=256)) ** 0.5
    assert s.rounds >= 3 and rate <= bound + 0.02, (rate, bound)
    trainer.strategy.close()


@pytest.mark.parametrize("variant", [dict(delay=1), dict(delay_by_one="gradient")])
def test_delay_variants_keep_the_mean_at_lr_0_and_train(archives, tmp_path, variant):
    sim = SimConfig("adpsgd", learners=4, perturb=0.5, **variant)
    result, s = simulate(_cfg(archives, tmp_path / "exp", epochs=2), sim)
    assert s.rounds > 0 and result.history[-1]["valid_loss"] < result.history[0]["valid_loss"] * 1.5
    assert s.spread[-1] == pytest.approx(0.0, abs=1e-6)  # the epoch ends on the global average

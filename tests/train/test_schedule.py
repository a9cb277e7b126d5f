"""The papers' learning-rate recipe, checked against their worked example."""

from __future__ import annotations

import math

import pytest

from asrtrain.core.errors import ConfigError
from asrtrain.train.config import TrainConfig
from asrtrain.train.schedule import LRSchedule


def paper(**kw: object) -> LRSchedule:
    """The schedule of the paper's defaults (TrainConfig's), with ``kw`` changed."""
    return LRSchedule.from_config(TrainConfig("a.h5", "exp", **kw))  # type: ignore[arg-type]


def test_papers_worked_example() -> None:
    s = paper(lr=0.1, batch=2560, base_batch=256, warmup_epochs=10)
    assert s.peak_lr == pytest.approx(1.0)
    rates = s.table(16)
    for epoch in range(1, 11):  # rises by 0.1 per epoch to 1.0 at epoch 10
        assert rates[epoch - 1] == pytest.approx(0.1 * epoch)
    for epoch in range(11, 17):  # then falls by 1/sqrt(2) per epoch
        assert rates[epoch - 1] == pytest.approx(rates[epoch - 2] / math.sqrt(2))
    assert rates[-1] == pytest.approx(0.125)


def test_from_train_config_defaults_match() -> None:
    cfg = TrainConfig("a.h5", "exp", batch=2560)
    s = LRSchedule.from_config(cfg)
    assert s.peak_lr == pytest.approx(1.0)
    assert s.lr(5) == pytest.approx(0.5) and s.lr(12) == pytest.approx(0.5)


def test_step_granularity_interpolates_the_warmup_only() -> None:
    s = paper(batch=2560, warmup_granularity="step")
    assert s.lr(1, 0.0) == pytest.approx(0.1)
    assert s.lr(1, 0.5) == pytest.approx(0.15)
    assert s.lr(9, 1.0) == pytest.approx(1.0)
    assert s.lr(10, 0.7) == pytest.approx(1.0)
    assert s.lr(11, 0.7) == pytest.approx(1 / math.sqrt(2))


def test_no_warmup_and_small_batches() -> None:
    assert paper(warmup_epochs=0, batch=512).table(3) == pytest.approx([0.2, 0.2 / 2 ** 0.5, 0.1])
    # a batch below 256 has a peak below the base rate: it starts there, no warm-up
    assert paper(batch=128, warmup_epochs=3).table(4) == pytest.approx([0.05, 0.05, 0.05, 0.05 / 2 ** 0.5])
    with pytest.raises(ValueError):
        paper().lr(0)
    with pytest.raises(ConfigError):
        LRSchedule(0.1, 256, 256, 10, 0.5, granularity="minute")


def test_per_learner_batch() -> None:
    cfg = TrainConfig("a.h5", "exp", batch=1024)
    assert cfg.per_learner_batch(1) == 1024 and cfg.per_learner_batch(4) == 256
    with pytest.raises(ConfigError, match="does not split evenly over 3"):
        cfg.per_learner_batch(3)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="unknown training option"):
        TrainConfig.from_dict({**cfg.to_dict(), "bach": 3})

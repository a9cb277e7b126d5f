"""The plateau schedule's decisions on given held-out loss histories (no training)."""

from __future__ import annotations

import math

import pytest

from asrtrain.core.errors import ConfigError
from asrtrain.train.config import TrainConfig
from asrtrain.train.plateau import Plateau, PlateauState, relative_improvement


def plateau(**kw: object) -> Plateau:
    """The plateau schedule of TrainConfig's defaults with ``kw`` changed (batch 256: peak = base 0.1)."""
    base: dict[str, object] = dict(valid="v.h5", lr_schedule="plateau", warmup_epochs=3, batch=512)
    base.update(kw)
    return Plateau.from_config(TrainConfig("a.h5", "exp", **base))  # type: ignore[arg-type]


def states(schedule: Plateau, losses: list[float]) -> list[PlateauState]:
    """The state after each epoch, folded one epoch at a time as the trainer does."""
    out, state = [], PlateauState()
    for epoch, loss in enumerate(losses, 1):
        state = schedule.advance(state, epoch, loss)
        out.append(state)
    return out


LOSSES = [3.0, 2.5, 2.0, 1.9, 1.895, 1.80, 1.85, 1.79]


def test_keeps_the_peak_while_improving_and_halves_on_each_plateau() -> None:
    s = plateau()  # threshold 1%, warm-up 3 epochs from 0.1 to the peak 0.2
    seen = states(s, LOSSES)
    # epochs 1-2 warm up; from epoch 3 each loss is compared with the lowest before it:
    # 3: 20% better, 4: 5%, 5: 0.26% (plateau), 6: 5%, 7: worse, 8: 0.56% (plateau)
    assert [x.decision for x in seen] == ["warm-up", "warm-up", "keep", "keep", "halve", "keep", "halve", "halve"]
    assert [x.halvings for x in seen] == [0, 0, 0, 0, 1, 1, 2, 3]
    assert [x.best for x in seen] == [3.0, 2.5, 2.0, 1.9, 1.895, 1.80, 1.80, 1.79]
    assert not any(x.stop for x in seen)
    # the rate of epoch e follows from the state after epoch e-1
    rates = [s.lr(e, 0.0, seen[e - 2] if e > 1 else PlateauState()) for e in range(1, 10)]
    assert rates == pytest.approx([0.1, 0.15, 0.2, 0.2, 0.2, 0.1, 0.1, 0.05, 0.025])


def test_replaying_the_history_gives_the_state_step_by_step() -> None:
    s = plateau()
    for n in range(len(LOSSES) + 1):
        assert s.replay(LOSSES[:n]) == (states(s, LOSSES[:n])[-1] if n else PlateauState())


def test_plateau_stop_ends_training_after_k_halvings() -> None:
    seen = states(plateau(plateau_stop=1), LOSSES)
    assert [x.decision for x in seen[:7]] == ["warm-up", "warm-up", "keep", "keep", "halve", "keep", "stop"]
    assert seen[6].stop and seen[6].halvings == 1
    first = states(plateau(plateau_stop=0), LOSSES)  # plain early stopping at the peak rate
    assert [x.decision for x in first[:5]] == ["warm-up", "warm-up", "keep", "keep", "stop"]


def test_threshold_no_warmup_and_bad_losses() -> None:
    s = plateau(warmup_epochs=0, plateau_threshold=0.1)
    seen = states(s, [2.0, 1.7, 1.6, math.nan, 1.0])
    # 1: nothing to compare with; 2: 15% > 10%; 3: 5.9%; a NaN held-out loss is no improvement
    assert [x.decision for x in seen] == ["first", "keep", "halve", "halve", "keep"]
    assert seen[3].best == 1.6 and seen[4].best == 1.0
    assert s.lr(1, 0.5, PlateauState()) == pytest.approx(0.2)
    assert relative_improvement(2.0, 1.5) == pytest.approx(0.25) and relative_improvement(1.0, math.inf) < 0
    # step granularity interpolates the warm-up as the paper's schedule does
    warm = plateau(warmup_granularity="step")
    assert warm.lr(1, 0.5, PlateauState()) == pytest.approx(0.125)


@pytest.mark.parametrize("kw,message", [
    (dict(valid=None), "--lr-schedule plateau needs --valid"),
    (dict(plateau_threshold=1.0), "--plateau-threshold must be in [0, 1)"),
    (dict(plateau_threshold=math.nan), "--plateau-threshold must be in [0, 1)"),
    (dict(plateau_stop=-1), "--plateau-stop must be >= 0"),
    (dict(lr_schedule="newbob"), "--lr-schedule must be one of paper, plateau"),
])
def test_config_errors(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        plateau(**kw)
    assert message in str(info.value)

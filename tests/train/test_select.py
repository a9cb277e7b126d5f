"""``--select``'s rules on given epoch histories, the averaging, and the checkpoints kept for them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from asrtrain.core.errors import ConfigError
from asrtrain.train.checkpoint import (
    all_checkpoints,
    checkpoint_name,
    prune_checkpoints,
    save_checkpoint,
)
from asrtrain.train.config import TrainConfig
from asrtrain.train.select import Selection, average_states, needed_epochs, parse_selection, pick

HISTORY = [{"epoch": e, "valid_loss": v} for e, v in enumerate([2.0, 1.5, 1.2, 1.3, 1.2, 1.6], 1)]


def test_rules_pick_from_the_history() -> None:
    best = pick(Selection("best"), HISTORY)
    assert best.epochs == [3] and best.valid_loss == 1.2  # the earliest of two equal losses
    assert pick(Selection("last"), HISTORY).epochs == [6] and pick(Selection("last"), HISTORY).valid_loss == 1.6
    avg = pick(Selection("average", 3), HISTORY)
    assert avg.epochs == [4, 5, 6] and avg.losses == [1.3, 1.2, 1.6] and avg.valid_loss is None
    assert pick(Selection("average", 9), HISTORY[:2]).epochs == [1, 2]  # fewer epochs done than N
    assert avg.to_dict()["select"] == "average:3"
    nan: list[dict[str, Any]] = [{"epoch": 1, "valid_loss": math.nan}, {"epoch": 2, "valid_loss": 3.0}, {"epoch": 3, "valid_loss": "nan"}]
    assert pick(Selection("best"), nan).epochs == [2]
    assert pick(Selection("best"), [{"epoch": 1}, {"epoch": 2}]).epochs == [2]  # no held-out loss: the last
    with pytest.raises(ConfigError, match="no epoch was trained"):
        pick(Selection("best"), [])


def test_needed_epochs_follow_the_rule() -> None:
    assert needed_epochs(Selection("best"), HISTORY) == {3}
    assert needed_epochs(Selection("last"), HISTORY) == set()
    assert needed_epochs(Selection("average", 2), HISTORY) == {5, 6}


def test_parse_and_config() -> None:
    assert parse_selection("auto", has_valid=True) == Selection("best")
    assert parse_selection("auto", has_valid=False) == Selection("last")
    assert parse_selection("average:4", has_valid=False) == Selection("average", 4)
    assert TrainConfig(Path("a.h5"), Path("e"), valid=Path("v.h5")).selection == Selection("best")
    assert TrainConfig(Path("a.h5"), Path("e")).selection == Selection("last")
    for text in ("average", "average:0", "average:x", "mean:3", "Best"):
        with pytest.raises(ConfigError, match="--select must be last, best or average:N"):
            parse_selection(text, has_valid=True)
    with pytest.raises(ConfigError, match="--select best needs --valid"):
        TrainConfig(Path("a.h5"), Path("e"), select="best")
    with pytest.raises(ConfigError, match="--select average:5 averages 5 epochs, but --epochs is 3"):
        TrainConfig(Path("a.h5"), Path("e"), select="average:5", epochs=3)


def test_average_states_is_the_mean_and_keeps_equal_buffers() -> None:
    a = {"w": torch.tensor([1.0, 2.0]), "norm": torch.tensor([0.1, 0.3]), "n": torch.tensor(3)}
    b = {"w": torch.tensor([2.0, 4.0]), "norm": torch.tensor([0.1, 0.3]), "n": torch.tensor(3)}
    c = {"w": torch.tensor([3.3, 0.0]), "norm": torch.tensor([0.1, 0.3]), "n": torch.tensor(3)}
    out = average_states([a, b, c])
    assert torch.allclose(out["w"], torch.tensor([6.3 / 3, 2.0])) and out["w"].dtype == torch.float32
    assert out["norm"] is a["norm"] and out["n"] is a["n"]


def test_pruning_keeps_the_protected_epochs(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(1, 6):
        save_checkpoint(tmp_path, checkpoint_name(epoch), model, opt, {"step": epoch, "epoch": epoch})
    prune_checkpoints(tmp_path, keep=1, protect=frozenset({2}))
    assert [p.name for _, p in all_checkpoints(tmp_path)] == ["epoch-2", "epoch-5"]
    prune_checkpoints(tmp_path, keep=1)
    assert [p.name for _, p in all_checkpoints(tmp_path)] == ["epoch-5"]

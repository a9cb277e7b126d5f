"""A checkpoint of several learners is complete only with every learner's own file in it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from asrtrain.core.errors import AsrtrainError
from asrtrain.train.checkpoint import (
    clean_temporaries,
    last_checkpoint,
    load_learner_state,
    save_checkpoint,
    save_learner_state,
    staging_dir,
)


def _model_and_optimizer() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    return model, opt


def test_checkpoint_waits_for_every_learner(tmp_path: Path) -> None:
    model, opt = _model_and_optimizer()
    save_learner_state(tmp_path, "epoch-1", 0, {"optimizer": opt.state_dict(), "step": 5})
    with pytest.raises(AsrtrainError, match=r"no state from learner rank\(s\) 1"):
        save_checkpoint(tmp_path, "epoch-1", model, opt, {"step": 5, "epoch": 1}, learners=2)
    assert last_checkpoint(tmp_path) is None  # nothing looks complete
    save_learner_state(tmp_path, "epoch-1", 1, {"optimizer": opt.state_dict(), "step": 7})
    path = save_checkpoint(tmp_path, "epoch-1", model, opt, {"step": 5, "epoch": 1}, learners=2)
    assert last_checkpoint(tmp_path) == path and not staging_dir(tmp_path, "epoch-1").exists()
    own = load_learner_state(path, 1)
    assert (own["rank"], own["checkpoint"], own["step"]) == (1, "epoch-1", 7) and "torch" in own["rng"]
    assert torch.equal(own["optimizer"]["state"][0]["momentum_buffer"],
                       opt.state_dict()["state"][0]["momentum_buffer"])


def test_staged_files_of_a_killed_run_are_removed(tmp_path: Path) -> None:
    _, opt = _model_and_optimizer()
    save_learner_state(tmp_path, "epoch-3.step-40", 0, {"optimizer": opt.state_dict(), "step": 1})
    assert clean_temporaries(tmp_path) == 1 and not staging_dir(tmp_path, "epoch-3.step-40").exists()


def test_the_newest_checkpoint_is_the_last_mid_epoch_one_after_its_epochs(tmp_path: Path) -> None:
    """Order: epoch-2 < epoch-3.step-S (in epoch 3) < epoch-3; pruning keeps one mid-epoch checkpoint."""
    from asrtrain.train.checkpoint import all_checkpoints, checkpoint_name, prune_checkpoints

    model, opt = _model_and_optimizer()
    names = [checkpoint_name(2), checkpoint_name(2, 350), checkpoint_name(2, 410)]
    assert names == ["epoch-2", "epoch-3.step-350", "epoch-3.step-410"]
    for name in names:
        save_checkpoint(tmp_path, name, model, opt, {"step": 1, "epoch": 2})
    assert last_checkpoint(tmp_path).name == "epoch-3.step-410"
    prune_checkpoints(tmp_path, keep=0)
    assert [p.name for _, p in all_checkpoints(tmp_path)] == ["epoch-2", "epoch-3.step-410"]
    save_checkpoint(tmp_path, checkpoint_name(3), model, opt, {"step": 1, "epoch": 3})
    prune_checkpoints(tmp_path, keep=0)
    assert [p.name for _, p in all_checkpoints(tmp_path)] == ["epoch-2", "epoch-3"]

"""``--lr-schedule plateau`` in real training runs: the decisions survive a resume; early stopping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from asrtrain.model.blstm import ModelConfig
from asrtrain.model.io import load_final
from asrtrain.train.checkpoint import load_checkpoint
from asrtrain.train.config import TrainConfig
from asrtrain.train.plateau import Plateau
from asrtrain.train.trainer import train


def _cfg(archives: tuple[Path, Path], exp: Path, **kw: Any) -> TrainConfig:
    base: dict[str, Any] = dict(archive=archives[0], exp=exp, valid=archives[1], epochs=4, batch=16,
                                base_batch=16, lr=0.3, warmup_epochs=0, lr_schedule="plateau",
                                plateau_threshold=0.3, model=ModelConfig(hidden=16, layers=1, proj=8),
                                log_every=1000, num_threads=1)
    base.update(kw)
    return TrainConfig(**base)


def _decisions(history: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["epoch"], r["lr"], r["lr_decision"], r["lr_halvings"], r["valid_loss"]) for r in history]


def test_resume_goes_on_exactly_with_the_same_decisions(learnable_archives: tuple[Path, Path],
                                                        tmp_path: Path) -> None:
    cfg = dict(epochs=5, plateau_threshold=0.4)
    ref = train(_cfg(learnable_archives, tmp_path / "ref", **cfg))
    train(_cfg(learnable_archives, tmp_path / "cut", **{**cfg, "epochs": 3}))
    resumed = train(_cfg(learnable_archives, tmp_path / "cut", **cfg))
    assert resumed.start_epoch == 4
    assert _decisions(resumed.history) == _decisions(ref.history)
    assert min(r["lr"] for r in ref.history) < 0.3, _decisions(ref.history)  # some epoch trained halved
    # each epoch's rate is the one its predecessors' held-out losses decided
    schedule = Plateau.from_config(_cfg(learnable_archives, tmp_path / "x", **cfg))
    losses = [r["valid_loss"] for r in ref.history]
    assert [r["lr"] for r in ref.history] == [schedule.lr(e, 0.0, schedule.replay(losses[:e - 1]))
                                              for e in range(1, 6)]
    saved = load_checkpoint(tmp_path / "cut" / "checkpoints" / "epoch-5")["trainer"]["lr_state"]
    assert saved == schedule.replay(losses).to_dict()
    a = load_final(tmp_path / "ref" / "final.pt").model.state_dict()
    b = load_final(tmp_path / "cut" / "final.pt").model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_keeps_the_recorded_state_not_a_replay(learnable_archives: tuple[Path, Path],
                                                      tmp_path: Path) -> None:
    """Decisions taken stay taken: a resume with another threshold changes only the ones to come."""
    exp = tmp_path / "exp"
    first = train(_cfg(learnable_archives, exp, epochs=2, plateau_threshold=0.99))
    assert [r["lr_decision"] for r in first.history] == ["first", "halve"]
    more = train(_cfg(learnable_archives, exp, epochs=3, plateau_threshold=0.0))
    assert more.history[2]["lr"] == pytest.approx(0.15)  # halved once, as recorded (a replay at 0: 0.3)
    # a checkpoint of the paper's schedule records none: the plateau schedule replays its history
    paper = tmp_path / "paper"
    train(_cfg(learnable_archives, paper, epochs=2, lr_schedule="paper", anneal=1.0))
    assert load_checkpoint(paper / "checkpoints" / "epoch-2")["trainer"]["lr_state"] is None
    switched = train(_cfg(learnable_archives, paper, epochs=3, plateau_threshold=0.99))
    assert switched.history[2]["lr"] == pytest.approx(0.15) and switched.history[2]["lr_halvings"] >= 1


def test_plateau_stop_ends_training_and_a_rerun_trains_no_more(learnable_archives: tuple[Path, Path],
                                                               tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    cfg = _cfg(learnable_archives, exp, epochs=6, plateau_threshold=0.99, plateau_stop=1)
    result = train(cfg)
    # 1: first; 2: not 99% better, halve; 3: again, after 1 halving: stop
    assert [r["lr_decision"] for r in result.history] == ["first", "halve", "stop"]
    assert [r["lr"] for r in result.history] == pytest.approx([0.3, 0.3, 0.15])
    assert result.epochs_done == 3 and "lr_next" not in result.history[-1]
    final = load_final(exp / "final.pt")
    assert final.meta["epochs"] == 3 and final.meta["lr_schedule"]["stop"]
    again = train(cfg)
    assert again.start_epoch == 4 and again.epochs_done == 3 and again.steps == result.steps


def test_dry_run_shows_the_rule_and_the_selection(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    from click.testing import CliRunner

    from asrtrain.cli.main import cli

    res = CliRunner().invoke(cli, ["train", str(learnable_archives[0]), str(tmp_path / "e"), "--valid",
                                   str(learnable_archives[1]), "--dry-run", "--lr-schedule", "plateau",
                                   "--warmup-epochs", "3", "--batch", "32", "--base-batch", "16", "--lr", "0.1",
                                   "--plateau-stop", "2"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "warm-up 0.1, 0.15, 0.2; then peak 0.2 after the warm-up, halved whenever" in res.output
    assert "stops at a plateau after 2 halving(s)" in res.output
    assert "best: the epoch with the lowest held-out loss" in res.output

"""Worker entry for the resume tests: build the real Trainer on a checkpoint, save what it resumed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def resumed_state(strategy: Any, cfg: Any, out: str) -> None:
    """Resume ``cfg`` (no training) and save this learner's optimizer state, step and weights to ``out``."""
    from asrtrain.train.trainer import Trainer

    trainer = Trainer(cfg, strategy)
    strategy.wrap(trainer.model)  # where the loop starts: the weights it trains on
    torch.save({"optimizer": trainer.optimizer.state_dict(), "step": trainer.step,
                "start_epoch": trainer.start_epoch, "steps": strategy.steps,
                "model": trainer.model.state_dict()},
               Path(out) / f"rank{strategy.rank}.pt")

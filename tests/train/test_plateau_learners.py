"""Two gloo learners under ``--lr-schedule plateau`` agree on the rate, epoch after epoch.

ADPSGD without the global average: each learner keeps its own weights, so each has its
own held-out loss (``valid_loss_by_learner``). The decision must still be one: the main
learner's loss, the same number on both. Every learner's own checkpoint file holds the
rate its optimizer last stepped with, which is what is compared.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from asrtrain.distributed.logs import rank_log_path
from asrtrain.train.checkpoint import load_learner_state
from asrtrain.train.config import TrainConfig
from asrtrain.train.metrics import epoch_rows
from asrtrain.train.plateau import Plateau

DECISION = re.compile(r"epoch (\d): held-out loss (\S+) \(best \S+\): (\w+), rate for epoch \d: (\S+)")


@pytest.mark.slow  # 9 s; the plateau rule itself is tested in test_plateau.py
def test_two_learners_decide_the_same_rate(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    train_h5, valid_h5 = learnable_archives
    exp = tmp_path / "exp"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "PMI_RANK")}
    cmd = [sys.executable, "-m", "asrtrain.cli.main", "train", str(train_h5), str(exp), "--valid", str(valid_h5),
           "--strategy", "adpsgd", "--nproc", "2", "--no-global-average", "--epochs", "4", "--batch", "16",
           "--base-batch", "16", "--lr", "0.3", "--warmup-epochs", "0", "--lr-schedule", "plateau",
           "--plateau-threshold", "0.4", "--hidden", "8", "--layers", "1", "--proj", "0", "--block-chunks", "8",
           "--log-every", "1000"]
    proc = subprocess.run(cmd, env={**env, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = epoch_rows(exp / "metrics.jsonl")
    assert all(abs(r["valid_loss"] - r["valid_loss_by_learner"][0]) < 1e-5 for r in rows)  # the main's
    # the rates follow the main learner's held-out losses
    schedule = Plateau.from_config(TrainConfig(train_h5, exp, valid=valid_h5, lr=0.3, batch=16, base_batch=16,
                                               warmup_epochs=0, lr_schedule="plateau", plateau_threshold=0.4))
    losses = [r["valid_loss"] for r in rows]
    expected = [schedule.lr(e, 0.0, schedule.replay(losses[:e - 1])) for e in range(1, 5)]
    assert [r["lr"] for r in rows] == expected
    # every learner stepped with that rate: its optimizer's rate in its own checkpoint file
    for epoch, rate in enumerate(expected, 1):
        ckpt = exp / "checkpoints" / f"epoch-{epoch}"
        stepped = [load_learner_state(ckpt, r)["optimizer"]["param_groups"][0]["lr"] for r in (0, 1)]
        assert stepped == [rate, rate], (epoch, stepped)
        assert torch.load(ckpt / "trainer.pt", weights_only=False)["lr_state"]["halvings"] == \
            schedule.replay(losses[:epoch]).halvings
    # and each learner logged the same decisions on the same loss
    logs = [DECISION.findall(rank_log_path(exp / "log", r).read_text()) for r in (0, 1)]
    assert len(logs[0]) == 3 and logs[0] == logs[1], logs

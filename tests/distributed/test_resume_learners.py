"""Every learner's own checkpoint state: written with the checkpoint, loaded by that learner on resume."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_run import run_train as _run  # noqa: E402
from resume_job import resumed_state  # noqa: E402

from asrtrain.distributed.config import DistConfig  # noqa: E402
from asrtrain.distributed.entry import run_job  # noqa: E402
from asrtrain.model.io import load_final  # noqa: E402
from asrtrain.train.checkpoint import load_checkpoint, load_learner_state  # noqa: E402
from asrtrain.train.config import TrainConfig  # noqa: E402
from asrtrain.train.trainer import Trainer  # noqa: E402
from asrtrain.train.validate import evaluate  # noqa: E402


def _momenta(optimizer_state: dict) -> list[torch.Tensor]:
    state = optimizer_state["state"]
    return [state[k]["momentum_buffer"] for k in sorted(state)]


@pytest.mark.slow  # three launches of 2 workers (~40 s on 2 busy cores)
def test_ssgd_two_epochs_equal_one_epoch_then_resume(archives, tmp_path):
    """SSGD is deterministic: a resumed run ends with the uninterrupted run's weights, bit for bit."""
    train, valid = archives
    args = ("--strategy", "ssgd", "--nproc", "2")
    _run(train, valid, tmp_path / "straight", *args, "--epochs", "2")
    _run(train, valid, tmp_path / "resumed", *args, "--epochs", "1")
    ckpt = tmp_path / "resumed" / "checkpoints" / "epoch-1"
    assert sorted(p.name for p in ckpt.iterdir()) == ["learner-0.pt", "learner-1.pt", "model.pt",
                                                      "optimizer.pt", "trainer.pt"]
    assert [p.name for p in ckpt.parent.iterdir()] == ["epoch-1"]  # no staging directory left
    proc = _run(train, valid, tmp_path / "resumed", *args, "--epochs", "2")
    assert "resuming from" in proc.stderr
    a = load_final(tmp_path / "straight" / "final.pt").model.state_dict()
    b = load_final(tmp_path / "resumed" / "final.pt").model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_adpsgd_learners_resume_their_own_momentum_and_weights(archives, tmp_path):
    train, valid = archives
    exp = tmp_path / "exp"
    # 3 learners: a ring of 3 leaves one out of every round, so the three do not reach
    # consensus in the epoch's last rounds (with 2, both could end bit-identical).
    proc = _run(train, valid, exp, "--strategy", "adpsgd", "--nproc", "3", "--batch", "9", "--epochs", "1",
                "--no-global-average")
    # work sharing: the epoch's progress is the blocks handed out to all learners, to the last one
    done = re.findall(r"epoch 1/1: (\d+)/(\d+) blocks", proc.stderr)
    assert done and done[-1][0] == done[-1][1], proc.stderr[-2000:]
    ckpt = exp / "checkpoints" / "epoch-1"
    saved = [load_learner_state(ckpt, r) for r in range(3)]
    assert [s["rank"] for s in saved] == [0, 1, 2]
    # not averaged: each learner's own weights are saved, and they differ (the last round's
    # pair may have averaged to equal weights, but not with the learner that sat it out)
    def same(a: int, b: int) -> bool:
        return all(torch.equal(saved[a]["model"][k], saved[b]["model"][k]) for k in saved[a]["model"])

    assert not (same(0, 1) and same(1, 2))
    # the learners' momenta differ (each its own gradients): rank 0's alone would not do
    # (a learner that started late on busy cores may have had no block, hence no momentum)
    momenta = [m for m in (_momenta(s["optimizer"]) for s in saved) if m]
    assert len(momenta) >= 2
    assert any(not all(torch.equal(x, y) for x, y in zip(momenta[0], m, strict=True)) for m in momenta[1:])
    trainer_state = load_checkpoint(ckpt)["trainer"]
    assert trainer_state["learners"] == 3
    # the held-out figure is that of the weights saved (rank 0's), on the whole held-out set
    row = [r for r in map(json.loads, (exp / "metrics.jsonl").read_text().splitlines()) if r["kind"] == "epoch"][-1]
    rank0 = Trainer(dataclasses.replace(TrainConfig.from_dict(trainer_state["config"]), exp=tmp_path / "eval"))
    rank0.model.load_state_dict(saved[0]["model"])
    loss_sum, frames, _ = evaluate(rank0.model, rank0.valid, 64, torch.device("cpu"), None)
    assert row["valid_frames"] == frames
    assert abs(row["valid_loss"] - loss_sum / frames) < 1e-4
    assert len(row["valid_loss_by_learner"]) == 3 and row["valid_loss_by_learner"][0] == round(row["valid_loss"], 5)
    cfg = dataclasses.replace(TrainConfig.from_dict(trainer_state["config"]), epochs=2, resume=True)
    out = tmp_path / "resumed"
    out.mkdir()
    run_job(resumed_state, DistConfig("adpsgd", nproc=3, timeout_s=30.0, global_average=False), cfg, str(out))
    for r in range(3):
        got = torch.load(out / f"rank{r}.pt", weights_only=False)
        assert got["start_epoch"] == 2 and got["step"] == saved[r]["step"]
        assert got["steps"] == saved[r]["strategy"]["steps"]
        mine, theirs = _momenta(got["optimizer"]), _momenta(saved[r]["optimizer"])
        assert len(mine) == len(theirs) and all(torch.equal(x, y) for x, y in zip(mine, theirs, strict=True))
        assert all(torch.equal(got["model"][k], saved[r]["model"][k]) for k in saved[r]["model"])
    # one learner resuming the 3 learners' checkpoint: their weights and momenta averaged
    one = Trainer(dataclasses.replace(cfg, num_threads=1))
    for key, value in one.model.state_dict().items():
        mean = torch.stack([s["model"][key] for s in saved]).mean(0)
        assert torch.allclose(value, mean, atol=1e-6), key
    mean_momenta = [torch.stack(ms).mean(0) for ms in zip(*[m for m in map(_momenta, (s["optimizer"] for s in saved))
                                                            if m], strict=True)]
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(_momenta(one.optimizer.state_dict()), mean_momenta,
                                                                strict=True))

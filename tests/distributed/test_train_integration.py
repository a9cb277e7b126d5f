"""The real trainer with a DistributedStrategy, through ``asrtrain train`` (tiny BLSTM, tiny archive)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_run import ASRTRAIN, TINY, epoch_rows, run_train  # noqa: E402


def _train(train: Path, valid: Path, exp: Path, *args: str) -> list[dict]:
    run_train(train, valid, exp, *args)
    return epoch_rows(exp)


EPOCH_LINE = re.compile(r"INFO .*epoch (\d): train loss \d+\.\d+ acc [\d.]+% \| held-out loss")


@pytest.mark.slow  # 11 s; test_h_adpsgd_trains_through_the_cli keeps --nproc in make test
def test_nproc_training_shows_progress_and_logs_every_rank(archives, tmp_path):
    """Rank 0's epoch lines on stderr and in the run log; each rank's own log; no rank-1 chatter."""
    train, valid = archives
    exp = tmp_path / "exp"
    proc = run_train(train, valid, exp, "--strategy", "adpsgd", "--nproc", "2", "--epochs", "2")
    assert [m.group(1) for m in EPOCH_LINE.finditer(proc.stderr)] == ["1", "2"], proc.stderr
    assert "final model: " in proc.stdout
    assert "rank 1" not in proc.stderr  # the other learners' console shows warnings only
    run_log = [p for p in (exp / "log").glob("train.*.log") if ".rank" not in p.name]
    assert len(run_log) == 1
    main_text = run_log[0].read_text()
    assert [m.group(1) for m in EPOCH_LINE.finditer(main_text)] == ["1", "2"]
    assert main_text.rstrip().endswith("exit status 0")  # the footer still comes last
    rank0 = (exp / "log" / "train.rank0.log").read_text()
    rank1 = (exp / "log" / "train.rank1.log").read_text()
    assert [m.group(1) for m in EPOCH_LINE.finditer(rank0)] == ["1", "2"]
    for r, text in ((0, rank0), (1, rank1)):
        assert text.startswith(f"# learner rank {r},")
        assert [int(e) for e in re.findall(rf"rank {r} epoch (\d): ", text)] == [1, 2], text
        assert re.search(r"asrtrain.progress: epoch 2/2: \d+", text)  # the progress line at the epoch's end


def test_h_adpsgd_trains_through_the_cli(archives, tmp_path):
    from asrtrain.model.io import load_final
    from asrtrain.train.checkpoint import last_checkpoint, load_checkpoint

    train, valid = archives
    exp = tmp_path / "exp"
    rows = _train(train, valid, exp, "--strategy", "h-adpsgd", "--group-size", "2", "--nproc", "4",
                  "--epochs", "2")
    assert [r["epoch"] for r in rows] == [1, 2]
    assert rows[1]["valid_loss"] < rows[0]["valid_loss"]
    assert rows[0]["train_frames"] == rows[1]["train_frames"]  # every frame once per epoch, over 4 learners
    final = load_final(exp / "final.pt")
    assert final.config.hidden == 8
    strategy = load_checkpoint(last_checkpoint(exp))["trainer"]["strategy"]
    assert strategy["strategy"] == "h-adpsgd" and strategy["group_size"] == 2 and strategy["rounds"] >= 1


def test_dry_run_shows_the_plan(archives, tmp_path):
    train, valid = archives
    proc = subprocess.run([str(ASRTRAIN), "train", str(train), str(tmp_path / "e"), *TINY, "--strategy",
                           "h-adpsgd", "--group-size", "2", "--nproc", "8", "--dry-run"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="200"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "h-adpsgd" in out and "super_learners" in out and "{0: [0, 1], 1: [2, 3]" in out
    assert "[[[0, 1], [2, 3]], [[0, 3], [1, 2]]" in out  # the ring of the 4 super-learners
    assert re.search(r"batch_per_learner\s*│ 1\s", out) and re.search(r"effective_batch\s*│ 8\s", out)
    assert re.search(r"global_average\s*│ True\s", out)
    assert re.search(r"gossip_transport\s*│ shared memory on one host, else the gossip group\s", out)
    assert not (tmp_path / "e").exists()


def test_no_global_average_reaches_the_plan(archives, tmp_path):
    train, _ = archives
    proc = subprocess.run([str(ASRTRAIN), "train", str(train), str(tmp_path / "e"), *TINY, "--strategy",
                           "adpsgd", "--nproc", "4", "--no-global-average", "--gossip-transport", "group",
                           "--dry-run"],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="200"))
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"global_average\s*│ False\s", proc.stdout), proc.stdout
    assert re.search(r"gossip_transport\s*│ the gossip group\s", proc.stdout), proc.stdout
    help_text = subprocess.run([str(ASRTRAIN), "train", "--help"], capture_output=True, text=True,
                               timeout=60, env=dict(os.environ, COLUMNS="200")).stdout
    help_text = " ".join(help_text.split())
    assert "--global-average / --no-global-average" in help_text and "each learner keeps its own" in help_text


def test_group_size_must_divide(archives, tmp_path):
    train, valid = archives
    proc = subprocess.run([str(ASRTRAIN), "train", str(train), str(tmp_path / "e"), *TINY, "--strategy",
                           "h-adpsgd", "--group-size", "3", "--nproc", "4", "--dry-run"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Error:" in proc.stderr + proc.stdout
    assert "--group-size 3 must divide the number of learners (4)" in proc.stderr + proc.stdout


@pytest.mark.slow
def test_strategies_reach_similar_held_out_loss_and_resume(archives, tmp_path):
    train, valid = archives
    losses = {}
    for name in ("ssgd", "adpsgd", "h-adpsgd"):
        extra = ["--group-size", "2"] if name == "h-adpsgd" else []
        rows = _train(train, valid, tmp_path / name, "--strategy", name, "--nproc", "4", "--epochs", "3", *extra)
        losses[name] = rows[-1]["valid_loss"]
    print("held-out loss after 3 epochs, 4 learners:", losses)
    for name in ("adpsgd", "h-adpsgd"):
        assert losses[name] < 1.05 * losses["ssgd"], losses
    # --resume continues after the last complete checkpoint
    rows = _train(train, valid, tmp_path / "adpsgd", "--strategy", "adpsgd", "--nproc", "4", "--epochs", "4")
    assert [r["epoch"] for r in rows] == [1, 2, 3, 4]

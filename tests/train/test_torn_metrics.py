"""``metrics.jsonl`` torn by a kill in the middle of a row: the rerun resumes, and every reader goes on."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from plot_check import C0, check_plot

from asrtrain.cli.main import cli
from asrtrain.train.metrics import MetricsLog, epoch_rows, read_metrics

TORN = '{"epoch": 2, "kind": "step", "loss": 1.2'


def _tear(path: Path) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(TORN)


def test_resume_on_a_torn_file_drops_the_fragment(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with MetricsLog(path) as m:
        m.write("epoch", epoch=1, step=10, train_loss=2.0)
    _tear(path)
    with MetricsLog(path, resume_epoch=1, resume_step=10) as m:
        m.write("epoch", epoch=2, step=20, train_loss=1.0)
    assert [r["epoch"] for r in read_metrics(path)] == [1, 2]
    assert TORN not in path.read_text()


def test_train_resumes_after_a_kill_tore_metrics(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    args = ["train", str(learnable_archives[0]), str(exp), "--batch", "32", "--threads", "1", "--hidden", "8",
            "--layers", "1", "--proj", "0", "--log-every", "1"]
    first = CliRunner().invoke(cli, [*args, "--epochs", "1"])
    assert first.exit_code == 0, first.output
    _tear(exp / "metrics.jsonl")  # the killed run was writing its next row
    again = CliRunner().invoke(cli, [*args, "--epochs", "2"])
    assert again.exit_code == 0, again.output
    rows = read_metrics(exp / "metrics.jsonl")
    assert [r["epoch"] for r in rows if r["kind"] == "epoch"] == [1, 2]
    assert all(line.startswith("{") and line.endswith("}") for line in (exp / "metrics.jsonl").read_text().splitlines())


def test_plot_and_study_histories_read_a_torn_file(tmp_path: Path) -> None:
    """``asrtrain plot`` and ``asrtrain study`` read the epoch rows of a run that may have been killed."""
    exp = tmp_path / "a"
    exp.mkdir()
    rows = [{"kind": "epoch", "epoch": e, "step": e, "train_loss": 2.0 / e, "valid_loss": 2.1 / e} for e in (1, 2)]
    (exp / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + TORN)
    assert [r["epoch"] for r in epoch_rows(exp / "metrics.jsonl")] == [1, 2]
    res = CliRunner().invoke(cli, ["plot", str(exp), "-o", str(tmp_path / "loss.png")])
    assert res.exit_code == 0, res.output
    check_plot(tmp_path / "loss.png", 720, 504, colours=(C0,))  # the loss alone: 6 x 4.2 in at 120 dpi


def test_non_finite_figures_come_back_as_floats(tmp_path: Path) -> None:
    """A diverged run logs nan and inf, which JSON cannot hold: written as strings, read as floats."""
    import math

    path = tmp_path / "metrics.jsonl"
    with MetricsLog(path) as m:
        m.write("sharpness", epoch=1, step=20, lambda_max=float("nan"), ratio=float("inf"), lr=8.0)
        m.write("step", epoch=1, step=40, loss=float("-inf"), note="nan is a word here too")
    sharp, step = read_metrics(path)
    assert math.isnan(sharp["lambda_max"]) and sharp["ratio"] == math.inf and sharp["lr"] == 8.0
    assert step["loss"] == -math.inf and step["kind"] == "step"

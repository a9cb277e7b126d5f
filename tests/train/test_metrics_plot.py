"""metrics.jsonl on resume, and the loss plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from plot_check import C0, C1, check_plot

from asrtrain.cli.main import cli
from asrtrain.core.errors import InputError
from asrtrain.train.metrics import MetricsLog, epoch_rows, read_metrics


def _fake_run(exp: Path, epochs: int, offset: float) -> None:
    exp.mkdir(parents=True, exist_ok=True)
    with MetricsLog(exp / "metrics.jsonl") as m:
        for e in range(1, epochs + 1):
            m.write("step", step=e * 10, epoch=e, lr=0.1, loss=3.0 - e / 10, frames_per_s=100.0)
            m.write("epoch", epoch=e, step=e * 10, train_loss=3.0 / e + offset,
                    valid_loss=3.2 / e + offset, valid_acc=0.2 + 0.1 * e)


def test_resume_drops_rows_of_unfinished_epochs(tmp_path: Path) -> None:
    _fake_run(tmp_path, 3, 0.0)
    with open(tmp_path / "metrics.jsonl", "a") as fh:  # the killed run got into epoch 4
        fh.write(json.dumps({"kind": "step", "epoch": 4, "step": 41}) + "\n")
    with MetricsLog(tmp_path / "metrics.jsonl", resume_epoch=2) as m:
        m.write("step", epoch=3, step=21)
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [(r["kind"], r["epoch"]) for r in rows] == [("step", 1), ("epoch", 1), ("step", 2),
                                                       ("epoch", 2), ("step", 3)]
    assert [r["epoch"] for r in epoch_rows(tmp_path / "metrics.jsonl")] == [1, 2]


def test_a_fresh_run_starts_an_empty_file(tmp_path: Path) -> None:
    _fake_run(tmp_path, 2, 0.0)
    MetricsLog(tmp_path / "metrics.jsonl").close()
    assert read_metrics(tmp_path / "metrics.jsonl") == []


def test_bad_line_is_named(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"kind": "epoch"}\n{oops\n')
    with pytest.raises(InputError, match="line 2: not JSON"):
        read_metrics(tmp_path / "metrics.jsonl")


def test_plot_command_writes_a_png(tmp_path: Path) -> None:
    _fake_run(tmp_path / "a", 3, 0.0)
    _fake_run(tmp_path / "b", 4, 0.2)
    out = tmp_path / "loss.png"
    res = CliRunner().invoke(cli, ["plot", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(out),
                                   "--title", "two runs"])
    assert res.exit_code == 0, res.output
    check_plot(out, 1320, 504, colours=(C0, C1))  # loss and accuracy side by side: 11 x 4.2 in at 120 dpi


def test_plot_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    res = CliRunner().invoke(cli, ["plot", str(tmp_path / "empty"), "-o", str(tmp_path / "x.png")])
    assert res.exit_code == 1 and "no metrics.jsonl" in res.output
    assert not (tmp_path / "x.png").exists()

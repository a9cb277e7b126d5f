"""The conventions every command shares, on a small command built the way real ones are.

Config file plus override, the resolved config and run log next to the output,
exit codes 1 and 2 with one-line errors, tracebacks only under -v.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.cli.options import config_option, resolved_params
from asrtrain.core.errors import InputError


@click.command("echo-run")
@config_option
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--batch-size", type=int, default=256, show_default=True)
@click.option("--strategy", type=click.Choice(["ssgd", "adpsgd"]), default="ssgd")
@click.option("--fail", type=click.Choice(["none", "input", "bug"]), default="none")
@click.pass_context
def echo_run(ctx: click.Context, out: Path, batch_size: int, strategy: str, fail: str,
             config: str | None) -> None:
    """A command in the house style, for testing the shared conventions."""
    from asrtrain.core.atomic import write_text
    from asrtrain.core.runlog import command_run

    with command_run("echo-run", out, resolved_params(ctx)):
        if fail == "input":
            raise InputError("line 3: expected 2 fields, got 1", out / "text")
        if fail == "bug":
            raise ZeroDivisionError("unexpected")
        write_text(out / "result", f"{batch_size} {strategy}\n")


@pytest.fixture()
def runner() -> Iterator[CliRunner]:
    cli.add_command(echo_run)
    try:
        yield CliRunner()
    finally:
        cli.commands.pop("echo-run", None)


def test_config_file_with_command_line_override(runner: CliRunner, tmp_path: Path) -> None:
    conf = tmp_path / "c.yaml"
    conf.write_text("batch-size: 8\nstrategy: adpsgd\n")
    out = tmp_path / "out"
    res = runner.invoke(cli, ["echo-run", "--config", str(conf), str(out), "--batch-size", "16"])
    assert res.exit_code == 0, res.output
    assert (out / "result").read_text() == "16 adpsgd\n"
    resolved = yaml.safe_load((out / "echo-run.config.yaml").read_text())
    assert resolved["batch_size"] == 16 and resolved["strategy"] == "adpsgd"
    assert resolved["out"] == str(out)


def test_toml_config(runner: CliRunner, tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text("batch_size = 4\n")
    res = runner.invoke(cli, ["echo-run", "--config", str(conf), str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "o" / "result").read_text() == "4 ssgd\n"


def test_unknown_config_key_is_a_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    conf = tmp_path / "c.yaml"
    conf.write_text("batchsize: 8\n")
    res = runner.invoke(cli, ["echo-run", "--config", str(conf), str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "unknown option(s) batchsize" in res.output
    assert not (tmp_path / "o").exists()


def test_usage_error_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["echo-run", str(tmp_path), "--strategy", "nope"])
    assert res.exit_code == 2
    assert "Invalid value for '--strategy'" in res.output


def test_expected_failure_is_one_line_exit_1(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "o"
    res = runner.invoke(cli, ["echo-run", str(out), "--fail", "input"])
    assert res.exit_code == 1
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines == [f"Error: {out / 'text'}: line 3: expected 2 fields, got 1"]
    assert "Traceback" not in res.output


def test_verbose_shows_the_traceback(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["-v", "echo-run", str(tmp_path / "o"), "--fail", "input"])
    assert res.exit_code == 1
    assert "Traceback" in res.output and "InputError" in res.output


def test_missing_file_is_one_line(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["echo-run", "--config", str(tmp_path / "nope.yaml"), "x"])
    assert res.exit_code == 2
    assert "nope.yaml" in res.output and "does not exist" in res.output


def test_log_file_records_command_start_end_and_status(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert runner.invoke(cli, ["echo-run", str(out)]).exit_code == 0
    runner.invoke(cli, ["echo-run", str(out), "--fail", "input"])
    logs = sorted((out / "log").glob("echo-run.*.log"))
    assert len(logs) == 2
    texts = [p.read_text().splitlines() for p in logs]
    for lines in texts:
        assert lines[0].startswith("# ") and lines[1].startswith("# started ")
        assert lines[-1].startswith("# ended ")
    statuses = sorted(lines[-1].split(", ", 1)[1] for lines in texts)
    assert statuses[0] == "exit status 0"
    assert statuses[1].startswith("exit status 1 (InputError")
    assert (out / "fingerprint.json").exists()

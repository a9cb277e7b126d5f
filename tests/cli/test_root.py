"""The installed ``asrtrain`` command, as a user runs it (real subprocesses)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asrtrain import __version__

EXE = shutil.which("asrtrain", path=str(Path(sys.executable).parent)) or "asrtrain"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "120"}
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=60, cwd=cwd, env=env)


def test_help_lists_the_pipeline_commands() -> None:
    res = run("--help")
    assert res.returncode == 0
    listed = res.stdout.split("Commands:", 1)[1].split()
    for name in ("prepare", "train", "decode", "score"):
        assert name in listed, f"{name} missing from asrtrain --help"


def test_prepare_lists_its_stages() -> None:
    res = run("prepare", "--help")
    assert res.returncode == 0
    listed = res.stdout.split("Commands:", 1)[1].split()
    for name in ("synth", "features", "archive", "lang"):
        assert name in listed


def test_version() -> None:
    res = run("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"asrtrain, version {__version__}"


def test_unknown_command_exits_2() -> None:
    res = run("nope")
    assert res.returncode == 2 and "No such command 'nope'" in res.stderr


def test_help_imports_no_heavy_modules() -> None:
    """--help must stay fast: no torch, h5py or kaldi imports behind the listing."""
    code = ("import sys; from click.testing import CliRunner; from asrtrain.cli.main import cli;"
            "CliRunner().invoke(cli, ['--help']); CliRunner().invoke(cli, ['prepare', '--help']);"
            "import json; print(json.dumps(sorted(m for m in sys.modules"
            " if m.split('.')[0] in ('torch', 'h5py', 'numpy', 'kaldiio', 'kaldifst', 'matplotlib'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


@pytest.mark.parametrize("command", ["train", "decode", "score", "info"])
def test_every_command_has_help(command: str) -> None:
    res = run(command, "--help")
    assert res.returncode == 0, res.stderr
    assert "Usage: asrtrain" in res.stdout

"""The Kaldi-style recipe machinery: option parsing, stage skipping, job templates."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UTILS = ROOT / "recipes" / "utils"


def bash(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = cwd / "recipe.sh"
    path.write_text(script)
    return subprocess.run(["bash", str(path), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=30)


RECIPE = f"""set -euo pipefail
stage=0
stop_stage=9
batch_size=256
strategy=ssgd
. {UTILS}/parse_options.sh
echo "stage=$stage stop=$stop_stage batch=$batch_size strategy=$strategy rest=$*"
"""


def test_options_set_variables_and_leave_positionals(tmp_path: Path) -> None:
    res = bash(RECIPE, "--batch-size", "64", "--stage=3", "data/x", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "stage=3 stop=9 batch=64 strategy=ssgd rest=data/x"


def test_config_file_then_command_line_override(tmp_path: Path) -> None:
    (tmp_path / "a.conf").write_text("batch_size=8\nstrategy=adpsgd\n")
    res = bash(RECIPE, "--config", "a.conf", "--strategy", "h-adpsgd", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "batch=8 strategy=h-adpsgd" in res.stdout


def test_unknown_option_is_an_error(tmp_path: Path) -> None:
    res = bash(RECIPE, "--batchsize", "8", cwd=tmp_path)
    assert res.returncode == 2
    assert "unknown option --batchsize" in res.stderr


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    res = bash(RECIPE, "--config", "nope.conf", cwd=tmp_path)
    assert res.returncode == 2 and "no such file: nope.conf" in res.stderr


STAGES = f"""set -euo pipefail
stage=0
stop_stage=2
force=false
. {UTILS}/parse_options.sh
. {UTILS}/stage.sh
for s in 0 1 2; do
  if want_stage $s; then done_or_run step$s out bash -c "echo ran$s >> out.log"; fi
done
"""


def test_finished_stages_are_skipped_and_stage_restarts(tmp_path: Path) -> None:
    assert bash(STAGES, cwd=tmp_path).returncode == 0
    assert (tmp_path / "out.log").read_text().split() == ["ran0", "ran1", "ran2"]
    again = bash(STAGES, cwd=tmp_path)
    assert again.stdout.count("already complete") == 3
    assert (tmp_path / "out.log").read_text().split() == ["ran0", "ran1", "ran2"]
    forced = bash(STAGES, "--stage", "2", "--force", "true", cwd=tmp_path)
    assert forced.returncode == 0
    assert (tmp_path / "out.log").read_text().split() == ["ran0", "ran1", "ran2", "ran2"]


def test_explicit_stage_restarts_from_that_stage(tmp_path: Path) -> None:
    assert bash(STAGES, cwd=tmp_path).returncode == 0
    res = bash(STAGES, "--stage", "1", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "already complete" not in res.stdout
    assert (tmp_path / "out.log").read_text().split() == ["ran0", "ran1", "ran2", "ran1", "ran2"]


def test_failed_stage_leaves_no_marker(tmp_path: Path) -> None:
    script = STAGES.replace('bash -c "echo ran$s >> out.log"', "bash -c 'exit 7'")
    res = bash(script, cwd=tmp_path)
    assert res.returncode == 7 and "step0: FAILED (exit 7)" in res.stderr
    assert not (tmp_path / "out" / ".done.step0").exists()


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in [
    *ROOT.glob("recipes/*/run.sh"), *ROOT.glob("recipes/*/*.sh"), *ROOT.glob("recipes/utils/*.sh"),
    *ROOT.glob("scripts/cluster/*")]))
def test_scripts_parse(path: str) -> None:
    res = subprocess.run(["bash", "-n", str(ROOT / path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_recipe_help_lists_options() -> None:
    res = subprocess.run(["bash", str(ROOT / "recipes/synth/run.sh"), "--help"], capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 0
    assert "--stop-stage 8" in res.stdout and "--strategy h-adpsgd" in res.stdout

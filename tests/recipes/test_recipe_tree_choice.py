"""Which tree the recipe's lang stage gives the network: recipes/custom's stage 4 with an
``asrtrain`` shim first on PATH that records each command (and does nothing), the sizes
written as the rule writes them. The rule's question tree needs a context-dependent rung:
a ladder that stops at mono falls back to a count tree, said in the log, while an explicit
``--hybrid-tree questions`` there is a one-line error."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIM = '#!/usr/bin/env bash\nprintf "%s\\n" "$*" >> "$ASRTRAIN_SHIM_LOG"\n'
SIZES = """hours=0.6
ali_mono_gauss=1000
ali_leaves=250
ali_gauss=1500
num_pdfs=500
hidden=160
layers=3
proj=80
epochs=12
batch=16
base_batch=128
lr=0.5
lr_schedule=plateau
plateau_stop=3
select=average:3
ubm_components=64
fmllr_gmm_components=64
ivector_dim=100
streams=logmel
fmllr_source=global
hybrid_tree=questions
lm_order=2
strategy=single
nproc=1
"""


def lang_stage(work: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Stage 4 of a copy of recipes/custom; the asrtrain commands it ran."""
    for name in ("custom", "utils"):
        shutil.copytree(ROOT / "recipes" / name, work / "recipes" / name,
                        ignore=shutil.ignore_patterns("data", "exp"))
    for d in ("train", "test", "dict"):
        (work / d).mkdir()
    (work / "lm_text").write_text("a b\n")
    (work / "data").mkdir()
    (work / "data" / "sizes.sh").write_text(SIZES)
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (bin_dir / "asrtrain").write_text(SHIM)
    (bin_dir / "asrtrain").chmod(0o755)
    log = work / "commands.txt"
    log.touch()
    cmd = ["bash", str(work / "recipes" / "custom" / "run.sh"), "--train", str(work / "train"),
           "--test", str(work / "test"), "--dict", str(work / "dict"), "--lm-text",
           str(work / "lm_text"), "--data", str(work / "data"), "--exp", str(work / "exp"),
           "--stage", "4", "--stop-stage", "4", "--gmm-rungs", "none", *extra]
    env = dict(os.environ, PATH=f"{bin_dir}:/usr/bin:/bin", ASRTRAIN_SHIM_LOG=str(log))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60,
                          cwd=work / "recipes" / "custom")
    return proc, log.read_text().splitlines()


def test_the_rule_grows_a_question_tree_on_the_sat_rung(tmp_path: Path) -> None:
    proc, commands = lang_stage(tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert commands[0].startswith("prepare tree ") and "--leaves 500" in commands[0]
    assert commands[1].startswith("prepare lang ") and "exp/tree/network.pt" in commands[1]


def test_a_mono_ladder_falls_back_to_a_count_tree_and_says_so(tmp_path: Path) -> None:
    proc, commands = lang_stage(tmp_path, "--ali-stages", "mono")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "stops at mono" in proc.stdout and "--hybrid-tree counts" in proc.stdout
    assert len(commands) == 1 and commands[0].startswith("prepare lang ")
    assert "--num-pdfs 500" in commands[0] and "--tree" not in commands[0]


def test_an_explicit_question_tree_on_a_mono_ladder_is_one_error_line(tmp_path: Path) -> None:
    proc, commands = lang_stage(tmp_path, "--ali-stages", "mono", "--hybrid-tree", "questions")
    assert proc.returncode != 0 and not commands
    errors = [ln for ln in proc.stderr.splitlines() if "context-dependent rung" in ln]
    assert len(errors) == 1 and "--hybrid-tree counts" in errors[0]

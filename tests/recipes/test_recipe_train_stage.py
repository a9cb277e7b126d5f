"""The training stage of each recipe builds a command line ``asrtrain train`` accepts, for
every strategy: a copy of the recipe runs stage 5 with an ``asrtrain`` shim first on PATH
that runs the real ``asrtrain train ... --dry-run`` (the CLI checks every option) and
prints its plan."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL = Path(sys.executable).parent / "asrtrain"
SWBD_REQUIRED = ["train_fmllr_scp", "train_ivector_scp", "train_data_dir", "train_pdf_ali_scp", "dev_fmllr_scp",
                 "dev_ivector_scp", "dev_data_dir", "dev_pdf_ali_scp", "eval_fmllr_scp", "eval_ivector_scp",
                 "eval_data_dir", "num_pdfs", "graph_dir"]


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> Path:
    spec = importlib.util.spec_from_file_location("train_conftest", ROOT / "tests" / "train" / "conftest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    root = tmp_path_factory.mktemp("recipe_archives")
    mod.write_learnable_archive(root / "train.h5", 6, seed=0)
    mod.write_learnable_archive(root / "dev.h5", 3, seed=1)
    return root


def stage5(recipe: str, strategy: str, archives: Path, work: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    for name in (recipe, "utils"):
        shutil.copytree(ROOT / "recipes" / name, work / "recipes" / name, ignore=shutil.ignore_patterns("data", "exp"))
    (work / "data" / "archives").mkdir(parents=True)
    for name in ("train.h5", "dev.h5"):
        shutil.copy(archives / name, work / "data" / "archives" / name)
    bin_dir = work / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "asrtrain"
    shim.write_text(f'#!/usr/bin/env bash\nif [ "$1" = train ]; then exec {REAL} "$@" --dry-run; fi\n'
                    'echo "asrtrain shim: only train is expected in stage 5" >&2; exit 3\n')
    shim.chmod(0o755)
    conf = work / "c.conf"
    conf.write_text("".join(f"{v}=unused\n" for v in SWBD_REQUIRED) if recipe == "swbd" else "")
    cmd = ["bash", str(work / "recipes" / recipe / "run.sh"), "--config", str(conf), "--data", str(work / "data"),
           "--exp", str(work / "exp"), "--stage", "5", "--stop-stage", "5", "--strategy", strategy,
           "--nproc", "4", "--group-size", "2", "--batch", "64", *extra]
    env = dict(os.environ, PATH=f"{bin_dir}:/usr/bin:/bin", COLUMNS="3000", OMP_NUM_THREADS="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def _plan(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {c[1].strip(): c[2].strip() for c in (line.split("│") for line in proc.stdout.splitlines())
            if len(c) == 4}


@pytest.mark.parametrize("recipe,strategy", [
    ("swbd", "ssgd"), ("swbd", "adpsgd"), ("swbd", "h-adpsgd"),
    ("synth", "ssgd"), ("synth", "adpsgd"), ("synth", "h-adpsgd"),
])
def test_training_stage_command_is_accepted(recipe: str, strategy: str, archives: Path, tmp_path: Path) -> None:
    rows = _plan(stage5(recipe, strategy, archives, tmp_path))
    assert rows["strategy"] == strategy and rows["learners"] == "4" and rows["launcher"] == "nproc"
    assert rows["super_learner_size"] == {"ssgd": "4", "adpsgd": "1", "h-adpsgd": "2"}[strategy]
    assert rows["effective_batch"] == "64"


def test_the_recipe_passes_the_optimizer_to_train(archives: Path, tmp_path: Path) -> None:
    plain = _plan(stage5("synth", "ssgd", archives, tmp_path / "sgd"))["optimizer"]
    assert plain.startswith("sgd (") and "weight decay 0)" in plain
    rows = _plan(stage5("synth", "ssgd", archives, tmp_path / "adam", "--optimizer", "adam",
                        "--weight-decay", "0.0001"))
    assert rows["optimizer"].startswith("adam (AdamW") and "weight decay 0.0001" in rows["optimizer"]

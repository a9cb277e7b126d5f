"""`asrtrain train` on the command line: outputs, dry run, model options, errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.distributed.launch import detect
from asrtrain.model.io import load_final


def _args(archives: tuple[Path, Path], exp: Path, *extra: str) -> list[str]:
    return ["train", str(archives[0]), str(exp), "--epochs", "1", "--batch", "32",
            "--threads", "1", *extra]


def test_train_writes_the_experiment_dir(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    model_cfg = tmp_path / "model.yaml"
    model_cfg.write_text("hidden: 8\nlayers: 2\nproj: 4\n")
    res = CliRunner().invoke(cli, _args(learnable_archives, exp, "--valid", str(learnable_archives[1]),
                                        "--model-config", str(model_cfg), "--layers", "1"))
    assert res.exit_code == 0, res.output
    saved = yaml.safe_load((exp / "config.yaml").read_text())
    assert saved["batch"] == 32 and saved["layers"] == 1 and saved["strategy"] == "single"
    assert (exp / "fingerprint.json").is_file() and list((exp / "log").glob("train.*.log"))
    assert (exp / "metrics.jsonl").is_file() and (exp / "checkpoints" / "epoch-1").is_dir()
    final = load_final(exp / "final.pt")
    assert (final.config.hidden, final.config.layers, final.config.proj) == (8, 1, 4)  # option wins
    # the saved config runs again (--config): epoch 1 is done, so it resumes and writes final.pt
    again = CliRunner().invoke(cli, ["train", "--config", str(exp / "config.yaml"),
                                     str(learnable_archives[0]), str(exp), "--epochs", "3",
                                     "--keep-checkpoints", "2"])
    assert again.exit_code == 0, again.output
    assert load_final(exp / "final.pt").meta["steps"] == 3 * final.meta["steps"]
    assert sorted(p.name for p in (exp / "checkpoints").iterdir()) == ["epoch-2", "epoch-3"]


def test_dry_run_prints_the_plan(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, _args(learnable_archives, tmp_path / "exp", "--dry-run",
                                        "--hidden", "16", "--layers", "1", "--epochs", "3",
                                        "--batch", "512", "--warmup-epochs", "2"))
    assert res.exit_code == 0, res.output
    assert "parameters" in res.output and "0.1, 0.2, 0.1414" in res.output
    assert not (tmp_path / "exp").exists()


def test_errors_are_one_line(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    bad = tmp_path / "model.yaml"
    bad.write_text("hiden: 8\n")
    res = CliRunner().invoke(cli, _args(learnable_archives, tmp_path / "e", "--model-config", str(bad)))
    assert res.exit_code == 1 and f"Error: {bad}: unknown model option(s): hiden" in res.output
    res = CliRunner().invoke(cli, _args(learnable_archives, tmp_path / "e", "--batch", "0"))
    assert res.exit_code == 2
    # a job shape that cannot work: one line before any learner starts (not one per learner)
    res = CliRunner().invoke(cli, _args(learnable_archives, tmp_path / "e", "--strategy", "h-adpsgd",
                                        "--nproc", "3", "--group-size", "2"))
    assert res.exit_code == 1 and res.output.count("Error:") == 1
    assert "--group-size 2 must divide the number of learners (3)" in res.output
    # an archive path that exists but is no file
    res = CliRunner().invoke(cli, ["train", "/dev/null", str(tmp_path / "e"), "--threads", "1"])
    assert res.exit_code == 1 and "/dev/null: not a regular file" in res.output


@pytest.mark.parametrize("env,rank", [({}, None), ({"RANK": "2", "WORLD_SIZE": "4"}, 2),
                                      ({"PMI_RANK": "1", "PMI_SIZE": "2"}, 1),
                                      ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}, 3),
                                      ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, None),
                                      ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, 1)])
def test_launcher_detection(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                            rank: int | None) -> None:
    for name in ("RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                 "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    place = detect()  # the one launcher detection: the CLI and the parallel layer both ask it
    assert (None if place is None else place.rank) == rank


def test_bad_launcher_variable_is_one_line(learnable_archives: tuple[Path, Path], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMI_RANK", "first")
    monkeypatch.setenv("PMI_SIZE", "2")
    res = CliRunner().invoke(cli, _args(learnable_archives, tmp_path / "e"))
    assert res.exit_code == 1 and "Error: environment variable PMI_RANK='first' is not an integer" in res.output


def test_checkpoint_onto_a_full_disk_is_one_line(learnable_archives, tmpfs, run_cli, one_error) -> None:
    """The logs fit, the 6 MB checkpoint does not: the error names it and none is left looking complete."""
    train_h5, _ = learnable_archives
    exp = tmpfs(1024) / "exp"
    proc = run_cli("train", train_h5, exp, "--epochs", 1, "--batch", 64, "--hidden", 256, "--layers", 2,
                   "--proj", 0)
    line = one_error(proc.stderr, 1, proc.returncode, "No space left on device", str(exp))
    assert ".pt" in line, line
    assert not list(exp.rglob("*.pt")) and not list(exp.rglob(".*.pt*"))

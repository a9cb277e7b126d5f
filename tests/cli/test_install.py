"""`make install TORCH=cpu|cuda`: which torch build it takes, and that it says which it got.

The commands are read with ``make -n`` against a venv that does not exist (nothing is
installed); ``scripts/torch_build.py`` runs on this venv's torch. The whole install was run
by hand from a fresh clone (see the commit that added this file).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def dry_install(venv: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-n", "-C", str(REPO), "install", f"VENV={venv}", *args],
                          capture_output=True, text=True, timeout=60)


def torch_lines(out: str) -> list[str]:
    """The shell commands (split at newlines and ``;``, without if/then/else) that touch torch."""
    commands = (re.sub(r"^(if|then|else)\s+", "", c.strip()) for c in re.split(r"[;\n]", out))
    return [c for c in commands if re.search(r'"torch==|torch_build\.py', c)]


def test_cpu_is_the_default_and_never_the_cuda_build(tmp_path: Path) -> None:
    proc = dry_install(tmp_path / "venv")
    assert proc.returncode == 0, proc.stderr
    lines = torch_lines(proc.stdout)
    assert any(ln.endswith('--no-index --no-deps "torch==2.13.0+cpu" 2>/dev/null') for ln in lines), lines
    assert any(ln.endswith('"torch==2.13.0+cpu" --index-url https://download.pytorch.org/whl/cpu')
               for ln in lines), lines  # where no local wheel is: PyTorch's CPU index
    assert all("+cpu" in ln for ln in lines if '"torch==' in ln), lines  # no line admits another build
    assert any(ln.endswith("torch_build.py cpu") for ln in lines), lines


def test_cuda_takes_the_default_build_and_is_remembered(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    lines = torch_lines(dry_install(venv, "TORCH=cuda").stdout)
    assert any(ln.endswith('pip install -q "torch==2.13.0"') for ln in lines), lines
    assert not any("+cpu" in ln for ln in lines), lines
    venv.mkdir()
    (venv / "torch-build").write_text("cuda\n")  # what `make install TORCH=cuda` leaves
    lines = torch_lines(dry_install(venv).stdout)
    assert any(ln.endswith("torch_build.py cuda") for ln in lines), lines


def test_another_choice_is_refused(tmp_path: Path) -> None:
    proc = dry_install(tmp_path / "venv", "TORCH=gpu")
    assert proc.returncode != 0
    assert "TORCH must be cpu or cuda, not 'gpu'" in proc.stderr


def test_the_pinned_version_is_one_the_package_accepts() -> None:
    from packaging.requirements import Requirement

    make = (REPO / "Makefile").read_text()
    pinned = re.search(r"^TORCH_VERSION := (\S+)$", make, re.M)
    assert pinned, "no TORCH_VERSION in the Makefile"
    deps = re.findall(r'"(torch[<>=!~][^"]*)"', (REPO / "pyproject.toml").read_text())
    assert deps and all(Requirement(d).specifier.contains(pinned.group(1)) for d in deps), deps


def _torch_build():
    """scripts/torch_build.py as a module (run in-process: a fresh torch import takes seconds)."""
    spec = importlib.util.spec_from_file_location("torch_build", REPO / "scripts" / "torch_build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("asked", ["cpu", "cuda"])
def test_the_installed_build_is_named_and_a_mismatch_fails(asked: str, capsys) -> None:
    import torch

    status = _torch_build().main([asked])
    out, err = capsys.readouterr()
    build = "CUDA" if torch.version.cuda else "CPU"
    assert out.startswith(f"torch {torch.__version__}: the {build}")
    if (asked == "cuda") == bool(torch.version.cuda):
        assert status == 0, err
    else:
        assert status == 1
        assert err.startswith(f"Error: TORCH={asked} asked for the {asked.upper()} build")
        assert len(err.strip().splitlines()) == 1

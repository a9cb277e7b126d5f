"""Atomic outputs: a write that dies leaves nothing that looks complete."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asrtrain.core.atomic import atomic_open, atomic_path, is_temporary, write_text


def test_file_appears_only_when_complete(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with atomic_open(target) as fh:
        fh.write("half")
        assert not target.exists()
    assert target.read_text() == "half"


def test_exception_leaves_no_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError), atomic_open(target) as fh:
        fh.write("partial")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_existing_file_survives_a_failed_rewrite(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_open(target) as fh:
        fh.write("new")
        raise RuntimeError("boom")
    assert target.read_text() == "old"


def test_directory_is_replaced_whole(tmp_path: Path) -> None:
    target = tmp_path / "corpus"
    with atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "a").write_text("1")
    with atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "b").write_text("2")
    assert sorted(p.name for p in target.iterdir()) == ["b"]
    assert [p.name for p in tmp_path.iterdir()] == ["corpus"]


def test_sigkill_mid_write_leaves_no_complete_file(tmp_path: Path) -> None:
    """A real process killed with SIGKILL while writing: the final name never appears."""
    target = tmp_path / "big.bin"
    code = (
        "import sys, time\n"
        "from asrtrain.core.atomic import atomic_open\n"
        f"with atomic_open({str(target)!r}, 'wb') as fh:\n"
        "    fh.write(b'x' * 1000); fh.flush()\n"
        "    print('writing', flush=True)\n"
        "    time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    time.sleep(0.1)
    assert not target.exists()
    leftovers = list(tmp_path.iterdir())
    assert len(leftovers) == 1 and is_temporary(leftovers[0])

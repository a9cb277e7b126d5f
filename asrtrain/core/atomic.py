"""Atomic outputs: write to a temporary name beside the target, rename when complete.

A reader (or a recipe that skips finished stages) must never mistake a
half-written file or directory for a finished one. ``os.replace`` on the same
filesystem is atomic, so the final name appears only with complete contents.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

_TMP_MARK = ".tmp-"


def temp_name(path: Path) -> Path:
    """A unique temporary sibling of ``path`` (same directory, so rename is atomic)."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}{_TMP_MARK}", dir=path.parent)
    os.close(fd)
    os.unlink(name)
    return Path(name)


def is_temporary(path: Path) -> bool:
    """True for names made by :func:`temp_name` (left behind only by a killed process)."""
    return path.name.startswith(".") and _TMP_MARK in path.name


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path to write; rename it to ``path`` on success, remove it on failure.

    Works for files and directories alike: whatever the body creates at the
    yielded path becomes ``path``. An existing ``path`` is replaced.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(final)
    try:
        yield tmp
    except BaseException:
        _remove(tmp)
        raise
    if final.is_dir() and not final.is_symlink() and tmp.is_dir():
        # os.replace cannot replace a non-empty directory: move the old one aside first.
        old = temp_name(final)
        os.replace(final, old)
        os.replace(tmp, final)
        _remove(old)
    else:
        os.replace(tmp, final)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike[str], mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """``open`` for writing whose result appears under ``path`` only when closed cleanly."""
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Atomically write a text file."""
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_failure(path: str | os.PathLike[str], exc: BaseException) -> OSError:
    """An ``OSError`` naming ``path`` for a write that failed inside a library.

    Libraries that write through their own buffers (torch.save's zip writer, kaldiio on a
    descriptor) lose the file name and sometimes the reason: "unexpected pos 154816 vs
    154768" is torch's way of saying the disk is full. The free space says which it was.
    """
    if isinstance(exc, OSError) and exc.errno:
        return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), os.fspath(path))
    target = Path(path).absolute()
    where = next(p for p in target.parents if p.exists())
    if shutil.disk_usage(where).free < 1 << 20:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path))
    return OSError(errno.EIO, f"write failed ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})",
                   os.fspath(path))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

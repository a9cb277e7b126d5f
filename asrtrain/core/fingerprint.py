"""The fingerprint of an output: which software, on which host, wrote it.

Every output directory carries one, so a number in a results table can be
traced back to the package versions and the git commit that produced it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from asrtrain.core.atomic import write_text

PACKAGES = (
    "asrtrain", "torch", "numpy", "h5py", "click", "rich", "kaldiio", "kaldi-native-fbank",
    "kaldifst", "kaldi-decoder", "kaldilm", "kaldialign", "mpi4py",
)


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages whose behaviour shapes our outputs."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit() -> str | None:
    """The commit of the asrtrain source tree, with ``-dirty`` for local changes."""
    src = Path(__file__).resolve().parents[2]
    if not (src / ".git").exists():
        return None
    try:
        rev = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "-uno"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return rev + ("-dirty" if dirty else "")


def fingerprint(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-able record of software, host and time; ``extra`` adds domain facts."""
    record: dict[str, Any] = {
        "written": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "packages": package_versions(),
        "git_commit": git_commit(),
        "argv": sys.argv,
        "cwd": os.getcwd(),
    }
    if extra:
        record.update(extra)
    return record


def write_fingerprint(directory: str | os.PathLike[str], extra: dict[str, Any] | None = None,
                      name: str = "fingerprint.json") -> dict[str, Any]:
    """Write ``fingerprint.json`` into ``directory`` and return the record."""
    record = fingerprint(extra)
    Path(directory).mkdir(parents=True, exist_ok=True)
    write_text(Path(directory) / name, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record

"""Helpers for the scoring tests: where sclite is, and how to read its output."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

SCTK_DIR = Path("/usr/lib/sctk/bin")   # Debian's sctk puts sclite here, not on PATH


def find_sclite() -> str | None:
    found = shutil.which("sclite")
    if found:
        return found
    cand = SCTK_DIR / "sclite"
    return str(cand) if cand.is_file() and os.access(cand, os.X_OK) else None


def sctk_env(sclite_path: str) -> dict[str, str]:
    """PATH with sctk's directory first, so csrfilt.sh finds rfilter1."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sclite_path).parent}:{env.get('PATH', '')}"
    return env


_ID = re.compile(r"^id: \((.*)\)$")
_SCORES = re.compile(r"^Scores: \(#C #S #D #I\) (\d+) (\d+) (\d+) (\d+)$")
_SPK = re.compile(r"^Speaker sentences\s+\d+:\s+(\S+)\s+#utts: (\d+)$")


def run_sclite_pra(exe: str, args: list[str], cwd: Path) -> list[tuple[str, str, tuple[int, ...]]]:
    """Run sclite with ``-o pra stdout``; return (speaker, id, (C, S, D, I)) per utterance."""
    proc = subprocess.run([exe, *args, "-o", "pra", "stdout"], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out: list[tuple[str, str, tuple[int, ...]]] = []
    speaker, utt = "", ""
    for line in proc.stdout.splitlines():
        line = line.strip()
        if m := _SPK.match(line):
            speaker = m.group(1)
        elif m := _ID.match(line):
            utt = m.group(1)
        elif m := _SCORES.match(line):
            out.append((speaker, utt, tuple(int(x) for x in m.groups())))
    return out

"""The lattice generator's C++ library (``csrc/``): built with g++, loaded with ctypes.

``make install`` builds it (``python -m asrtrain.decode.native``); a checkout or an
install without it builds it on first use. The library goes beside its sources when
that directory is writable, else under ``~/.cache/asrtrain``; it is written to a
temporary name and renamed, so parallel decode jobs never load a half-written file, and
rebuilt when a source is newer. No Python fallback: a token-passing search in Python
runs orders of magnitude slower than real time on HCLG (DESIGN.md, "Lattices").
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from asrtrain.core.errors import ConfigError

SOURCE = Path(__file__).with_name("csrc") / "latgen.cpp"  # includes the .h beside it
CXXFLAGS = ["-O3", "-std=c++17", "-shared", "-fPIC"]
_LIB: ctypes.CDLL | None = None


def library_path() -> Path:
    """Where the built library lives (beside the source if that is writable)."""
    here = SOURCE.with_name("_latgen.so")
    if os.access(SOURCE.parent, os.W_OK):
        return here
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "asrtrain"
    return cache / "_latgen.so"


def build(force: bool = False) -> Path:
    """Compile ``latgen.cpp`` unless an up-to-date library exists; returns its path."""
    out = library_path()
    newest = max(p.stat().st_mtime for p in SOURCE.parent.glob("*.[ch]*"))
    if not force and out.exists() and out.stat().st_mtime >= newest:
        return out
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None or shutil.which(cxx) is None:
        raise ConfigError("the lattice decoder needs a C++ compiler to build "
                          f"{SOURCE}: {'CXX=' + cxx + ' is not a program' if cxx else 'no g++'}; "
                          "install g++ or set CXX")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".latgen.", suffix=".so", dir=out.parent)
    os.close(fd)
    try:
        run = subprocess.run([cxx, *CXXFLAGS, "-o", tmp, str(SOURCE)], capture_output=True,
                             text=True)
        if run.returncode != 0:
            raise ConfigError(f"building {SOURCE} failed ({cxx}): {run.stderr.strip()[-2000:]}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def load() -> ctypes.CDLL:
    """The library with its functions' signatures (built first if needed)."""
    global _LIB
    if _LIB is None:
        lib = ctypes.CDLL(str(build()))
        p, i32, i64, f32 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_float
        lib.lg_new.restype = p
        lib.lg_new.argtypes = [p, i64, p, i32, f32, i32, i32, f32, f32, i32, f32, i32]
        lib.lg_free.argtypes = [p]
        lib.lg_decode.restype = ctypes.c_int
        lib.lg_decode.argtypes = [p, p, i32, i32, p, i32, f32, p]
        lib.lg_final_ilabels.restype = i64
        lib.lg_final_ilabels.argtypes = [p]
        lib.lg_copy.argtypes = [p] * 12
        _LIB = lib
    return _LIB


if __name__ == "__main__":
    print(build(force="--force" in sys.argv[1:]))

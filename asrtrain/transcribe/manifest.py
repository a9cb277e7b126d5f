"""The manifest of an exported model: its format, the versions that wrote it, and the
size and sha256 of every file, so a copy that lost or changed a byte is refused.

A model is something people pass around: loading reads the manifest as JSON, checks
every file it lists before anything else is read, and uses no file it does not list.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from asrtrain.core.errors import InputError

MANIFEST = "manifest.json"
FORMAT = "asrtrain-model"
#: The newest version read and written. 2: an ensemble (``members/<k>.pt``, settings.json's
#: ``members``), written only for one, so a reader of version 1 refuses it rather than decode with
#: its first network alone; one network stays version 1.
FORMAT_VERSION = 2
_BLOCK = 1 << 20


def sha256(path: Path) -> str:
    """Hex sha256 of a file, read in blocks (HCLG can be hundreds of MB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def describe(root: Path, files: list[str]) -> dict[str, dict[str, Any]]:
    """``{relative path: {bytes, sha256}}`` of ``files`` under ``root``."""
    return {name: {"bytes": (root / name).stat().st_size, "sha256": sha256(root / name)}
            for name in sorted(files)}


def build(root: Path, files: list[str], extra: dict[str, Any], ensemble: bool = False
          ) -> dict[str, Any]:
    """The manifest of ``root``: format, versions and the checksums of ``files``; version 1
    unless ``ensemble``."""
    from asrtrain.core.fingerprint import fingerprint

    return {"format": FORMAT, "format_version": FORMAT_VERSION if ensemble else 1, **extra,
            "written_by": fingerprint(), "files": describe(root, files)}


def read(root: Path) -> dict[str, Any]:
    """The manifest of ``root``, checked to be ours and of a version we read."""
    path = Path(root) / MANIFEST
    if not Path(root).is_dir():
        raise InputError("no such model directory", root)
    if not path.is_file():
        raise InputError(f"not an exported asrtrain model (no {MANIFEST}; make one with "
                         "asrtrain export)", root)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{MANIFEST} is damaged ({type(exc).__name__})", root) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"not an exported asrtrain model ({MANIFEST} has no format {FORMAT!r})",
                         root)
    if data.get("format_version") not in range(1, FORMAT_VERSION + 1):
        raise InputError(f"model format version {data.get('format_version')!r}; this asrtrain "
                         f"reads versions 1 to {FORMAT_VERSION}", root)
    if not isinstance(data.get("files"), dict):
        raise InputError(f"{MANIFEST} lists no files", root)
    return data


def verify(root: Path) -> dict[str, Any]:
    """Read the manifest and check every file it lists (present, size, sha256); the first
    difference is one InputError naming the file."""
    data = read(root)
    root = Path(root)
    for name, entry in data["files"].items():
        path = root / name
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise InputError(f"{MANIFEST} lists {name!r}, outside the model directory", root)
        if not path.is_file():
            raise InputError(f"damaged model: {name} is missing", root)
        if path.stat().st_size != entry.get("bytes") or sha256(path) != entry.get("sha256"):
            raise InputError(f"damaged model: {name} differs from its checksum in {MANIFEST}",
                             root)
    return data

"""An exported model directory, opened: the manifest checked, then plain data read.

Nothing in the directory is executed: JSON, numpy arrays (no pickles), the network
through ``torch.load(weights_only=True)``, the graph as FST bytes. A directory that is
not a model, or whose files differ from the manifest's checksums, is refused in one line
before anything else is read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrtrain.core.errors import InputError
from asrtrain.transcribe import manifest
from asrtrain.transcribe.settings import ModelSettings


@dataclass
class ModelBundle:
    """A verified model directory: where its parts are, and its settings."""

    root: Path
    settings: ModelSettings
    manifest: dict[str, Any]

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> ModelBundle:
        """Verify ``root`` against its manifest and read its settings."""
        root = Path(root)
        data = manifest.verify(root)
        if "settings.json" not in data["files"] or "final.pt" not in data["files"]:
            raise InputError("damaged model: the manifest lists no settings.json or final.pt", root)
        try:
            raw = json.loads((root / "settings.json").read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"settings.json is damaged ({type(exc).__name__})", root) from None
        return cls(root=root, settings=ModelSettings.from_dict(raw), manifest=data)

    @property
    def final(self) -> Path:
        return self.root / "final.pt"

    @property
    def graph(self) -> Path:
        return self.root / "graph"

    def stream_model(self, kind: str) -> Path:
        """The directory of the i-vector extractor or the fMLLR model."""
        return self.root / kind

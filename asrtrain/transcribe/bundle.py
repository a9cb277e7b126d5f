"""An exported model directory, opened: the manifest checked, then plain data read.

Nothing in the directory is executed: JSON, numpy arrays (no pickles), the network and
the SAT first pass's GMMs through ``torch.load(weights_only=True)``, the graphs as FST
bytes. A directory that is not a model, whose files differ from the manifest's checksums,
or whose manifest lacks a file its streams need, is refused in one line before anything
else is read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrtrain.core.errors import InputError
from asrtrain.transcribe import manifest
from asrtrain.transcribe.settings import STREAM_FILES, ModelSettings


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
        settings = ModelSettings.from_dict(raw)
        for name in settings.members:
            if name not in data["files"]:
                raise InputError(f"damaged model: the manifest lists no {name} (a network of its "
                                 "ensemble)", root)
        for spec in settings.streams:
            for name in STREAM_FILES.get(spec.kind, ()):
                if f"{spec.kind}/{name}" not in data["files"]:
                    raise InputError(f"damaged model: the manifest lists no {spec.kind}/{name} "
                                     f"(its {spec.kind} stream {spec.name!r} needs it)", root)
        return cls(root=root, settings=settings, manifest=data)

    @property
    def final(self) -> Path:
        return self.root / "final.pt"

    @property
    def networks(self) -> list[Path]:
        """final.pt, then the ensemble's other networks (their scores are averaged)."""
        return [self.final, *(self.root / name for name in self.settings.members)]

    @property
    def graph(self) -> Path:
        return self.root / "graph"

    def stream_model(self, kind: str) -> Path:
        """The directory of the i-vector extractor, the fMLLR model or the SAT first pass."""
        return self.root / kind

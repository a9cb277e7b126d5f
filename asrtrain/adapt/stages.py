"""Resumable stages for the adaptation commands: a stage whose outputs exist and were
made with the same parameters (and the same upstream stages) is skipped, and says so."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from asrtrain.core.atomic import atomic_open
from asrtrain.core.textio import read_text

log = logging.getLogger("asrtrain.adapt.stages")


class Stages:
    """Skip a stage whose outputs are complete and made with the same parameters.

    A stage's marker (``OUT/stages/<name>.json``) records its parameters and the
    digest of the stage before it, so redoing an early stage redoes the later ones.
    """

    def __init__(self, out: Path) -> None:
        self.dir = Path(out) / "stages"
        self.upstream = ""

    def _record(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"params": json.loads(json.dumps(params, default=str)), "upstream": self.upstream}

    def done(self, name: str, params: dict[str, Any], outputs: Iterable[Path]) -> bool:
        """True (and says so in the log) when ``name`` need not run again."""
        record = self._record(params)
        marker = self.dir / f"{name}.json"
        missing = [str(p) for p in outputs if not Path(p).exists()]
        if marker.is_file() and not missing:
            old = json.loads(read_text(marker))
            if old == record:
                log.info("stage %s: complete, skipping", name)
                self._advance(record)
                return True
            changed = sorted(k for k in set(old.get("params", {})) | set(record["params"])
                             if old.get("params", {}).get(k) != record["params"].get(k))
            why = (f"parameters changed ({', '.join(changed)})" if changed
                   else "an earlier stage was redone")
            log.info("stage %s: %s, redoing", name, why)
        else:
            log.info("stage %s: running", name)
        marker.unlink(missing_ok=True)  # outputs are about to change: not complete until finish()
        return False

    def finish(self, name: str, params: dict[str, Any]) -> None:
        """Mark ``name`` complete (after its outputs were written)."""
        record = self._record(params)
        self.dir.mkdir(parents=True, exist_ok=True)
        with atomic_open(self.dir / f"{name}.json", "w", encoding="utf-8") as fh:
            json.dump(record, fh, sort_keys=True)
        self._advance(record)

    def _advance(self, record: dict[str, Any]) -> None:
        import hashlib

        self.upstream = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]

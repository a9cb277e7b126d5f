"""Where the HMM states of the tree and the training targets come from.

An HMM-GMM aligner knows each frame's state (``prepare align`` writes ``state.scp``), so
the tree's statistics and the pdf targets follow those states, as Kaldi's transition-ids
carry them. A phone-only alignment (the synthesizer's) splits each phone evenly.
(No numpy here: the CLI imports it for its choices.)
"""

from __future__ import annotations

from pathlib import Path

from asrtrain.core.errors import InputError

#: ``auto`` takes the aligner's states where a split has ``state.scp`` and splits evenly
#: where not; ``states`` requires them; ``even`` ignores them.
TARGETS = ("auto", "states", "even")


def uses_states(ali_dir: Path, split: str, targets: str) -> bool:
    """Whether a split's targets follow the aligner's states (``targets``: :data:`TARGETS`)."""
    if targets not in TARGETS:
        raise InputError(f"targets must be one of {', '.join(TARGETS)}, got {targets!r}")
    scp = Path(ali_dir) / split / "state.scp"
    if targets == "states" and not scp.exists():
        raise InputError("targets 'states' need the aligner's HMM states; not found "
                         "(phone-only alignments take targets 'even' or 'auto')", scp)
    return targets != "even" and scp.exists()

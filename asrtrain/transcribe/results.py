"""What transcribing gives back: words with times and confidences, per input."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from asrtrain.transcribe.inputs import Failure


@dataclass
class Word:
    """One recognised word: seconds from the start of its input, posterior confidence."""

    word: str
    start: float
    end: float
    confidence: float


@dataclass
class Transcript:
    """The words of one input (an audio file, or an utterance of a data dir)."""

    id: str
    source: str
    words: list[Word] = field(default_factory=list)
    duration: float = 0.0
    segments: int = 0

    @property
    def text(self) -> str:
        return " ".join(w.word for w in self.words)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "duration": round(self.duration, 3),
                "segments": self.segments, "text": self.text,
                "words": [asdict(w) for w in self.words]}


@dataclass
class Report:
    """A run: the transcripts, the inputs that failed, and how fast it went."""

    transcripts: list[Transcript]
    failures: list[Failure]
    audio_seconds: float
    wall_seconds: float
    cpu_seconds: float
    device: str
    first_pass: dict[str, Any] | None = None   # SAT input: transforms by kind, no_path, seconds

    @property
    def rtf(self) -> float | None:
        """Wall-clock time over audio time (below 1: faster than real time)."""
        return self.wall_seconds / self.audio_seconds if self.audio_seconds else None

"""Writing transcripts: Kaldi text, CTM with word confidences, or JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable

from asrtrain.transcribe.results import Transcript

FORMATS = ("text", "ctm", "json")
#: File name of each format under --out.
FILE_NAMES = {"text": "text", "ctm": "ctm", "json": "transcripts.json"}


def text_lines(transcripts: Iterable[Transcript]) -> str:
    """``id word word …`` per input (Kaldi's text)."""
    return "".join(" ".join([t.id, *(w.word for w in t.words)]) + "\n" for t in transcripts)


def ctm_lines(transcripts: Iterable[Transcript]) -> str:
    """``id 1 start duration word confidence`` per word (NIST CTM with confidences)."""
    return "".join(f"{t.id} 1 {w.start:.2f} {w.end - w.start:.2f} {w.word} {w.confidence:.3f}\n"
                   for t in transcripts for w in t.words)


def json_text(transcripts: Iterable[Transcript]) -> str:
    """A JSON list of ``{id, source, duration, segments, text, words: [{word, start, end,
    confidence}]}``."""
    return json.dumps([t.to_dict() for t in transcripts], indent=1, ensure_ascii=False) + "\n"


def render(transcripts: list[Transcript], fmt: str) -> str:
    """The transcripts in ``fmt`` (one of :data:`FORMATS`)."""
    return {"text": text_lines, "ctm": ctm_lines, "json": json_text}[fmt](transcripts)

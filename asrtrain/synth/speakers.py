"""Speakers: an espeak-ng voice and variant with a rate, pitch and pitch range, from the seed.

The variants are espeak-ng's ``voices/!v`` files. About 85 of the 101 sound like
people; the whispering, robotic, demonic, croaking, announcer and fast ones are
left out, and so are names with a space (which espeak cannot select). A variant's
gender comes from its ``gender`` line, or else from its base pitch (female voices
start at 130 Hz or higher).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from asrtrain.core.errors import AsrtrainError

BASE_VOICES = ("en-us", "en-us-nyc")
UNNATURAL = re.compile(r"^(whisper|whisperf|UniRobot|anikaRobot|robosoft\d*|Demonic|croak|"
                       r"announcer|fast)$")
RATE, PITCH, RANGE = (130, 210), (25, 75), (30, 80)
FEMALE_PITCH = 130


@dataclass(frozen=True)
class Speaker:
    """One synthetic speaker: what espeak needs to sound like them, and their gender."""

    spk_id: str
    voice: str
    variant: str
    rate: int
    pitch: int
    pitch_range: int
    gender: str

    @property
    def voice_name(self) -> str:
        return f"{self.voice}+{self.variant}"

    def as_dict(self) -> dict:
        return asdict(self)


def variant_genders(data_path: Path) -> dict[str, str]:
    """Natural-sounding variants of ``data_path/voices/!v`` and their genders (m/f)."""
    folder = data_path / "voices" / "!v"
    if not folder.is_dir():
        raise AsrtrainError("espeak-ng voice variants not found", folder)
    out = {}
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if path.is_file() and " " not in path.name and not UNNATURAL.match(path.name):
            out[path.name] = _gender(path.read_text(encoding="utf-8", errors="replace"))
    if not out:
        raise AsrtrainError("no usable espeak-ng voice variants", folder)
    return out


def _gender(text: str) -> str:
    match = re.search(r"^\s*gender\s+(\w+)", text, re.M)
    if match and match.group(1).lower() in ("female", "male"):
        return "f" if match.group(1).lower() == "female" else "m"
    pitch = re.search(r"^\s*pitch\s+(\d+)", text, re.M)
    return "f" if pitch and int(pitch.group(1)) >= FEMALE_PITCH else "m"


def draw_speakers(count: int, rng: np.random.Generator, variants: dict[str, str],
                  voices: tuple[str, ...] = BASE_VOICES) -> list[Speaker]:
    """``count`` distinct (voice, variant, rate, pitch, range): gender first, half and half
    in expectation (only 17 of the 85 variants are female), then a variant of it."""
    by_gender = {g: sorted(v for v in variants if variants[v] == g) for g in ("f", "m")}
    genders = [g for g in ("f", "m") if by_gender[g]]
    speakers: list[Speaker] = []
    seen: set[tuple] = set()
    while len(speakers) < count:
        voice = voices[int(rng.integers(len(voices)))]
        names = by_gender[genders[int(rng.integers(len(genders)))]]
        variant = names[int(rng.integers(len(names)))]
        rate = int(rng.integers(RATE[0], RATE[1] + 1))
        pitch = int(rng.integers(PITCH[0], PITCH[1] + 1))
        pitch_range = int(rng.integers(RANGE[0], RANGE[1] + 1))
        key = (voice, variant, rate, pitch, pitch_range)
        if key in seen:
            continue
        seen.add(key)
        speakers.append(Speaker(f"spk-{len(speakers) + 1:04d}", voice, variant, rate, pitch,
                                pitch_range, variants[variant]))
    return speakers

"""The ctypes binding: samples, exact phoneme events, isolated pronunciations, errors."""

from __future__ import annotations

import pytest

from asrtrain.core.errors import AsrtrainError
from asrtrain.synth import espeak
from asrtrain.synth.espeak import Espeak
from asrtrain.synth.speakers import draw_speakers, variant_genders


@pytest.fixture(scope="module")
def engine() -> Espeak:
    return espeak.engine()


def test_synthesis_events_are_exact_sample_indices(engine: Espeak) -> None:
    engine.set_voice("en-us")
    engine.set_prosody(175, 50, 50)
    out = engine.synthesize("the book of the genealogy.")
    assert out.sample_rate == 22050
    names = [n for n, _ in out.phonemes]
    assert names[:2] == ["D", "@2"] and names[-1] == "_"
    starts = [s for _, s in out.phonemes]
    assert starts == sorted(starts)
    assert starts[-1] == len(out.samples)  # the final pause event is the audio length


def test_phonemize_and_unknown_voice(engine: Espeak) -> None:
    engine.set_voice("en-us")
    assert engine.phonemize("christ") == ["k", "r", "'aI", "s", "t"]
    with pytest.raises(AsrtrainError, match="unknown espeak-ng voice 'xx-nowhere'"):
        engine.set_voice("xx-nowhere")
    assert engine.version().startswith("1.")


def test_missing_library_names_the_package() -> None:
    with pytest.raises(AsrtrainError, match="libespeak-ng1"):
        Espeak("libespeak-ng-not-here.so.9")


def test_speakers_are_distinct_and_gendered(engine: Espeak) -> None:
    import numpy as np

    variants = variant_genders(engine.data_path())
    assert 60 <= len(variants) <= 101 and "whisper" not in variants and "f3" in variants
    assert variants["f3"] == "f" and variants["m3"] == "m"
    speakers = draw_speakers(40, np.random.default_rng(0), variants)
    assert len({(s.voice, s.variant, s.rate, s.pitch, s.pitch_range) for s in speakers}) == 40
    assert 8 <= sum(s.gender == "f" for s in speakers) <= 32
    assert all(130 <= s.rate <= 210 and 25 <= s.pitch <= 75 for s in speakers)
    again = draw_speakers(40, np.random.default_rng(0), variants)
    assert again == speakers

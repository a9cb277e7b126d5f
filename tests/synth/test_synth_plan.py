"""The plan: equal shares per speaker, no sentence twice, a clear refusal when text runs out."""

from __future__ import annotations

import numpy as np
import pytest

from asrtrain.core.errors import ConfigError
from asrtrain.synth.plan import capacity_hours, lm_sentences, make_plan
from asrtrain.synth.speakers import Speaker
from asrtrain.synth.text import Sentence


def sentences(n: int) -> list[Sentence]:
    return [Sentence(("WORD", f"W{i}", "SAID", "HERE", "TODAY"),
                     f"word w{i} said here today.", "t") for i in range(n)]


def speakers(n: int) -> list[Speaker]:
    return [Speaker(f"spk-{i + 1:04d}", "en-us", "m3", 170, 50, 50, "m") for i in range(n)]


def plan(n_sentences: int = 2000, hours: float = 0.3, seed: int = 0, **kw):
    return make_plan(sentences(n_sentences), speakers(6), hours, 1, 1,
                     np.random.default_rng(seed), kw.get("snr"), kw.get("reverb", 0.0))


def test_disjoint_sentences_and_speaker_splits() -> None:
    p = plan()
    assert [s.spk_id for s in p.splits["test"]] == ["spk-0006"]
    said = [u.sentence.words for u in p.utterances]
    assert len(said) == len(set(said))
    per_speaker = {}
    for u in p.utterances:
        per_speaker.setdefault(u.speaker.spk_id, []).append(u)
    assert len(per_speaker) == 6
    counts = [len(v) for v in per_speaker.values()]
    assert max(counts) - min(counts) <= 1  # equal shares of the hours
    assert abs(p.estimated_seconds / 3600 - 0.3) < 0.01
    ids = [u.utt_id for u in p.utterances]
    assert ids == sorted(ids) and ids[0] == "spk-0001-000001"


def test_plan_is_deterministic_and_draws_noise() -> None:
    a, b = plan(snr=(5.0, 20.0), reverb=0.5), plan(snr=(5.0, 20.0), reverb=0.5)
    assert a.utterances == b.utterances
    assert plan(seed=1).utterances != a.utterances
    snrs = [u.snr_db for u in a.utterances]
    assert all(5.0 <= s <= 20.0 for s in snrs)
    reverbed = sum(u.rt60 is not None for u in a.utterances) / len(a.utterances)
    assert 0.3 < reverbed < 0.7


def test_too_many_hours_says_how_many_can_be_had() -> None:
    available = capacity_hours(sentences(200))
    with pytest.raises(ConfigError, match=rf"about {available:.1f} hours can be had from 200 "
                                          "sentences"):
        plan(200, hours=available * 1.5)


def test_lm_text_excludes_dev_and_test() -> None:
    text = sentences(2000)
    p = make_plan(text, speakers(6), 0.3, 1, 1, np.random.default_rng(0), None, 0.0)
    held = {u.sentence.words for u in p.utterances if u.split != "train"}
    train = {u.sentence.words for u in p.utterances if u.split == "train"}
    lm = lm_sentences(p, text)
    assert len(lm) == 2000 - len(held) and not held & {s.words for s in lm}
    small = lm_sentences(p, text, limit=50)
    assert len(small) == len(train) + 50 and train <= {s.words for s in small}


def test_speakers_must_leave_a_training_speaker() -> None:
    with pytest.raises(ConfigError, match="leaves no training speaker"):
        make_plan(sentences(100), speakers(2), 0.01, 1, 1, np.random.default_rng(0), None, 0.0)


def test_repeats_reuse_train_sentences_only() -> None:
    from collections import Counter

    text = sentences(200)
    hours = capacity_hours(text) * 1.8  # 6 speakers, 2 held out, 4 repeats: up to 2.0x
    with pytest.raises(ConfigError, match="--max-repeats"):
        make_plan(text, speakers(6), hours, 1, 1, np.random.default_rng(0), None, 0.0)
    p = make_plan(text, speakers(6), hours, 1, 1, np.random.default_rng(0), None, 0.0,
                  max_repeats=4)
    train = Counter(u.sentence.words for u in p.utterances if u.split == "train")
    held = [u.sentence.words for u in p.utterances if u.split != "train"]
    assert max(train.values()) <= 4 and max(train.values()) >= 2
    assert len(held) == len(set(held)) and not set(held) & set(train)
    per_speaker = Counter((u.speaker.spk_id, u.sentence.words) for u in p.utterances)
    assert max(per_speaker.values()) == 1  # nobody says a sentence twice
    assert abs(p.estimated_seconds / 3600 - hours) / hours < 0.05

"""The corpus plan: who says which sentence, drawn from the seed before any audio is made.

Each speaker gets an equal share of the requested hours. Sentences are shuffled
once and dealt out in order, each used at most once (train sentences at most
``--max-repeats`` times, by different speakers), so dev and test sentences never
occur in train. Durations are estimated from the spoken characters and the
speaker's rate (a fit to espeak-ng 1.51: within about 5% per sentence), so the
corpus comes out close to the hours asked and a request the text cannot fill is
refused before anything is synthesized.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from asrtrain.core.errors import ConfigError
from asrtrain.synth.speakers import RATE, Speaker
from asrtrain.synth.text import Sentence

#: Seconds of speech ~ (A*chars + B*words + C*commas) / rate + D, measured on en-us.
A, B, C, D = 9.40, -5.04, 37.1, 0.17
PAD = (0.2, 0.5)
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Utterance:
    """One planned utterance."""

    utt_id: str
    split: str
    speaker: Speaker
    sentence: Sentence
    seed: int
    pad_start: float
    pad_end: float
    snr_db: float | None
    rt60: float | None


@dataclass
class Plan:
    """The speakers of each split and every utterance, in sorted id order."""

    splits: dict[str, list[Speaker]]
    utterances: list[Utterance] = field(default_factory=list)
    estimated_seconds: float = 0.0
    order: list[int] = field(default_factory=list)


def estimate_seconds(sentence: Sentence, rate: int) -> float:
    """Expected duration of a sentence at ``rate`` words per minute, pads included."""
    text = sentence.spoken
    speech = (A * len(text) + B * len(sentence.words) + C * text.count(",")) / rate + D
    return max(speech, 0.3) + sum(PAD)


def capacity_hours(sentences: list[Sentence]) -> float:
    """Hours the text gives if every sentence is said once at the mean speaking rate."""
    mean_rate = round(sum(RATE) / 2)
    return sum(estimate_seconds(s, mean_rate) for s in sentences) / 3600


def split_speakers(speakers: list[Speaker], dev: int, test: int) -> dict[str, list[Speaker]]:
    """The first speakers train, the next ``dev`` are dev, the last ``test`` are test."""
    n_train = len(speakers) - dev - test
    if n_train < 1 or dev < 0 or test < 0:
        raise ConfigError(f"--speakers {len(speakers)} leaves no training speaker after "
                          f"--dev-speakers {dev} and --test-speakers {test}")
    return {"train": speakers[:n_train], "dev": speakers[n_train:n_train + dev],
            "test": speakers[n_train + dev:]}


def available_hours(sentences: list[Sentence], n_train: int, n_held: int,
                    max_repeats: int = 1) -> float:
    """Most hours the text gives when train sentences may be said ``max_repeats`` times.

    Every speaker gets an equal share; held-out (dev, test) sentences are said once
    and never in train, so with ``K`` repeats: H * n_train / S <= K * (C - H * n_held / S).
    """
    total = n_train + n_held
    return capacity_hours(sentences) * max_repeats * total / (n_train + max_repeats * n_held)


class _Dealer:
    """Sentence indices in the seeded order; further passes (for repeats) reshuffle the
    sentences that were not held out."""

    def __init__(self, order: list[int], passes: int, rng: np.random.Generator) -> None:
        self.order, self.queue, self.pos = order, list(order), 0
        self.passes_left, self.rng = passes - 1, rng
        self.held: set[int] = set()

    def next(self) -> int | None:
        if self.pos >= len(self.queue):
            pool = [i for i in self.order if i not in self.held]
            if self.passes_left <= 0 or not pool:
                return None
            self.passes_left -= 1
            self.queue, self.pos = [pool[j] for j in self.rng.permutation(len(pool))], 0
        self.pos += 1
        return self.queue[self.pos - 1]


def make_plan(sentences: list[Sentence], speakers: list[Speaker], hours: float, dev: int,
              test: int, rng: np.random.Generator, noise_snr: tuple[float, float] | None,
              reverb: float, max_repeats: int = 1) -> Plan:
    """Deal sentences to speakers until each has ``hours / len(speakers)`` of speech.

    Dev and test speakers are served first, each sentence once; train speakers then
    take the rest, a sentence at most ``max_repeats`` times in all and never twice
    by one speaker.
    """
    if max_repeats < 1:
        raise ConfigError(f"--max-repeats must be at least 1, got {max_repeats}")
    plan = Plan(split_speakers(speakers, dev, test))
    n_train = len(plan.splits["train"])
    available = available_hours(sentences, n_train, dev + test, max_repeats)
    hint = ("" if max_repeats > 1 else " (or let several train speakers say a sentence: "
            "--max-repeats)")
    if hours > available:
        raise ConfigError(f"--hours {hours:g} is more than the text gives without repeating a "
                          f"sentence more than {max_repeats} time(s): about {available:.1f} hours "
                          f"can be had from {len(sentences)} sentences{hint}")
    plan.order = [int(i) for i in rng.permutation(len(sentences))]
    dealer = _Dealer(plan.order, max_repeats, rng)
    budget = hours * 3600 / len(speakers)
    for split in ("dev", "test", "train"):
        for speaker in plan.splits[split]:
            said: set[int] = set()
            spent = 0.0
            while spent < budget:
                index = dealer.next()
                if index is None:
                    raise ConfigError(f"--hours {hours:g}: the text ran out of sentences at "
                                      f"about {plan.estimated_seconds / 3600:.1f} hours; ask for "
                                      f"less (about {available:.1f} hours can be had){hint}")
                if index in said:
                    continue
                said.add(index)
                if split != "train":
                    dealer.held.add(index)
                seconds = estimate_seconds(sentences[index], speaker.rate)
                spent += seconds
                plan.estimated_seconds += seconds
                plan.utterances.append(_utterance(split, speaker, len(said), sentences[index],
                                                  rng, noise_snr, reverb))
    plan.utterances.sort(key=lambda u: u.utt_id)
    return plan


def _utterance(split: str, speaker: Speaker, index: int, sentence: Sentence,
               rng: np.random.Generator, noise_snr: tuple[float, float] | None,
               reverb: float) -> Utterance:
    seed = int(rng.integers(2**63 - 1))
    pad_start, pad_end = (float(x) for x in rng.uniform(*PAD, size=2))
    snr = float(rng.uniform(*noise_snr)) if noise_snr is not None else None
    rt60 = float(rng.uniform(0.2, 0.8)) if reverb > 0 and rng.random() < reverb else None
    return Utterance(f"{speaker.spk_id}-{index:06d}", split, speaker, sentence, seed,
                     round(pad_start, 4), round(pad_end, 4), snr, rt60)


def lm_sentences(plan: Plan, sentences: list[Sentence], limit: int = 0) -> list[Sentence]:
    """The LM text: every sentence not said in dev or test, in text order.

    With ``limit`` > 0 (small test corpora, whose LM and graph must stay small):
    the train sentences plus the first ``limit`` unused sentences of the seeded
    order in which sentences were dealt.
    """
    held_out = {u.sentence.words for u in plan.utterances if u.split != "train"}
    if limit <= 0:
        return [s for s in sentences if s.words not in held_out]
    used = {u.sentence.words for u in plan.utterances}
    unused = [sentences[i].words for i in plan.order if sentences[i].words not in used]
    keep = {u.sentence.words for u in plan.utterances if u.split == "train"} | set(unused[:limit])
    return [s for s in sentences if s.words in keep]

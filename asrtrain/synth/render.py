"""One utterance from text to FLAC and exact phone segments (runs in a worker process).

Synthesize at 22050 Hz with phoneme events, turn the events into segments,
resample, pad silence at both ends, optionally reverberate and add noise, dither
to int16 and write FLAC. Everything random comes from the job's own seed, and
each shard starts from a fresh engine (see :func:`render_shard`), so the bytes do
not depend on which worker renders them.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile

from asrtrain.synth import espeak
from asrtrain.synth.align import Segment, rescale, segments_from_events
from asrtrain.synth.phones import phone_ids
from asrtrain.synth.signal import add_noise, resample, reverberate, to_int16


@dataclass(frozen=True)
class Job:
    """Everything a worker needs to render one utterance."""

    utt_id: str
    voice_name: str
    rate: int
    pitch: int
    pitch_range: int
    spoken: str
    path: Path
    sample_rate: int
    seed: int
    pad_start: float
    pad_end: float
    snr_db: float | None
    rt60: float | None


@dataclass(frozen=True)
class Rendered:
    """What the main process needs back: the length and the segments at the output rate.

    Segments travel and wait as two small arrays (phone ids, start samples), not
    as objects: a 50-hour corpus has millions of them.
    """

    utt_id: str
    num_samples: int
    phone_ids: np.ndarray
    starts: np.ndarray

    @classmethod
    def pack(cls, utt_id: str, num_samples: int, segments: list[Segment]) -> Rendered:
        ids = phone_ids()
        return cls(utt_id, num_samples, np.array([ids[s.phone] for s in segments], np.int16),
                   np.array([s.start for s in segments], np.int32))

    @property
    def segments(self) -> list[Segment]:
        names = _PHONE_NAMES
        ends = [*self.starts[1:].tolist(), self.num_samples]
        return [Segment(names[i], start, end) for i, start, end
                in zip(self.phone_ids.tolist(), self.starts.tolist(), ends, strict=True)]


_current: tuple | None = None
_PHONE_NAMES = {i: name for name, i in phone_ids().items()}


def render_shard(jobs: list[Job]) -> list[Rendered]:
    """Render a shard in order, in a process whose espeak has never spoken before.

    espeak-ng 1.51 carries state from one utterance to the next (pitch phase and
    flutter shift phoneme boundaries by a few samples, and the library offers no
    reset), so the same audio needs the same history: each shard starts from a
    fresh engine (the pool gives every shard a new process) and libc's rand()
    (used for breath noise) is seeded.
    """
    global _current
    _current = None
    ctypes.CDLL(None).srand(0)
    return [render(job) for job in jobs]


def render(job: Job) -> Rendered:
    """Synthesize, align, post-process and write one utterance."""
    global _current
    engine = espeak.engine()
    voice = (job.voice_name, job.rate, job.pitch, job.pitch_range)
    if voice != _current:
        engine.set_voice(job.voice_name)
        engine.set_prosody(job.rate, job.pitch, job.pitch_range)
        _current = voice
    synth = engine.synthesize(job.spoken)
    segments = segments_from_events(synth.phonemes, synth.samples)
    audio = resample(synth.samples.astype(np.float32), synth.sample_rate, job.sample_rate)
    rng = np.random.default_rng(job.seed)
    head, tail = round(job.pad_start * job.sample_rate), round(job.pad_end * job.sample_rate)
    padded = np.concatenate([np.zeros(head, np.float32), audio, np.zeros(tail, np.float32)])
    if job.rt60 is not None:
        padded = reverberate(padded, job.sample_rate, job.rt60, rng)
    if job.snr_db is not None:
        padded = add_noise(padded, job.snr_db, rng, speech=slice(head, head + len(audio)))
    samples = to_int16(padded, rng)
    job.path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(job.path, samples, job.sample_rate, format="FLAC", subtype="PCM_16")
    out_segments = rescale(segments, synth.sample_rate, job.sample_rate, len(audio), head,
                           len(samples))
    return Rendered.pack(job.utt_id, len(samples), out_segments)

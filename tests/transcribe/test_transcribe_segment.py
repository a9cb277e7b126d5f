"""Cutting long recordings: one segment per sentence, trimmed to a margin of its pauses, with a
silence threshold of its own for each stretch of the recording; and the speaker's CMVN
statistics of a cut recording taken from those segments, so not from its long pauses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile

from asrtrain.transcribe.segment import MARGIN, SENTENCE_PAUSE, cut, frame_levels, has_speech

RATE = 16000
#: Frame grid plus one frame: how far a segment edge may sit from the burst edge + margin.
SLACK = 0.04


def _bursts(spans: list[tuple[float, float]], total: float, floor: float = 30.0,
            noisy_from: float | None = None, seed: int = 0) -> np.ndarray:
    """Noise at speech level inside ``spans`` (seconds), faint noise elsewhere; from
    ``noisy_from`` on, a floor 26 dB louder (a noisier room)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(scale=floor, size=int(total * RATE))
    if noisy_from is not None:
        x[int(noisy_from * RATE):] *= 20.0
    for a, b in spans:
        x[int(a * RATE):int(b * RATE)] += rng.normal(scale=3000.0, size=int(b * RATE) - int(a * RATE))
    return x.astype(np.float32)


def _holds(seg, a: float, b: float) -> bool:
    return seg.start <= a and b <= seg.end


def test_a_long_recording_is_cut_at_every_sentence_pause_not_packed_to_the_limit():
    spans = [(1.0 + 4.0 * k, 3.5 + 4.0 * k) for k in range(10)]  # 2.5 s bursts, 1.5 s pauses
    segs = cut(_bursts(spans, 41.0), RATE, max_seconds=20.0)
    assert len(segs) == len(spans)
    for seg, (a, b) in zip(segs, spans, strict=True):
        assert _holds(seg, a, b)
        assert seg.start == pytest.approx(a - MARGIN, abs=SLACK)  # a margin of the pause, not
        assert seg.end == pytest.approx(b + MARGIN, abs=SLACK)    # half of it


def test_pauses_shorter_than_a_sentence_pause_stay_inside_the_segment():
    words = [(0.0, 0.6), (0.8, 1.4), (1.6, 2.2)]  # three words, 0.2 s apart
    spans = [(1.0 + 4.0 * k + a, 1.0 + 4.0 * k + b) for k in range(6) for a, b in words]
    assert 0.2 < SENTENCE_PAUSE < 4.0 - 2.2
    segs = cut(_bursts(spans, 25.0), RATE, max_seconds=20.0)
    assert len(segs) == 6
    for k, seg in enumerate(segs):
        assert _holds(seg, spans[3 * k][0], spans[3 * k + 2][1])


def test_a_short_recording_is_still_one_segment():
    (seg,) = cut(_bursts([(0.5, 3.0), (5.0, 7.0)], 8.0), RATE, max_seconds=20.0)
    assert (seg.start, seg.end) == (0.0, 8.0)


def test_a_pauseless_recording_is_cut_hard_at_the_limit():
    segs = cut(_bursts([(0.0, 50.0)], 50.0), RATE, max_seconds=20.0)
    assert [round(s.end - s.start) for s in segs] == [20, 20, 10]


def test_digital_silence_has_no_speech():
    assert not has_speech(frame_levels(np.zeros(8000, np.float32), RATE))
    assert not has_speech(frame_levels(np.random.default_rng(0).normal(scale=5, size=8000), RATE))
    assert has_speech(frame_levels(_bursts([(0.1, 0.4)], 0.5), RATE))


def test_a_noisier_stretch_has_its_own_silence_threshold():
    spans = [(1.0 + 4.0 * k, 3.5 + 4.0 * k) for k in range(10)]
    x = _bursts(spans, 41.0, noisy_from=20.5)  # the last five pauses 26 dB above the first five
    segs = cut(x, RATE, max_seconds=20.0)
    assert len(segs) == len(spans)
    assert all(_holds(seg, a, b) for seg, (a, b) in zip(segs, spans, strict=True))


def test_a_sentence_over_the_limit_is_split_at_its_longest_inner_pause():
    spans = [(0.5 + 2.0 * k, 2.2 + 2.0 * k) for k in range(15)]  # 0.3 s pauses: one sentence
    spans[7] = (spans[7][0], spans[7][1] - 0.15)  # its longest pause: 0.45 s, after burst 7
    segs = cut(_bursts(spans, 31.0), RATE, max_seconds=20.0)
    assert len(segs) == 2
    assert spans[7][1] < segs[0].end <= segs[1].start < spans[8][0]


def test_the_speakers_cmvn_statistics_are_taken_from_the_segments_not_the_pauses(tmp_path: Path):
    """A recording of 6 s pauses and 2 s bursts, cut and featured as transcribe does: the
    speaker's CMVN frame count is the segments' (speech and margins), not the recording's."""
    import kaldiio

    from asrtrain.data.features import FeatureConfig, make_features
    from asrtrain.data.kaldi_dir import read_table
    from asrtrain.transcribe.inputs import plan_inputs

    spans = [(6.0 + 8.0 * k, 8.0 + 8.0 * k) for k in range(4)]
    x = np.clip(_bursts(spans, 38.0), -32768, 32767).astype(np.int16)
    soundfile.write(str(tmp_path / "talk.wav"), x, RATE, "PCM_16")
    plan = plan_inputs([tmp_path / "talk.wav"], tmp_path / "work", RATE, max_seconds=20.0)
    assert len(plan.pieces) == 4
    make_features(plan.data_dir, tmp_path / "feats", FeatureConfig(type="logmel", num_bins=23,
                                                                   sample_rate=RATE), nj=1)
    (entry,) = read_table(tmp_path / "feats" / "cmvn.scp").values()
    frames = kaldiio.load_mat(entry)[0, -1]
    speech = sum(b - a for a, b in spans) / 0.01
    assert speech < frames < speech + len(spans) * (2 * MARGIN + 0.05) / 0.01  # 38 s would be 3800


def test_a_long_recording_of_one_sentence_is_decoded_as_that_sentence(tmp_path: Path):
    """One sentence in 30 s: its segment (and word times from its start), not the whole file."""
    from asrtrain.data.kaldi_dir import read_table
    from asrtrain.transcribe.inputs import plan_inputs

    x = np.clip(_bursts([(20.0, 23.0)], 30.0), -32768, 32767).astype(np.int16)
    soundfile.write(str(tmp_path / "late.wav"), x, RATE, "PCM_16")
    plan = plan_inputs([tmp_path / "late.wav"], tmp_path / "work", RATE, max_seconds=20.0)
    (piece,) = plan.pieces.values()
    assert piece.offset == pytest.approx(20.0 - MARGIN, abs=SLACK)
    (span,) = read_table(plan.data_dir / "segments").values()
    assert span.split()[1] == f"{piece.offset:.2f}"

"""Phone map and alignments: folding, the stop-closure fix, Kaldi's frame convention."""

from __future__ import annotations

import kaldi_native_fbank as knf
import numpy as np
import pytest

from asrtrain.core.errors import AsrtrainError
from asrtrain.synth.align import (
    Segment,
    ctm_lines,
    frame_labels,
    num_frames,
    rescale,
    segments_from_events,
)
from asrtrain.synth.phones import PHONES, fold, fold_word, phone_ids


def test_phone_ids_and_fold() -> None:
    ids = phone_ids()
    assert ids["<eps>"] == 0 and ids["sil"] == 1 and len(ids) == len(PHONES) + 2
    assert sorted(ids.values()) == list(range(len(ids)))
    assert fold("'@2") == ("@",) and fold(",I#") == ("I",) and fold("t#") == ("t",)
    assert fold("@L") == ("@", "l") and fold(";") == () and fold("_:") == ("sil",)
    assert fold("'aI") == ("aI",)
    assert fold_word(["dZ", ",i:", "_", "n", "I2", ";"]) == ["dZ", "i:", "n", "I"]
    with pytest.raises(AsrtrainError, match="phoneme 'Q!'"):
        fold("Q!")


def test_stop_closure_moves_back_over_exact_zeros() -> None:
    samples = np.ones(100, dtype=np.int16)
    samples[40:60] = 0  # the closure of the stop whose burst event is at 60
    events = [("_", 0), ("a", 10), ("t", 60), ("_", 90)]
    segs = segments_from_events(events, samples)
    assert segs == [Segment("sil", 0, 10), Segment("a", 10, 40), Segment("t", 40, 90),
                    Segment("sil", 90, 100)]
    # a voiced stop keeps its event time
    segs = segments_from_events([("a", 0), ("d", 60)], samples)
    assert segs == [Segment("a", 0, 60), Segment("d", 60, 100)]


def test_fold_drops_and_splits_and_merges_silence() -> None:
    samples = np.ones(100, dtype=np.int16)
    events = [("@L", 10), (";", 30), ("_:", 50), ("_", 70)]
    segs = segments_from_events(events, samples)
    assert segs == [Segment("sil", 0, 10), Segment("@", 10, 20), Segment("l", 20, 50),
                    Segment("sil", 50, 100)]


def test_rescale_ends_at_audio_length_with_pads() -> None:
    segs = [Segment("sil", 0, 441), Segment("a", 441, 22050)]
    out = rescale(segs, 22050, 16000, 16000, pad_start=800, n_total=16000 + 1600)
    assert out == [Segment("sil", 0, 800 + 320), Segment("a", 1120, 16800),
                   Segment("sil", 16800, 17600)]
    assert ctm_lines("u", out, 16000)[1] == "u 1 0.0700000 0.9800000 a"


@pytest.mark.parametrize("rate", [16000, 8000])
def test_frame_count_matches_kaldi_native_fbank(rate: int) -> None:
    for n in (399 * rate // 16000, 400 * rate // 16000, 12345, 16000):
        opts = knf.FbankOptions()
        opts.frame_opts.samp_freq = rate
        opts.frame_opts.dither = 0
        opts.mel_opts.num_bins = 23
        fbank = knf.OnlineFbank(opts)
        fbank.accept_waveform(rate, np.random.default_rng(0).standard_normal(n).tolist())
        fbank.input_finished()
        assert num_frames(n, rate) == fbank.num_frames_ready


def test_frame_label_is_the_segment_at_the_frame_centre() -> None:
    ids = phone_ids()
    segs = [Segment("sil", 0, 360), Segment("a", 360, 361), Segment("t", 361, 1000)]
    labels = frame_labels(segs, 1000, 16000, ids)
    # frames 0..3 have centres 200, 360, 520, 680 (win 400, shift 160)
    assert labels.tolist() == [ids["sil"], ids["a"], ids["t"], ids["t"]]
    assert labels.dtype == np.int32

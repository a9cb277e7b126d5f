"""The corpus of ``prepare synth``: layout, alignment truth, disjoint splits, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import kaldi_native_fbank as knf
import kaldiio
import numpy as np
import soundfile

from asrtrain.data.kaldi_dir import (
    read_scp,
    read_spk2gender,
    read_table,
    read_text,
    read_utt2dur,
    read_utt2spk,
    validate_data_dir,
)
from asrtrain.synth.phones import phone_ids

SPLITS = ("train", "dev", "test")


def read_ctm(path: Path) -> dict[str, list[tuple[float, float, str]]]:
    out: dict[str, list[tuple[float, float, str]]] = {}
    for line in path.read_text().splitlines():
        utt, channel, start, dur, phone = line.split()
        assert channel == "1"
        out.setdefault(utt, []).append((float(start), float(dur), phone))
    return out


def fbank_frames(samples: np.ndarray, rate: int) -> int:
    opts = knf.FbankOptions()
    opts.frame_opts.samp_freq = rate
    opts.frame_opts.dither = 0
    opts.mel_opts.num_bins = 40
    fbank = knf.OnlineFbank(opts)
    fbank.accept_waveform(rate, samples.astype(np.float32).tolist())
    fbank.input_finished()
    return fbank.num_frames_ready


def test_layout_and_validation(tiny_corpus: Path) -> None:
    for split in SPLITS:
        summary = validate_data_dir(tiny_corpus / split,
                                    require=("text", "wav.scp", "utt2dur", "spk2gender", "ali.scp"))
        assert summary.num_utterances >= 3
        assert (tiny_corpus / split / "phone.ctm").is_file()
        assert all(u.startswith(read_utt2spk(tiny_corpus / split / "utt2spk")[u])
                   for u in summary.utterances)
        assert set(read_spk2gender(tiny_corpus / split / "spk2gender").values()) <= {"m", "f"}
    assert (tiny_corpus / "phones.txt").read_text().startswith("<eps> 0\nsil 1\n")
    assert read_table(tiny_corpus / "phones.txt") == {k: str(v) for k, v in phone_ids().items()}
    for name in ("lexicon.txt", "nonsilence_phones.txt", "silence_phones.txt",
                 "optional_silence.txt"):
        assert (tiny_corpus / "dict" / name).is_file()
    assert (tiny_corpus / "dict" / "optional_silence.txt").read_text() == "sil\n"
    assert json.loads((tiny_corpus / "fingerprint.json").read_text())["espeak_ng"].startswith("1.")
    hours = sum(read_utt2dur(tiny_corpus / s / "utt2dur")[u] for s in SPLITS
                for u in read_utt2dur(tiny_corpus / s / "utt2dur")) / 3600
    assert 0.7 / 60 < hours < 1.4 / 60  # about the minute asked for


def test_alignment_truth(tiny_corpus: Path) -> None:
    """Last phone ends at the audio's end; one label per fbank frame; ids from phones.txt."""
    ids = {int(v) for v in read_table(tiny_corpus / "phones.txt").values()}
    for split in SPLITS:
        d = tiny_corpus / split
        wav, dur, ctm = read_scp(d / "wav.scp"), read_utt2dur(d / "utt2dur"), read_ctm(d / "phone.ctm")
        ali = dict(kaldiio.load_scp(str(d / "ali.scp")).items())
        assert set(ali) == set(wav) == set(ctm)
        for utt, path in wav.items():
            samples, rate = soundfile.read(path, dtype="int16")
            assert rate == 16000 and samples.ndim == 1
            segments = ctm[utt]
            assert segments[0][0] == 0.0 and segments[0][2] == "sil" and segments[-1][2] == "sil"
            ends = [round((s + d_) * rate) for s, d_, _ in segments]
            starts = [round(s * rate) for s, _, _ in segments]
            assert starts[1:] == ends[:-1]  # contiguous
            assert ends[-1] == len(samples)  # the last phone ends at the audio length
            assert abs(dur[utt] - len(samples) / rate) < 1e-4
            labels = ali[utt]
            assert labels.dtype == np.int32 and len(labels) == fbank_frames(samples, rate)
            assert set(np.unique(labels)) <= ids - {0}
            assert 0.05 < np.mean(labels == 1) < 0.6  # silence is there but not everything


def test_speech_is_where_the_alignment_says(tiny_corpus: Path) -> None:
    d = tiny_corpus / "train"
    ali = dict(kaldiio.load_scp(str(d / "ali.scp")).items())
    for utt, path in list(read_scp(d / "wav.scp").items())[:3]:
        samples, _ = soundfile.read(path, dtype="float32")
        labels = ali[utt]
        energy = np.array([np.mean(samples[t * 160:t * 160 + 400] ** 2) for t in range(len(labels))])
        assert np.median(energy[labels != 1]) > 100 * np.median(energy[labels == 1])


def test_splits_disjoint_and_lm_text(tiny_corpus: Path) -> None:
    speakers = {s: set(read_utt2spk(tiny_corpus / s / "utt2spk").values()) for s in SPLITS}
    texts = {s: {" ".join(w) for w in read_text(tiny_corpus / s / "text").values()}
             for s in SPLITS}
    assert not speakers["train"] & (speakers["dev"] | speakers["test"])
    assert not speakers["dev"] & speakers["test"]
    assert not texts["train"] & (texts["dev"] | texts["test"]) and not texts["dev"] & texts["test"]
    lm = set((tiny_corpus / "lm_text").read_text().splitlines())
    assert texts["train"] <= lm and not lm & (texts["dev"] | texts["test"])
    lexicon = {line.split()[0] for line in (tiny_corpus / "dict/lexicon.txt").read_text().splitlines()}
    words = {w for t in lm | texts["dev"] | texts["test"] for w in t.split()}
    assert words <= lexicon
    phones = set((tiny_corpus / "dict/nonsilence_phones.txt").read_text().split())
    for line in (tiny_corpus / "dict/lexicon.txt").read_text().splitlines():
        assert set(line.split()[1:]) <= phones, line


def test_same_seed_same_corpus(tiny_corpus: Path, tiny_corpus_params: dict,
                               tmp_path: Path) -> None:
    """Rebuilt from the same seed (with one job instead of two): the same bytes."""
    from asrtrain.synth.corpus import SynthConfig, make_corpus

    out = tmp_path / "again"
    make_corpus(out, SynthConfig(**{**tiny_corpus_params, "nj": 1}))
    for name in ("phones.txt", "lm_text", "dict/lexicon.txt", "speakers.tsv"):
        assert (out / name).read_bytes() == (tiny_corpus / name).read_bytes(), name
    for split in SPLITS:
        for name in ("text", "utt2spk", "spk2gender", "utt2dur", "phone.ctm", "ali.ark"):
            assert (out / split / name).read_bytes() == (tiny_corpus / split / name).read_bytes()
        ours, theirs = read_scp(out / split / "wav.scp"), read_scp(tiny_corpus / split / "wav.scp")
        assert ours.keys() == theirs.keys()
        for utt in ours:
            assert Path(ours[utt]).read_bytes() == Path(theirs[utt]).read_bytes(), utt

"""Export then transcribe the embedded corpus's test set: the words of ``decode`` at the
exported setting, CTM times within a frame; audio files, long recordings, other rates and
channels; the Python API."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile
from click.testing import CliRunner
from transcribe_helpers import run

from asrtrain.cli.main import cli
from asrtrain.decode.grid import setting_name


def _table(path: Path) -> dict[str, list[str]]:
    rows = (line.split() for line in path.read_text().splitlines() if line.strip())
    return {r[0]: r[1:] for r in rows}


def _picked(model: Path) -> str:
    d = json.loads((model / "settings.json").read_text())["decode"]
    return setting_name(d["lmwt"], d["wip"], [d["wip"], 1.0])  # lmwt_wip, as the grid names it


def test_the_export_records_the_dev_pick_and_the_front_end(exported: Path, trained_exp: Path):
    settings = json.loads((exported / "settings.json").read_text())
    best = (trained_exp / "exp/blstm/decode_dev/best_wer").read_text()
    assert best.split()[-1].endswith(f"wer_{_picked(exported)}")
    (stream,) = settings["streams"]
    assert stream["kind"] == "features" and stream["cmvn"] == "means"
    assert stream["features"]["type"] == "logmel" and stream["features"]["deltas"]
    assert settings["decode"]["beam"] == 10.0 and settings["decode"]["lattice_beam"] == 4.0
    manifest = json.loads((exported / "manifest.json").read_text())
    assert {"final.pt", "settings.json", "graph/HCLG.fst", "graph/words.txt"} <= set(manifest["files"])
    assert manifest["written_by"]["packages"]["torch"]


def test_transcribing_the_test_dir_gives_decodes_words_and_times(exported: Path, trained_exp: Path,
                                                                   tiny_corpus: Path, tmp_path: Path):
    decoded = trained_exp / "exp/blstm/decode_test"
    name = _picked(exported)
    out = tmp_path / "out"
    run("transcribe", exported, tiny_corpus / "test", "--out", out)
    hyp, ref = _table(out / "text"), _table(decoded / "hyp" / f"{name}.txt")
    assert hyp == ref
    assert sum(len(w) for w in ref.values()) > 10
    # two formats from one pass (what recipes/custom/transcribe.sh asks for)
    run("transcribe", exported, tiny_corpus / "test", "--out", out, "--format", "ctm", "--format", "json")
    assert {t["id"] for t in json.loads((out / "transcripts.json").read_text())} == set(ref)
    ours = [ln.split() for ln in (out / "ctm").read_text().splitlines()]
    theirs = [ln.split() for ln in (decoded / "ctm" / f"{name}.ctm").read_text().splitlines()]
    assert [(o[0], o[4]) for o in ours] == [(t[0], t[4]) for t in theirs]
    for o, t in zip(ours, theirs, strict=True):
        assert abs(float(o[2]) - float(t[2])) <= 0.01 and abs(float(o[3]) - float(t[3])) <= 0.01
        assert 0.0 <= float(o[5]) <= 1.0


def test_the_python_api_gives_words_times_and_confidences(exported: Path, tiny_corpus: Path,
                                                          tmp_path: Path):
    from asrtrain import Transcriber

    flac = sorted((tiny_corpus / "test" / "flac").rglob("*.flac"))[0]
    engine = Transcriber(exported, device="cpu")
    got = engine.transcribe(flac)
    assert got.words and got.text == " ".join(w.word for w in got.words)
    duration = soundfile.info(str(flac)).duration
    starts = [w.start for w in got.words]
    assert starts == sorted(starts)
    assert all(0 <= w.start < w.end <= duration + 0.01 and 0 <= w.confidence <= 1 for w in got.words)
    out = run("transcribe", exported, flac, "--format", "json")
    (record,) = json.loads(out[out.index("["):out.rindex("]") + 1])
    assert record["text"] == got.text and record["source"] == str(flac)


def test_other_rates_and_channels_are_converted_and_said_once(exported: Path, tiny_corpus: Path,
                                                              tmp_path: Path):
    flacs = sorted((tiny_corpus / "test" / "flac").rglob("*.flac"))[:2]
    stereo = []
    for i, flac in enumerate(flacs):
        x, rate = soundfile.read(str(flac), dtype="float32")
        path = tmp_path / f"stereo{i}.wav"  # 44.1 kHz, the speech on the second channel
        import subprocess

        subprocess.run(["sox", str(flac), "-r", "44100", str(tmp_path / "up.wav")], check=True)
        up, up_rate = soundfile.read(str(tmp_path / "up.wav"), dtype="float32")
        soundfile.write(str(path), np.stack([np.zeros_like(up), up], axis=1), up_rate, "PCM_16")
        stereo.append(path)
    res = CliRunner().invoke(cli, ["transcribe", str(exported), *map(str, stereo), "--channel", "2"])
    assert res.exit_code == 0, res.output
    assert res.stderr.count("channels: channel 2 is transcribed") == 1
    assert res.stderr.count("44100 Hz resampled to the model's 16000 Hz") == 1
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("stereo")]
    assert len(lines) == 2 and all(len(ln.split()) > 1 for ln in lines)


def test_a_long_recording_is_cut_at_its_pauses(exported: Path, tiny_corpus: Path, tmp_path: Path):
    """The test utterances joined with 1 s pauses, cut at 4 s: a cut in every pause (and
    inside the utterance longer than 4 s), no word across a pause."""
    flacs = sorted((tiny_corpus / "test" / "flac").rglob("*.flac"))
    pause = np.zeros(16000, dtype=np.float32)
    parts, bounds, at = [], [], 1.0
    for flac in flacs:
        x, _ = soundfile.read(str(flac), dtype="float32")
        parts += [pause, x]
        bounds.append((at, at + x.shape[0] / 16000))
        at += x.shape[0] / 16000 + 1.0
    long = tmp_path / "long.flac"
    soundfile.write(str(long), np.concatenate(parts + [pause]), 16000)
    out = run("transcribe", exported, long, "--format", "json", "--max-seconds", "4")
    (record,) = json.loads(out[out.index("["):out.rindex("]") + 1])
    assert record["segments"] >= len(flacs)
    for w in record["words"]:  # every word inside one utterance's stretch, not in a pause
        assert any(a - 0.3 <= w["start"] and w["end"] <= b + 0.3 for a, b in bounds), w
    out = run("transcribe", exported, long, "--format", "json", "--max-seconds", "4",
              "--speaker-per", "segment")
    (per_segment,) = json.loads(out[out.index("["):out.rindex("]") + 1])
    assert per_segment["segments"] == record["segments"] and per_segment["words"]


def test_files_share_a_speaker_with_utt2spk(exported: Path, tiny_corpus: Path, tmp_path: Path):
    """Files of one speaker given as such read like the data dir's utterances (CMVN per speaker)."""
    flacs = sorted((tiny_corpus / "test" / "flac").rglob("*.flac"))
    spk = tmp_path / "utt2spk"
    spk.write_text("".join(f"{f.name} spk\n" for f in flacs))
    listing = tmp_path / "files.lst"
    listing.write_text("".join(f"{f}\n" for f in flacs))
    out = run("transcribe", exported, listing, "--utt2spk", spk)
    per_file = _table_text(out)
    data_dir = _table_text(run("transcribe", exported, tiny_corpus / "test"))
    assert per_file == data_dir  # one speaker: the same CMVN stats as the data dir's


def _table_text(text: str) -> dict[str, list[str]]:
    rows = (ln.split() for ln in text.splitlines() if ln.startswith("spk-"))
    return {r[0]: r[1:] for r in rows}

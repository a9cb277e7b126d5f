"""Bad input, one line each: a missing file, an unreadable or empty one, 0.5 s of silence,
a model directory with a changed file or none of ours; exit 1 only when nothing could be
transcribed, and the files that could be still are (counted)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.core.errors import AsrtrainError


def _invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    garbage = tmp_path / "garbage.wav"
    garbage.write_bytes(b"this is not audio\n" * 20)
    silence = tmp_path / "silence.wav"
    soundfile.write(str(silence), np.zeros(8000, dtype=np.int16), 16000, "PCM_16")
    short = tmp_path / "short.wav"  # 10 ms of loud noise: not one frame
    soundfile.write(str(short), (np.random.default_rng(0).normal(size=160) * 3000).astype(np.int16),
                    16000, "PCM_16")
    return {"missing": tmp_path / "missing.flac", "empty": empty, "garbage": garbage,
            "silence": silence, "short": short}


def test_bad_files_get_a_line_each_and_the_good_one_is_transcribed(exported: Path, tiny_corpus: Path,
                                                                    tmp_path: Path):
    good = sorted((tiny_corpus / "test" / "flac").rglob("*.flac"))[0]
    bad = _bad_files(tmp_path)
    res = _invoke("transcribe", exported, good, *bad.values())
    assert res.exit_code == 0, res.output
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("Warning:")]
    assert len(warnings) == 5, res.stderr
    expected = {"missing": "no such file", "empty": "empty file", "garbage": "cannot read audio",
                "silence": "no speech (0.50 s of silence)", "short": "too short (10 ms"}
    for (name, path), line in zip(bad.items(), warnings, strict=True):
        assert str(path) in line and expected[name] in line, line
    assert "Traceback" not in res.output
    assert res.stdout.startswith(good.stem + " ") and len(res.stdout.splitlines()) == 1
    assert "transcribed 1 of 6 inputs (5 failed)" in res.stderr


def test_several_formats_need_out(tmp_path: Path):
    res = _invoke("transcribe", tmp_path, tmp_path / "a.wav", "--format", "text", "--format", "ctm")
    assert res.exit_code == 2 and "several --format values need --out" in res.output


def test_a_config_file_may_give_one_format(tmp_path: Path):
    config = tmp_path / "t.yaml"
    config.write_text("fmt: ctm\n")
    res = _invoke("transcribe", "--config", config, tmp_path / "none", tmp_path / "a.wav")
    assert res.exit_code == 1 and "no such model directory" in res.output, res.output


def test_nothing_transcribable_is_one_error_and_exit_1(exported: Path, tmp_path: Path, one_error):
    res = _invoke("transcribe", exported, *_bad_files(tmp_path).values())
    one_error(res.output, 1, res.exit_code, "nothing transcribed: 5 input(s) failed")
    assert res.stdout == ""


def test_the_api_raises_the_files_one_line_error(exported: Path, tmp_path: Path):
    from asrtrain import Transcriber

    engine = Transcriber(exported, device="cpu")
    for path in _bad_files(tmp_path).values():
        with pytest.raises(AsrtrainError) as err:
            engine.transcribe(path)
        assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("changed", ["graph/words.txt", "final.pt", "settings.json"])
def test_a_changed_file_in_the_model_is_refused(exported: Path, tiny_corpus: Path, tmp_path: Path,
                                                changed: str, one_error):
    model = tmp_path / "model"
    shutil.copytree(exported, model)
    data = bytearray((model / changed).read_bytes())
    data[len(data) // 2] ^= 0x01
    (model / changed).write_bytes(bytes(data))
    res = _invoke("transcribe", model, tiny_corpus / "test")
    line = one_error(res.output, 1, res.exit_code, f"damaged model: {changed} differs from its checksum")
    assert str(model) in line  # the line names the model directory
    (model / changed).unlink()
    res = _invoke("transcribe", model, tiny_corpus / "test")
    line = one_error(res.output, 1, res.exit_code, f"damaged model: {changed} is missing")
    assert str(model) in line


def test_a_foreign_directory_is_refused(tmp_path: Path, tiny_corpus: Path, exported: Path,
                                        one_error):
    res = _invoke("transcribe", tiny_corpus, tiny_corpus / "test")
    line = one_error(res.output, 1, res.exit_code, "not an exported asrtrain model (no manifest.json")
    assert str(tiny_corpus) in line  # the line names the directory given as a model
    other = tmp_path / "other"
    shutil.copytree(exported, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["format"] = "someone-else"
    (other / "manifest.json").write_text(json.dumps(manifest))
    res = _invoke("transcribe", other, tiny_corpus / "test")
    line = one_error(res.output, 1, res.exit_code, "not an exported asrtrain model")
    assert str(other) in line


def test_a_pickle_with_a_matching_checksum_is_not_executed(exported: Path, tmp_path: Path,
                                                           tiny_corpus: Path, one_error):
    """A final.pt made to run code when unpickled, its checksum updated in the manifest:
    torch.load(weights_only=True) refuses it and the code never runs."""
    import pickle

    from asrtrain.transcribe.manifest import sha256

    model = tmp_path / "model"
    shutil.copytree(exported, model)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    (model / "final.pt").write_bytes(pickle.dumps({"format": Evil()}, protocol=2))
    manifest = json.loads((model / "manifest.json").read_text())
    manifest["files"]["final.pt"] = {"bytes": (model / "final.pt").stat().st_size,
                                     "sha256": sha256(model / "final.pt")}
    (model / "manifest.json").write_text(json.dumps(manifest))
    res = _invoke("transcribe", model, tiny_corpus / "test")
    one_error(res.output, 1, res.exit_code, "not a readable model file")
    assert not marker.exists()


def test_export_without_a_dev_pick_or_graph_says_what_to_give(trained_exp: Path, tmp_path: Path,
                                                              one_error):
    exp = tmp_path / "exp"
    exp.mkdir()
    shutil.copy(trained_exp / "exp/blstm/final.pt", exp / "final.pt")
    res = _invoke("export", exp, tmp_path / "m")
    one_error(res.output, 1, res.exit_code, "give --pick-on DIR or --lmwt")
    res = _invoke("export", exp, tmp_path / "m", "--lmwt", "9", "--wip", "0.5", "--lattice-beam", "3")
    assert res.exit_code == 0, res.output
    settings = json.loads((tmp_path / "m/settings.json").read_text())["decode"]
    assert (settings["lmwt"], settings["wip"], settings["lattice_beam"]) == (9.0, 0.5, 3.0)
    assert (settings["beam"], settings["max_active"]) == (13.0, 7000)  # Kaldi's, without a dev decode
    res = _invoke("export", tmp_path, tmp_path / "m2")
    one_error(res.output, 1, res.exit_code, "no trained model here")

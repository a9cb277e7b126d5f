"""recipes/librispeech/run.sh on a tiny LibriSpeech (tests/recipes/librispeech_fixture.py):
the corpus in LibriSpeech's on-disk layout, prepared with lhotse, aligned from nothing.

Fast: stage 0 (``lhotse prepare librispeech`` + ``lhotse kaldi export`` per part, the dict
from the openslr-format lexicon, the LM text), and the messages for a missing part or
lexicon. Slow: every stage to a WER (alignments for train/dev/test on the way), then a
rerun that skips every step.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from librispeech_fixture import LAYOUT, make_librispeech, missing_tools  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PARTS = {"train": "train-clean-100", "dev": "dev-clean", "test": "test-clean"}
STEPS = ["lhotse-train-clean-100", "kaldi-train", "lhotse-dev-clean", "kaldi-dev", "lhotse-test-clean",
         "kaldi-test", "dict", "lm-text", "logmel-train", "mfcc-train", "logmel-dev", "mfcc-dev",
         "logmel-test", "mfcc-test", "align", "ivectors-train", "fmllr-train", "ivectors-dev", "fmllr-dev",
         "ivectors-test", "fmllr-test", "lang", "archive-train", "archive-dev", "archive-test", "train",
         "decode-dev", "decode-test", "export"]

needs_fixture = pytest.mark.needs(missing_tools() and f"no fixture: {missing_tools()}")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(LibriSpeech dir, lexicon file), made once for the module."""
    return make_librispeech(tmp_path_factory.mktemp("librispeech"))


def copy_recipe(work: Path) -> Path:
    """recipes/librispeech (without its data/exp) and recipes/utils under ``work``."""
    for name in ("librispeech", "utils"):
        shutil.copytree(ROOT / "recipes" / name, work / "recipes" / name,
                        ignore=shutil.ignore_patterns("data", "exp"))
    return work / "recipes" / "librispeech" / "run.sh"


def run(script: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    proc = subprocess.run(["bash", str(script), "--config", "conf/fixture.conf", *args], capture_output=True,
                          text=True, timeout=1500, env=env)
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def table(path: Path) -> dict[str, str]:
    return dict((line.split(maxsplit=1) + [""])[:2] for line in path.read_text().splitlines())


def transcripts(librispeech: Path, part: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for trans in sorted((librispeech / part).rglob("*.trans.txt")):
        out.update(table(trans))
    return out


@pytest.mark.slow  # 22 s; the end-to-end librispeech test covers stage 0 too
@needs_fixture
def test_stage0_lhotse_manifests_kaldi_dirs_dict_and_lm_text(tmp_path: Path, corpus: tuple[Path, Path]) -> None:
    from asrtrain.data.kaldi_dir import validate_data_dir
    from asrtrain.lang.lexicon import read_dict_dir

    librispeech, lexicon = corpus
    script = copy_recipe(tmp_path)
    out = run(script, "--corpus", str(librispeech), "--lexicon", str(lexicon), "--stop-stage", "0").stdout
    data = script.parent / "data"
    for split, part in PARTS.items():
        # lhotse's manifests, one pair per part
        manifest = data / "manifests" / f"librispeech_supervisions_{part}.jsonl.gz"
        sups = [json.loads(line) for line in gzip.open(manifest, "rt")]
        assert {s["id"] for s in sups} == set(transcripts(librispeech, part))
        # lhotse's Kaldi export: text and utt2spk as lhotse wrote them (reader = speaker)
        d = data / split
        ref = transcripts(librispeech, part)
        assert table(d / "text") == ref
        assert list(table(d / "text")) == sorted(ref)
        assert table(d / "utt2spk") == {u: u.split("-")[0] for u in ref}
        assert set(table(d / "segments")) == set(ref)
        assert (d / "utt2dur").is_file() and (d / "reco2dur").is_file()
        # wav.scp: lhotse's ffmpeg pipes (kept aside) become the FLAC files themselves
        lhotse_scp = table(d / "wav.scp.lhotse")
        assert all(v.startswith("ffmpeg ") and v.endswith("pipe:1 |") for v in lhotse_scp.values())
        wav = table(d / "wav.scp")
        assert set(wav) == set(ref)
        for utt, path in wav.items():
            reader, chapter, _ = utt.split("-")
            assert path == str(librispeech.resolve() / part / reader / chapter / f"{utt}.flac")
            assert path in lhotse_scp[utt]
        speakers = {r for r, _, _ in LAYOUT[part]}
        assert set(table(d / "spk2utt")) == speakers
        summary = validate_data_dir(d, require=("text", "wav.scp"))
        assert summary.num_utterances == len(ref)
        assert f"{part} -> data/{split}: {len(ref)} utterances, {len(speakers)} speakers" in out
    # the dict from the openslr-format lexicon
    dict_dir = data / "dict"
    assert (dict_dir / "lexicon.txt").read_text().splitlines() == ["<UNK> spn", "NO N OW1", "YES Y EH1 S"]
    assert (dict_dir / "silence_phones.txt").read_text().split() == ["sil", "spn"]
    assert (dict_dir / "optional_silence.txt").read_text().split() == ["sil"]
    assert sorted((dict_dir / "nonsilence_phones.txt").read_text().split()) == ["EH1", "N", "OW1", "S", "Y"]
    lex = read_dict_dir(dict_dir)
    assert lex.silence == "sil" and set(lex.words) == {"<UNK>", "NO", "YES"}
    # the LM text: the training transcripts
    assert sorted((data / "lm_text").read_text().splitlines()) == sorted(
        transcripts(librispeech, PARTS["train"]).values())


def test_missing_corpus_part_or_lexicon_says_where_to_get_it(tmp_path: Path) -> None:
    script = copy_recipe(tmp_path)
    proc = run(script, "--corpus", str(tmp_path / "LibriSpeech"), "--stop-stage", "0", check=False)
    assert proc.returncode != 0
    assert f"no {tmp_path}/LibriSpeech/train-clean-100" in proc.stderr
    assert "https://www.openslr.org/12" in proc.stderr
    proc = subprocess.run(["bash", str(script.parent / "local" / "prepare_dict.sh"), str(tmp_path / "lex.txt"),
                           str(tmp_path / "dict")], capture_output=True, text=True)
    assert proc.returncode != 0 and "https://www.openslr.org/11" in proc.stderr


@needs_fixture
@pytest.mark.slow
def test_librispeech_recipe_to_a_wer_then_skips(tmp_path: Path, corpus: tuple[Path, Path]) -> None:
    librispeech, lexicon = corpus
    script = copy_recipe(tmp_path)
    args = ("--corpus", str(librispeech), "--lexicon", str(lexicon))
    out = run(script, *args).stdout
    assert "already complete" not in out
    recipe = script.parent
    # stage 2: every utterance of train and dev aligned from nothing, in prepare lang's
    # layout; test never aligned (its archive has no targets)
    ali = recipe / "exp" / "ali"
    assert (ali / "phones.txt").is_file()
    assert not (ali / "test").exists()
    for split, part in PARTS.items():
        if split == "test":
            continue
        utts = set(transcripts(librispeech, part))
        assert set(table(ali / split / "ali.scp")) == utts, split
        assert table(ali / split / "text") == transcripts(librispeech, part)
        assert {line.split()[0] for line in (ali / split / "phone.ctm").read_text().splitlines()} == utts
    report = json.loads((ali / "report.json").read_text())
    assert list(report["stages"]) == ["mono", "tri", "lda", "sat"]
    assert all(not s["lost"] for s in report["splits"].values())
    # stage 8: a WER over every test word; yes/no is easy enough for the tiny BLSTM
    model = recipe / "exp" / "blstm_h-adpsgd"
    best = (model / "decode_test" / "dev_picked_wer").read_text().splitlines()[0]
    wer = re.match(r"%WER (\d+\.\d+) \[ (\d+) / (\d+), \d+ ins, \d+ del, \d+ sub \]", best)
    assert wer, best
    n_words = sum(len(t.split()) for t in transcripts(librispeech, PARTS["test"]).values())
    assert int(wer.group(3)) == n_words
    assert float(wer.group(1)) < 20.0, best
    header = (f"test-clean at the setting picked on dev-clean ({best.split('wer_')[-1]}), "
              "h-adpsgd on 2 learners:")
    assert header in out
    report_text = out[out.index(header):]
    assert f"Kaldi compute-wer (Levenshtein):  {wer.group(0)}" in report_text

    again = run(script, *args).stdout
    for name in STEPS:
        assert re.search(rf"\] {name}: already complete", again), name
    assert again.count("already complete") == len(STEPS)
    assert again[again.index(header):] == report_text

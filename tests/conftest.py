"""Shared fixtures: small synthesized corpora (``asrtrain prepare synth``) for every stage's tests.

A corpus is built once and kept in the cache (``$ASRTRAIN_CACHE`` or
``~/.cache/asrtrain``) under a key made of its parameters, the espeak-ng version
and the source of the code that writes it, so repeated test runs reuse it and a
change to the synthesizer rebuilds it. A file lock makes concurrent test
sessions wait for one build instead of racing; the build itself is atomic.

Treat the corpora as read-only: copy what a test needs to modify.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: About a minute of audio: 2 train speakers, 1 dev, 1 test; LM text = train + 500 sentences.
TINY = {"hours": 1 / 60, "speakers": 4, "seed": 0, "dev_speakers": 1, "test_speakers": 1,
        "lm_sentences": 500}
#: About six minutes: 6 train speakers, 1 dev, 1 test; LM text = train + 2000 sentences.
SMALL = {"hours": 0.1, "speakers": 8, "seed": 0, "dev_speakers": 1, "test_speakers": 1,
         "lm_sentences": 2000}


def _code_digest() -> str:
    """Hash of the code that decides a corpus' contents."""
    digest = hashlib.sha256()
    files = sorted((REPO / "asrtrain" / "synth").glob("*.py")) + [
        REPO / "asrtrain" / "data" / "kaldi_dir.py"]
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def cached_corpus(name: str, params: dict) -> Path:
    """Build (or reuse) the corpus ``name`` with ``SynthConfig(**params)``; return its path."""
    from asrtrain.synth import espeak
    from asrtrain.synth.corpus import SynthConfig, make_corpus
    from asrtrain.synth.text import cache_dir

    key_data = json.dumps({"params": params, "espeak": espeak.engine().version(),
                           "code": _code_digest()}, sort_keys=True)
    key = hashlib.sha256(key_data.encode()).hexdigest()[:16]
    root = cache_dir() / "test-corpora"
    root.mkdir(parents=True, exist_ok=True)
    out = root / f"{name}-{key}"
    with open(root / f"{name}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "summary.json").is_file():
            make_corpus(out, SynthConfig(nj=2, **params), params={"test_fixture": name, **params})
            _prune(root, name, keep=out)
    return out


def _prune(root: Path, name: str, keep: Path, age: float = 3600.0) -> None:
    """Remove this fixture's corpora built by older code (untouched for an hour)."""
    import shutil
    import time

    for old in root.glob(f"{name}-*"):
        if old.is_dir() and old != keep and time.time() - old.stat().st_mtime > age:
            shutil.rmtree(old, ignore_errors=True)
            old.with_name(old.name + ".lock").unlink(missing_ok=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@pytest.mark.needs(why)``: skip (fail under CI=true) when ``why`` is not None."""
    from needs import missing

    for mark in item.iter_markers("needs"):
        if mark.args and mark.args[0] is not None:
            missing(str(mark.args[0]))


@pytest.fixture(scope="session")
def tiny_corpus() -> Path:
    """About one minute of synthesized speech: OUT/{train,dev,test}, phones.txt, dict/, lm_text."""
    return cached_corpus("tiny", TINY)


@pytest.fixture(scope="session")
def tiny_corpus_params() -> dict:
    """The SynthConfig fields of ``tiny_corpus`` (to rebuild or vary it)."""
    return dict(TINY)


@pytest.fixture(scope="session")
def small_corpus() -> Path:
    """About six minutes of synthesized speech, 8 speakers (for slower tests)."""
    return cached_corpus("small", SMALL)


@pytest.fixture(scope="session")
def mini_corpus(tmp_path_factory) -> Path:
    """The hand-made corpus of tests/lang/minicorpus.py (a handful of words, exact alignments)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "lang"))
    from minicorpus import write_corpus

    return write_corpus(tmp_path_factory.mktemp("mini_corpus"))


@pytest.fixture(scope="session")
def mini_lang(mini_corpus: Path, tmp_path_factory) -> tuple[Path, dict]:
    """``prepare lang`` run once on the mini corpus (order 3, about 60 pdfs): (out dir, figures)."""
    from asrtrain.lang.prepare import prepare_lang

    out = tmp_path_factory.mktemp("mini_lang") / "lang"
    figures = prepare_lang(mini_corpus / "dict", mini_corpus / "lm_text", mini_corpus, out,
                           order=3, num_pdfs=60)
    return out, figures


@pytest.fixture(scope="session")
def tiny_mfcc(tiny_corpus: Path, tmp_path_factory) -> Path:
    """MFCC (13, with per-speaker CMVN stats) of the tiny corpus: OUT/{train,dev,test}, by
    ``prepare features`` in this process (its record beside them, as export reads it)."""
    from click.testing import CliRunner

    from asrtrain.cli.main import cli

    out = tmp_path_factory.mktemp("tiny_mfcc")
    for split in ("train", "dev", "test"):
        res = CliRunner().invoke(cli, ["prepare", "features", str(tiny_corpus / split),
                                       str(out / split), "--type", "mfcc", "--nj", "1"])
        assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="session")
def one_process(tiny_corpus: Path, tiny_mfcc: Path, tmp_path_factory) -> Path:
    """The small ladder of ``tests/align/ladder_runs`` in one process (``--nj 1``): what
    every kind of jobs must give (tests/align), and the aligner of tests/transcribe's SAT
    model."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "align"))
    from ladder_runs import run

    out = tmp_path_factory.mktemp("nj1") / "ali"
    report = run(tiny_corpus, tiny_mfcc, out, 1)
    assert report["stages"]["mono"]["jobs"] == 1
    return out


@pytest.fixture(scope="session")
def gmm_lang(one_process: Path, tiny_corpus: Path, tmp_path_factory) -> Path:
    """``prepare lang`` on the ladder's alignments (order 2, about 100 pdfs), as a recipe
    makes it after stage align."""
    from asrtrain.lang.prepare import prepare_lang

    out = tmp_path_factory.mktemp("gmm_lang") / "lang"
    prepare_lang(tiny_corpus / "dict", tiny_corpus / "lm_text", one_process, out, order=2,
                 num_pdfs=100)
    return out


@pytest.fixture(scope="session")
def gmm_graphs(gmm_lang: Path, one_process: Path, tmp_path_factory) -> Path:
    """``prepare gmm-graph`` of the ladder's mono and SAT rungs: OUT/mono, OUT/sat (the
    tree the tri, LDA+MLLT and SAT rungs share)."""
    from asrtrain.lang.gmm_graph import build_gmm_graph

    out = tmp_path_factory.mktemp("gmm_graphs")
    for rung in ("mono", "sat"):
        build_gmm_graph(gmm_lang, one_process / "models" / f"{rung}.pt", out / rung)
        assert (out / rung / "HCLG.fst").is_file()
    return out


def _cli_bin() -> str:
    return str(Path(sys.executable).parent / "asrtrain")


@pytest.fixture()
def run_cli():
    """``asrtrain ARGS`` in a subprocess, as a user runs it: exit status, stdout, stderr."""
    import os
    import subprocess

    def run(*args: object, timeout: float = 300, **kwargs):
        env = dict(os.environ, COLUMNS="3000", OMP_NUM_THREADS="1", **kwargs.pop("env", {}))
        return subprocess.run([_cli_bin(), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, env=env, **kwargs)

    return run


def error_line(output: str, code: int, returncode: int, *needles: str) -> str:
    """The one ``Error:`` line of a failed command, checked: its status, no traceback, the needles."""
    assert returncode == code, f"exit {returncode}, expected {code}:\n{output[-3000:]}"
    assert "Traceback" not in output and "Segmentation" not in output, output[-3000:]
    lines = [ln for ln in output.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, output[-3000:]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture()
def tmpfs(tmp_path: Path):
    """``tmpfs(kib)``: a fresh tmpfs of that size mounted under tmp_path (skip where mounting is
    not allowed); unmounted at the end, also when the test fails."""
    import shutil
    import subprocess

    mounted: list[Path] = []

    def mount(kib: int) -> Path:
        if shutil.which("mount") is None:
            pytest.skip("no mount command: cannot make a small filesystem to fill")
        where = tmp_path / f"tmpfs{len(mounted)}"
        where.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if proc.returncode:
            pytest.skip(f"cannot mount a tmpfs (not root?): {proc.stderr.strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture()
def one_error():
    """:func:`error_line` as a fixture (tests cannot import a conftest)."""
    return error_line

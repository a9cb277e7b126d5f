"""A small trained model on tiny_corpus, laid out as a recipe leaves it, for export and
transcribe: lang + graph, logmel features (CMVN per speaker) of train/dev/test, archives, a
1-layer BLSTM, dev and test decoded with lattices over a small grid, dev scored.

Built once (about 30 s on 2 cores, prepare lang a third of it) and kept in the cache
(``$ASRTRAIN_CACHE`` or ``~/.cache/asrtrain``, as the corpora are) under a key made of the
corpus and the source of the code that makes it, so later sessions reuse it in a second and
a change to that code rebuilds it. Treat it as read-only.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import time
from pathlib import Path

import pytest
from transcribe_helpers import GRID, SEARCH, run

REPO = Path(__file__).resolve().parents[2]


def _key(corpus: Path) -> str:
    """The corpus and every source file the fixture's commands run (not transcribe's own)."""
    digest = hashlib.sha256(str(corpus.resolve()).encode())
    for path in sorted((REPO / "asrtrain").rglob("*.py")) + [Path(__file__)]:
        if "transcribe" not in path.parts and path.name not in ("export.py", "transcribe.py"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def trained_exp(tiny_corpus: Path) -> Path:
    """The recipe-like work dir: ``data/lang``, ``data/logmel/*``, ``exp/blstm`` (final.pt,
    decode_dev scored, decode_test), built once and cached."""
    from asrtrain.synth.text import cache_dir

    root = cache_dir() / "test-models"
    root.mkdir(parents=True, exist_ok=True)
    work = root / f"transcribe-{_key(tiny_corpus)}"
    with open(f"{work}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (work / "done").is_file():
            shutil.rmtree(work, ignore_errors=True)  # a build that was killed
            _build(tiny_corpus, work)
            (work / "done").write_text("built\n")
            _prune(root, keep=work)
    return work


def _prune(root: Path, keep: Path, age: float = 3600.0) -> None:
    """Remove fixtures built by older code (untouched for an hour)."""
    for old in root.glob("transcribe-*"):
        if old.is_dir() and old != keep and time.time() - old.stat().st_mtime > age:
            shutil.rmtree(old, ignore_errors=True)
            Path(f"{old}.lock").unlink(missing_ok=True)


def _build(tiny_corpus: Path, work: Path) -> None:
    data, model = work / "data", work / "exp" / "blstm"
    lang = data / "lang"
    run("prepare", "lang", tiny_corpus / "dict", tiny_corpus / "lm_text", tiny_corpus, lang,
        "--num-pdfs", "200", "--order", "3")
    num_pdfs = (lang / "num_pdfs").read_text().strip()
    for split in ("train", "dev", "test"):
        feats = data / "logmel" / split
        run("prepare", "features", tiny_corpus / split, feats, "--type", "logmel", "--num-bins",
            "40", "--deltas", "--nj", "1")
        targets = ([] if split == "test" else
                   ["--ali", lang / "pdf_ali" / f"{split}.scp", "--num-pdfs", num_pdfs])
        run("prepare", "archive", data / "archives" / f"{split}.h5",
            "--stream", f"logmel={feats / 'feats.scp'}", "--cmvn", f"logmel={feats / 'cmvn.scp'}",
            "--utt2spk", tiny_corpus / split / "utt2spk", *targets)
    run("train", data / "archives" / "train.h5", model, "--valid", data / "archives" / "dev.h5",
        "--epochs", "12", "--batch", "8", "--base-batch", "8", "--lr", "0.5", "--warmup-epochs",
        "0", "--hidden", "64", "--layers", "1", "--proj", "0", "--threads", "1", "--no-resume")
    for split in ("dev", "test"):
        run("decode", model / "final.pt", lang / "graph", data / "archives" / f"{split}.h5",
            model / f"decode_{split}", "--nj", "1", "--lattices", *GRID, *SEARCH,
            "--text", tiny_corpus / split / "text")
    run("score", "--sweep", model / "decode_dev")


@pytest.fixture(scope="session")
def exported(trained_exp: Path, tmp_path_factory) -> Path:
    """``asrtrain export`` of the fixture's model (read-only: copy it to change it)."""
    out = tmp_path_factory.mktemp("exported") / "model"
    run("export", trained_exp / "exp" / "blstm", out)
    return out

"""A tiny LibriSpeech, in LibriSpeech's exact on-disk layout, made from Kaldi's yesno WAVs.

``make_librispeech(root)`` writes ``root/LibriSpeech/`` (what the openslr.org/12 tarballs
unpack to) with the three parts the recipe uses by default::

    LibriSpeech/SPEAKERS.TXT, CHAPTERS.TXT
    LibriSpeech/<part>/<speaker>/<chapter>/<speaker>-<chapter>-<NNNN>.flac
    LibriSpeech/<part>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt

and ``root/librispeech-lexicon.txt`` in the format of openslr.org/11's lexicon (``WORD<TAB>PH1
PH2 ...``, stressed ARPAbet). The audio is the yesno corpus (one speaker saying eight
Hebrew yes/no words per file, 8 kHz) resampled to 16 kHz with sox and encoded with flac;
each yesno file's name is its transcript (``0_1_1_...`` is ``NO YES YES ...``). The 60 files
are shuffled (seed 0) and dealt out to made-up readers and chapters: 40 to train-clean-100 (4 readers, 2 chapters
each), 10 to dev-clean and 10 to test-clean (2 readers each).

``missing_tools()`` says why the fixture cannot be made here (None when it can).
"""

from __future__ import annotations

import importlib.util
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

from needs import yesno_corpus

YESNO = yesno_corpus()
WORDS = {"0": "NO", "1": "YES"}
LEXICON = "NO\tN OW1\nYES\tY EH1 S\n"
#: part -> [(reader, gender, [chapters])]; each chapter gets UTTS_PER_CHAPTER files.
LAYOUT = {
    "train-clean-100": [("19", "F", ["198", "227"]), ("26", "M", ["495", "496"]),
                        ("103", "F", ["1240", "1241"]), ("1034", "M", ["121119", "121120"])],
    "dev-clean": [("84", "F", ["121123"]), ("174", "M", ["50561"])],
    "test-clean": [("121", "F", ["121726"]), ("237", "F", ["126133"])],
}
UTTS_PER_CHAPTER = 5


def missing_tools() -> str | None:
    """Why the fixture cannot be built here (yesno data, lhotse, sox or flac missing), or None."""
    if not YESNO.is_dir() or len(list(YESNO.glob("*.wav"))) < 60:
        return f"the yesno WAVs are not in {YESNO} (openslr.org/1: waves_yesno.tar.gz)"
    if importlib.util.find_spec("lhotse") is None:
        return "lhotse is not installed (pip install -e '.[corpora]')"
    for tool in ("sox", "flac"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install {tool})"
    return None


def _flac(wav: Path, out: Path) -> None:
    """8 kHz WAV -> 16 kHz 16-bit mono FLAC: sox resamples, flac encodes."""
    with tempfile.TemporaryDirectory() as tmp:
        mid = Path(tmp) / "16k.wav"
        subprocess.run(["sox", str(wav), "-r", "16000", "-b", "16", "-c", "1", str(mid)], check=True)
        subprocess.run(["flac", "--silent", "--force", "-o", str(out), str(mid)], check=True)


def make_librispeech(root: Path) -> tuple[Path, Path]:
    """Build the corpus under ``root``; returns (``root/LibriSpeech``, the lexicon file)."""
    reason = missing_tools()
    if reason:
        raise RuntimeError(reason)
    corpus = root / "LibriSpeech"
    files = sorted(YESNO.glob("*.wav"))
    random.Random(0).shuffle(files)  # every part gets a mix of transcripts
    wavs = iter(files)
    speakers = [";ID  |SEX| SUBSET           |MINUTES| NAME"]
    chapters = [";ID    |READER|MINUTES| SUBSET           | PROJ.|BOOK ID| CH. TITLE          | PROJECT TITLE"]
    for part, readers in LAYOUT.items():
        for reader, gender, chaps in readers:
            speakers.append(f"{reader:<5}| {gender} | {part:<16} | {0.5 * len(chaps):5.2f} | Yesno Reader {reader}")
            for chap in chaps:
                chapters.append(f"{chap:<7}| {reader:<5}| 0.50  | {part:<16} | 1    | 1     | "
                                f"Chapter {chap:<10} | Yes and No")
                folder = corpus / part / reader / chap
                folder.mkdir(parents=True)
                lines = []
                for n in range(UTTS_PER_CHAPTER):
                    wav = next(wavs)
                    utt = f"{reader}-{chap}-{n:04d}"
                    _flac(wav, folder / f"{utt}.flac")
                    lines.append(f"{utt} " + " ".join(WORDS[b] for b in wav.stem.split("_")))
                (folder / f"{reader}-{chap}.trans.txt").write_text("\n".join(lines) + "\n")
    (corpus / "SPEAKERS.TXT").write_text("\n".join(speakers) + "\n")
    (corpus / "CHAPTERS.TXT").write_text("\n".join(chapters) + "\n")
    lexicon = root / "librispeech-lexicon.txt"
    lexicon.write_text(LEXICON)
    return corpus, lexicon


if __name__ == "__main__":  # python tests/recipes/librispeech_fixture.py OUT_DIR
    import sys

    print(*make_librispeech(Path(sys.argv[1])))

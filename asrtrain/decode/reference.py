"""The reference that travels with a decode: ``--text`` as ``OUT/ref.txt``, with its speakers.

``score --sweep OUT`` reads ``OUT/ref.txt`` and the ``utt2spk`` beside it. The speakers
come from the Kaldi data dir that holds the text (``utt2spk`` beside ``--text``): left
behind, scoring would guess them from the utterance ids, its per-speaker tables would have
a row per utterance and ``--bootstrap-unit speaker`` would resample utterances.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from asrtrain.core.atomic import atomic_path, write_text
from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines

log = logging.getLogger("asrtrain.decode")


def copy_reference(text: Path, dest: Path, words: dict[int, str], decoded: set[str]) -> int:
    """Copy ``--text`` to ``dest`` (``OUT/ref.txt``) and its speakers beside it; count (and
    name) words the lexicon lacks."""
    if not Path(text).exists():
        raise InputError("reference text not found", text)
    vocab = set(words.values())
    lines = read_lines(text)
    oov, where = 0, []
    refs = set()
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        refs.add(parts[0])
        missing = [w for w in parts[1:] if w not in vocab]
        if missing:
            oov += len(missing)
            where.append(f"{parts[0]}: {missing[0]}")
    write_text(dest, "\n".join(lines) + "\n")
    copy_speakers(Path(text).parent / "utt2spk", dest.parent, refs)
    if oov:
        log.warning("%s: %d reference words in %d utterances are not in the lexicon (they cannot be "
                    "recognised and count as errors), e.g. %s", text, oov, len(where), "; ".join(where[:3]))
    if decoded - refs:
        log.warning("%d decoded utterances have no reference in %s", len(decoded - refs), text)
    if refs - decoded:
        log.warning("%d utterances of %s are not in the archive (scoring counts their words as "
                    "deletions), e.g. %s", len(refs - decoded), text, ", ".join(sorted(refs - decoded)[:3]))
    return oov


def copy_speakers(utt2spk: Path, out: Path, refs: set[str] | None = None) -> bool:
    """Copy ``utt2spk`` to ``out/utt2spk`` (an older one there is removed when there is none
    to copy: it would give these utterances another decode's speakers); whether copied."""
    dest = out / "utt2spk"
    if not utt2spk.is_file():
        dest.unlink(missing_ok=True)
        log.warning("%s not found: scoring will take speakers from the utterance ids", utt2spk)
        return False
    if refs is not None:
        known = {ln.split()[0] for ln in read_lines(utt2spk) if ln.strip()}
        if refs - known:
            log.warning("%s lacks %d reference utterances, e.g. %s (scored under the speaker "
                        "their ids give)", utt2spk, len(refs - known), ", ".join(sorted(refs - known)[:3]))
    with atomic_path(dest) as tmp:
        shutil.copyfile(utt2spk, tmp)
    return True

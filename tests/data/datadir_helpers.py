"""Small Kaldi data dirs written for the data-dir step tests (perturb, subset, check-dirs).

The audio paths are not read by those steps (only by features), so most dirs point at
files that do not exist; :func:`yesno_dir` makes one of real 8 kHz recordings.
"""

from __future__ import annotations

from pathlib import Path

from needs import yesno_wavs

from asrtrain.data.kaldi_dir import spk2utt_from_utt2spk, write_table


def make_dir(root: Path, speakers: dict[str, int], text: bool = True,
             segments: bool = False) -> Path:
    """A dir with ``n`` utterances ``SPK-i`` per speaker; with ``segments``, two per recording."""
    root.mkdir(parents=True, exist_ok=True)
    utt2spk = {f"{spk}-{i}": spk for spk, n in speakers.items() for i in range(n)}
    if segments:
        segs = {f"{spk}-{i}": f"{spk}-rec{i // 2} {i % 2 * 2.5} {i % 2 * 2.5 + 2.25}"
                for spk, n in speakers.items() for i in range(n)}
        write_table(root / "segments", segs)
        write_table(root / "wav.scp", {v.split()[0]: f"/audio/{v.split()[0]}.wav"
                                       for v in segs.values()})
    else:
        write_table(root / "wav.scp", {u: f"/audio/{u}.flac" for u in utt2spk})
    if text:
        write_table(root / "text", {u: f"WORD{i} HELLO" for i, u in enumerate(utt2spk)})
    write_table(root / "utt2spk", utt2spk)
    write_table(root / "spk2utt", spk2utt_from_utt2spk(utt2spk))
    return root


def yesno_dir(root: Path, count: int) -> Path:
    """The first ``count`` yesno recordings as a one-speaker dir (ids are the file names)."""
    wavs = yesno_wavs()[:count]
    root.mkdir(parents=True, exist_ok=True)
    write_table(root / "wav.scp", {w.stem: str(w) for w in wavs})
    write_table(root / "text", {w.stem: " ".join("YES" if c == "1" else "NO"
                                                 for c in w.stem.split("_")) for w in wavs})
    utt2spk = {w.stem: "global" for w in wavs}
    write_table(root / "utt2spk", utt2spk)
    write_table(root / "spk2utt", spk2utt_from_utt2spk(utt2spk))
    return root

"""Kaldi table I/O shared by the i-vector, fMLLR, alignment and lang commands: a data dir's
feats.scp, one checked matrix at a time, speakers, ark/scp output (matrices or integer
vectors) that appears only complete, and a data dir's tables copied beside new features."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.atomic import atomic_path
from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_text


def open_feats(data: Path) -> tuple[Path, Any]:
    """``DATA/feats.scp`` opened lazily with kaldiio; missing is an InputError."""
    from asrtrain.data.kaldi_read import open_scp

    scp = Path(data) / "feats.scp"
    if not scp.is_file():
        raise InputError("no feats.scp: make features first (asrtrain prepare features)", data)
    return scp, open_scp(scp)


def read_matrix(table: Any, key: str, source: Path, dim: int | None = None) -> np.ndarray:
    """One float32 matrix of a kaldiio table; unreadable or misshapen is an InputError."""
    from asrtrain.data.kaldi_read import load_entry

    mat = np.array(load_entry(table, key, source), dtype=np.float32)
    if mat.ndim != 2 or mat.shape[0] == 0:
        raise InputError(f"{key!r} is not a non-empty matrix (shape {mat.shape})", source)
    if dim is not None and mat.shape[1] != dim:
        raise InputError(f"{key!r} has dimension {mat.shape[1]}, the others {dim}", source)
    if not np.isfinite(mat).all():
        raise InputError(f"{key!r} has non-finite values", source)
    return mat


def speakers_of(data: Path, utts: Iterable[str]) -> dict[str, list[str]]:
    """Speaker -> its utterances (in ``utts`` order), from ``DATA/utt2spk``."""
    from asrtrain.data.kaldi_dir import read_utt2spk

    utt2spk = read_utt2spk(Path(data) / "utt2spk")
    spk2utt: dict[str, list[str]] = {}
    for utt in utts:
        if utt not in utt2spk:
            raise InputError(f"utterance {utt!r} of feats.scp has no speaker", Path(data) / "utt2spk")
        spk2utt.setdefault(utt2spk[utt], []).append(utt)
    return spk2utt


def write_matrices(scp: Path, items: Iterable[tuple[str, np.ndarray]]) -> int:
    """Write ``scp`` and its ark (``<dir>/data/<name>.ark``) with kaldiio; the scp
    appears only when the ark is complete. Returns the number of entries."""
    import kaldiio

    ark = (scp.parent / "data" / f"{scp.stem}.ark").resolve()
    ark.parent.mkdir(parents=True, exist_ok=True)
    scp.unlink(missing_ok=True)  # an old scp must not point into the ark being rewritten
    count = 0
    with atomic_path(scp) as tmp:
        with kaldiio.WriteHelper(f"ark,scp:{ark},{tmp}") as writer:
            for key, value in items:
                writer(key, np.ascontiguousarray(value, dtype=np.float32))
                count += 1
    return count


def write_part(ark: Path, items: Iterable[tuple[str, np.ndarray]]) -> dict[str, str]:
    """One job's matrices into ``ark`` (kaldiio); their scp entries (utterance ->
    ``ark:offset``), which :func:`write_scp` merges once every job's part is complete."""
    import kaldiio

    ark = Path(ark).resolve()
    ark.parent.mkdir(parents=True, exist_ok=True)
    part = ark.with_suffix(".scp.part")
    with kaldiio.WriteHelper(f"ark,scp:{ark},{part}") as writer:
        for key, value in items:
            writer(key, np.ascontiguousarray(value, dtype=np.float32))
    entries = dict(line.split(" ", 1) for line in read_text(part).splitlines())
    part.unlink()
    return entries


def part_arks(directory: Path, stem: str, nj: int) -> list[Path]:
    """The arks of ``nj`` jobs (``stem.ark`` for one, as a single writer names it; else
    ``stem.<job>.ark``); the other arks of ``stem`` a run with another ``nj`` left go."""
    arks = [directory / f"{stem}.ark"] if nj == 1 else \
        [directory / f"{stem}.{j + 1}.ark" for j in range(nj)]
    for old in [*directory.glob(f"{stem}.ark"), *directory.glob(f"{stem}.*.ark")]:
        if old not in arks and (old.stem == stem or old.stem[len(stem) + 1:].isdigit()):
            old.unlink()
    return arks


def write_scp(scp: Path, keys: Iterable[str], entries: dict[str, str]) -> int:
    """``scp`` (atomically) of ``entries`` in the order of ``keys``; returns the count."""
    from asrtrain.core.atomic import write_text

    lines = [f"{key} {entries[key]}\n" for key in keys]
    write_text(scp, "".join(lines))
    return len(lines)


def frame_counts(data: Path, table: Any, utts: list[str]) -> dict[str, int]:
    """Each utterance's frames, from ``DATA/utt2num_frames`` (``prepare features`` writes
    it) where it names them all, else from the matrices (read once, one at a time)."""
    path = Path(data) / "utt2num_frames"
    counts: dict[str, int] = {}
    if path.is_file():
        for line in read_text(path).splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                counts[parts[0]] = int(parts[1])
    if all(u in counts for u in utts):
        return {u: counts[u] for u in utts}
    from asrtrain.data.kaldi_read import load_entry

    return {u: int(np.shape(load_entry(table, u, Path(data) / "feats.scp"))[0]) for u in utts}


def write_int_vectors(prefix: Path, items: Iterable[tuple[str, np.ndarray]]) -> int:
    """``prefix.ark`` + ``prefix.scp`` of int32 vectors (alignments), both written under
    temporary names and renamed complete; the scp names the final ark. Returns the count."""
    import kaldiio

    ark, scp = prefix.with_suffix(".ark"), prefix.with_suffix(".scp")
    count = 0
    with atomic_path(ark) as tmp_ark, atomic_path(scp) as tmp_scp:
        with kaldiio.WriteHelper(f"ark,scp:{tmp_ark},{tmp_scp}") as writer:
            for key, vec in items:
                writer(key, np.asarray(vec, dtype=np.int32))
                count += 1
        text = read_text(tmp_scp).replace(str(tmp_ark),
                                                                  str(ark.resolve()))
        Path(tmp_scp).write_text(text, encoding="utf-8")
    return count


def copy_tables(src: Path, out: Path, names: Iterable[str]) -> None:
    """Copy the data-dir tables ``names`` that ``src`` has into ``out``, each atomically."""
    import shutil

    for name in names:
        if (Path(src) / name).is_file():
            with atomic_path(Path(out) / name) as tmp:
                shutil.copyfile(Path(src) / name, tmp)

"""The HDF5 training archive: fused features in fixed-size chunks, ready to stream.

Layout (format version 1)::

    /feats          float16 [num_chunks, chunk, D]   each utterance starts a new chunk;
                                                      the tail of its last chunk is zeros
    /targets        int32   [num_chunks, chunk]      pdf ids, -1 on padded frames (only
                                                      in archives made with alignments)
    /chunk_frames   int32   [num_chunks]             real frames in each chunk
    /index/utt_ids, /index/first_chunk, /index/num_chunks, /index/num_frames
    /priors         float64 [num_pdfs]               frame counts per pdf (with targets)
    /mean, /var     float64 [D]                      of the fused input, over real frames
    /skipped/utt_ids, /skipped/reasons               utterances left out, and why
    attrs           format, format_version, chunk, feat_dim, num_pdfs, layout (JSON),
                    fingerprint (JSON), storage_chunks, counts, options

``/feats`` and ``/targets`` are stored in HDF5 chunks of ``storage_chunks``
consecutive 21-frame chunks, written in order, so a block of consecutive chunks
that starts on a storage boundary is a few large sequential reads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import InputError

FORMAT = "asrtrain-archive"
FORMAT_VERSION = 1
#: Padding value of /targets (the loader maps it to the loss's ignore index).
PAD_TARGET = -1
#: Bytes per HDF5 storage chunk of /feats the writer aims for.
STORAGE_BYTES = 1 << 20


def storage_chunks_for(chunk: int, dim: int) -> int:
    """21-frame chunks per HDF5 storage chunk: about 1 MiB, a power of two (64 for D=260)."""
    per = chunk * dim * 2
    n = max(1, STORAGE_BYTES // per)
    return 1 << (n.bit_length() - 1)


class Archive:
    """Read-only view of an archive; the HDF5 file opens on first use, once per process.

    Safe to create before ``fork``: a child process that touches it opens its own
    handle (HDF5 handles must not cross a fork).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: Any = None
        self._pid: int | None = None
        self._cache: dict[str, Any] = {}
        self._datasets: dict[str, Any] = {}

    # -- opening ---------------------------------------------------------------------------
    @property
    def h5(self) -> Any:
        """The open ``h5py.File`` of this process."""
        if self._file is None or self._pid != os.getpid():
            import h5py

            if not self.path.is_file():
                raise InputError("archive not found", self.path)
            try:
                handle = h5py.File(self.path, "r", rdcc_nbytes=0)
            except OSError as exc:
                raise InputError(f"not an HDF5 file ({exc})", self.path) from None
            if handle.attrs.get("format") != FORMAT:
                handle.close()
                raise InputError(f"not an asrtrain archive (no format={FORMAT!r} attribute)",
                                 self.path)
            version = int(handle.attrs.get("format_version", 0))
            if version > FORMAT_VERSION:
                handle.close()
                raise InputError(f"archive format version {version} is newer than this "
                                 f"asrtrain reads ({FORMAT_VERSION})", self.path)
            self._file, self._pid, self._datasets = handle, os.getpid(), {}
        return self._file

    def close(self) -> None:
        """Close this process's handle (a later access reopens it)."""
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._file, self._datasets = None, {}

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])  # type: ignore[misc]

    # -- header ----------------------------------------------------------------------------
    def _cached(self, key: str, make: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    # The file never changes once written, so sizes are read once (an HDF5 attribute
    # read costs ~0.5 ms: too slow to repeat per block).
    @property
    def num_chunks(self) -> int:
        return self._cached("num_chunks", lambda: int(self.h5["feats"].shape[0]))

    @property
    def chunk(self) -> int:
        return self._cached("chunk", lambda: int(self.h5.attrs["chunk"]))

    @property
    def feat_dim(self) -> int:
        return self._cached("feat_dim", lambda: int(self.h5.attrs["feat_dim"]))

    @property
    def num_pdfs(self) -> int | None:
        value = self._cached("num_pdfs", lambda: int(self.h5.attrs.get("num_pdfs", -1)))
        return None if value < 0 else value

    @property
    def has_targets(self) -> bool:
        return self._cached("has_targets", lambda: "targets" in self.h5)

    @property
    def storage_chunks(self) -> int:
        return self._cached("storage_chunks", lambda: int(self.h5.attrs.get("storage_chunks", 1)))

    @property
    def num_frames(self) -> int:
        return self._cached("num_frames", lambda: int(self.h5.attrs["num_frames"]))

    @property
    def priors(self) -> np.ndarray | None:
        return self._cached("priors", lambda: np.asarray(self.h5["priors"][...], dtype=np.float64)
                            if "priors" in self.h5 else None)

    @property
    def mean(self) -> np.ndarray:
        return self._cached("mean", lambda: np.asarray(self.h5["mean"][...], dtype=np.float32))

    @property
    def var(self) -> np.ndarray:
        return self._cached("var", lambda: np.asarray(self.h5["var"][...], dtype=np.float32))

    @property
    def layout(self) -> list[dict[str, Any]]:
        return self._cached("layout", lambda: json.loads(self.h5.attrs["layout"]))

    @property
    def skipped(self) -> list[tuple[str, str]]:
        def read() -> list[tuple[str, str]]:
            if "skipped" not in self.h5:
                return []
            ids = self.h5["skipped/utt_ids"].asstr()[...]
            reasons = self.h5["skipped/reasons"].asstr()[...]
            return list(zip(ids.tolist(), reasons.tolist(), strict=True))
        return self._cached("skipped", read)

    @property
    def header(self) -> dict[str, Any]:
        """Every attribute (JSON ones decoded), plus the skipped utterances."""
        def read() -> dict[str, Any]:
            out: dict[str, Any] = {}
            for key, value in self.h5.attrs.items():
                if key in ("layout", "fingerprint", "options"):
                    value = json.loads(value)
                elif isinstance(value, np.generic):
                    value = value.item()
                out[key] = value
            out["skipped"] = [{"utt": u, "reason": r} for u, r in self.skipped]
            return out
        return self._cached("header", read)

    @property
    def utterances(self) -> list[tuple[str, int, int, int]]:
        """``(utt_id, first_chunk, num_chunks, num_frames)`` in archive order."""
        def read() -> list[tuple[str, int, int, int]]:
            idx = self.h5["index"]
            ids = idx["utt_ids"].asstr()[...].tolist()
            return list(zip(ids, idx["first_chunk"][...].tolist(), idx["num_chunks"][...].tolist(),
                            idx["num_frames"][...].tolist(), strict=True))
        return self._cached("utterances", read)

    def _position(self) -> dict[str, tuple[int, int, int]]:
        return self._cached("position", lambda: {u: (f, n, t) for u, f, n, t in self.utterances})

    # -- data ------------------------------------------------------------------------------
    def read_chunks(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Chunks ``[start, stop)``: float16 [n, chunk, D] and int32 [n, chunk] (or None)."""
        if not 0 <= start <= stop <= self.num_chunks:
            raise IndexError(f"chunks [{start}, {stop}) outside [0, {self.num_chunks})")
        feats = np.empty((stop - start, self.chunk, self.feat_dim), dtype=np.float16)
        if stop > start:
            self._dataset("feats").read_direct(feats, np.s_[start:stop], np.s_[:])
        targets = None
        if self.has_targets:
            targets = np.empty((stop - start, self.chunk), dtype=np.int32)
            if stop > start:
                self._dataset("targets").read_direct(targets, np.s_[start:stop], np.s_[:])
        return feats, targets

    def _dataset(self, name: str) -> Any:
        """The h5py dataset object of this process's handle (looked up once per handle)."""
        h5 = self.h5  # (re)opens after a fork, which empties the lookup
        found = self._datasets.get(name)
        if found is None:
            found = self._datasets[name] = h5[name]
        return found

    def read_utterance(self, utt_id: str) -> tuple[np.ndarray, np.ndarray | None]:
        """The frames of one utterance (padding removed): float32 [T, D], int32 [T] or None."""
        try:
            first, count, frames = self._position()[utt_id]
        except KeyError:
            raise KeyError(f"{utt_id!r} is not in {self.path}") from None
        feats, targets = self.read_chunks(first, first + count)
        x = feats.reshape(-1, self.feat_dim)[:frames].astype(np.float32)
        y = None if targets is None else targets.reshape(-1)[:frames].copy()
        return x, y

    def __repr__(self) -> str:
        return f"Archive({str(self.path)!r})"


# --- writing ------------------------------------------------------------------------------

class _Moments:
    """Mean and variance over frames, in float64 around a shift (no cancellation)."""

    def __init__(self, dim: int) -> None:
        self.count = 0
        self.shift: np.ndarray | None = None
        self.sum = np.zeros(dim, dtype=np.float64)
        self.sumsq = np.zeros(dim, dtype=np.float64)

    def add(self, x: np.ndarray) -> None:
        """Add frames [T, D]; differences in float32, sums in float64 (4x faster than all-f64)."""
        if self.shift is None:
            self.shift = x.astype(np.float64).mean(axis=0)
        d = x.astype(np.float32) - self.shift.astype(np.float32)
        self.sum += d.sum(axis=0, dtype=np.float64)
        self.sumsq += (d * d).sum(axis=0, dtype=np.float64)
        self.count += x.shape[0]

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        if self.count == 0 or self.shift is None:
            return np.zeros_like(self.sum), np.ones_like(self.sum)
        m = self.sum / self.count
        return self.shift + m, np.maximum(self.sumsq / self.count - m * m, 0.0)


class _ChunkWriter:
    """Appends chunks to /feats, /targets, /chunk_frames in whole HDF5 storage chunks."""

    def __init__(self, h5: Any, chunk: int, dim: int, storage: int, targets: bool) -> None:
        self.h5, self.storage = h5, storage
        self.feats = h5.create_dataset("feats", shape=(0, chunk, dim), maxshape=(None, chunk, dim),
                                       chunks=(storage, chunk, dim), dtype=np.float16)
        self.targets = (h5.create_dataset("targets", shape=(0, chunk), maxshape=(None, chunk),
                                          chunks=(storage, chunk), dtype=np.int32)
                        if targets else None)
        self.frames = h5.create_dataset("chunk_frames", shape=(0,), maxshape=(None,),
                                        chunks=(max(storage, 1024),), dtype=np.int32)
        self.pending: list[tuple[np.ndarray, np.ndarray | None, np.ndarray]] = []
        self.pending_chunks = 0
        self.written = 0

    def add(self, feats: np.ndarray, targets: np.ndarray | None, frames: np.ndarray) -> None:
        self.pending.append((feats, targets, frames))
        self.pending_chunks += feats.shape[0]
        if self.pending_chunks >= self.storage:
            self.flush(final=False)

    def flush(self, final: bool = True) -> None:
        if not self.pending:
            return
        feats = np.concatenate([p[0] for p in self.pending])
        targets = None if self.targets is None else np.concatenate([p[1] for p in self.pending])
        frames = np.concatenate([p[2] for p in self.pending])
        n = len(feats) if final else (len(feats) // self.storage) * self.storage
        start, stop = self.written, self.written + n
        for dset, data in ((self.feats, feats), (self.targets, targets), (self.frames, frames)):
            if dset is not None and data is not None:
                dset.resize(stop, axis=0)
                dset[start:stop] = data[:n]
        self.written = stop
        rest = (feats[n:], None if targets is None else targets[n:], frames[n:])
        self.pending = [rest] if len(rest[0]) else []
        self.pending_chunks = len(rest[0])


def to_chunks(feats: np.ndarray, targets: np.ndarray | None, chunk: int
              ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Split [T, D] into [ceil(T/chunk), chunk, D] (zero-padded), targets padded with -1."""
    frames, dim = feats.shape
    count = -(-frames // chunk)
    x = np.zeros((count * chunk, dim), dtype=np.float16)
    x[:frames] = feats
    y = None
    if targets is not None:
        y = np.full(count * chunk, PAD_TARGET, dtype=np.int32)
        y[:frames] = targets
        y = y.reshape(count, chunk)
    real = np.full(count, chunk, dtype=np.int32)
    real[-1] = frames - (count - 1) * chunk
    return x.reshape(count, chunk, dim), y, real


def check_targets(utt: str, targets: np.ndarray, num_pdfs: int, where: Any) -> np.ndarray:
    """Targets as int32; a value outside [0, num_pdfs) is an error naming the utterance."""
    t = np.asarray(targets)
    if t.ndim != 1 or not np.issubdtype(t.dtype, np.integer):
        raise InputError(f"utterance {utt!r}: alignment must be an integer vector, got "
                         f"{t.dtype} {t.shape}", where)
    bad = np.flatnonzero((t < 0) | (t >= num_pdfs))
    if bad.size:
        raise InputError(f"utterance {utt!r}: target {int(t[bad[0]])} at frame {int(bad[0])} is "
                         f"outside [0, {num_pdfs}) ({bad.size} such frames); is --num-pdfs "
                         "right?", where)
    return t.astype(np.int32)


def write_archive(out: str | os.PathLike[str], streams: list[Any], ali_scp: str | None = None,
                  num_pdfs: int | None = None, utt2spk: dict[str, str] | None = None,
                  chunk: int = 21, tolerance: int = 2, storage_chunks: int | None = None,
                  options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fuse ``streams`` (:class:`asrtrain.data.fuse.Stream`) into the archive ``out``.

    Utterances missing in a stream, without an alignment, without CMVN stats, or
    whose lengths disagree beyond ``tolerance`` are skipped, logged, and listed in
    ``/skipped``. The file appears under its name only when complete.
    """
    import logging

    import h5py

    from asrtrain.core.atomic import atomic_path
    from asrtrain.core.errors import ConfigError
    from asrtrain.core.fingerprint import fingerprint
    from asrtrain.core.progress import Progress
    from asrtrain.data.fuse import fuse_utterance, resolve_kinds

    log = logging.getLogger("asrtrain.archive")
    if chunk < 1:
        raise ConfigError(f"--chunk must be positive, got {chunk}")
    if ali_scp is not None and (num_pdfs is None or num_pdfs < 1):
        raise ConfigError("--ali needs --num-pdfs (the number of pdfs, e.g. from lang/num_pdfs)")
    if ali_scp is None and num_pdfs is not None:
        log.warning("--num-pdfs %s ignored: without --ali the archive has no targets", num_pdfs)
        num_pdfs = None
    names = [s.name for s in streams]
    if not streams or len(set(names)) != len(names):
        raise ConfigError(f"streams need distinct names, got {names}")
    if any(s.cmvn is not None for s in streams) and utt2spk is None:
        raise ConfigError("--cmvn needs --utt2spk (CMVN stats are per speaker)")
    utts = sorted(set().union(*(s.keys() for s in streams)), key=lambda u: u.encode())  # LC_ALL=C
    common = next((u for u in utts if all(u in s for s in streams)), None)
    if common is None:
        raise InputError("no utterance is in every stream (" + ", ".join(
            f"{s.name}: {s.scp}" for s in streams) + ")")
    resolve_kinds(streams, common)
    dim, offset, layout = sum(int(s.dim or 0) for s in streams), 0, []
    for s in streams:
        layout.append(s.layout(offset))
        offset += int(s.dim or 0)
    ali = None
    if ali_scp is not None:
        import kaldiio

        try:
            ali = kaldiio.load_scp(str(ali_scp), max_cache_fd=16)
        except FileNotFoundError:
            raise InputError("alignment scp not found", ali_scp) from None
    storage = storage_chunks or storage_chunks_for(chunk, dim)
    moments = _Moments(dim)
    priors = np.zeros(num_pdfs or 0, dtype=np.float64)
    index: dict[str, list[Any]] = {"utt_ids": [], "first_chunk": [], "num_chunks": [],
                                   "num_frames": []}
    skipped: dict[str, str] = {}
    with atomic_path(out) as tmp, h5py.File(tmp, "w") as h5:
        writer = _ChunkWriter(h5, chunk, dim, storage, ali is not None)
        with Progress("archive", total=len(utts), unit=" utts") as bar:
            for utt in utts:
                bar.advance()
                reason = _reason_to_skip(utt, streams, ali, utt2spk)
                fused = None if reason else fuse_utterance(
                    streams, utt, None if utt2spk is None else utt2spk.get(utt), tolerance)
                if fused is not None and fused.reason:
                    reason = fused.reason
                if reason or fused is None or fused.feats is None:
                    skipped[utt] = reason or "no frames"
                    log.warning("skipped %s: %s", utt, skipped[utt])
                    continue
                x, y = fused.feats, None
                if ali is not None:
                    y = check_targets(utt, _load(ali, utt, ali_scp), int(num_pdfs or 0), ali_scp)
                    if abs(len(y) - len(x)) > tolerance:
                        skipped[utt] = (f"alignment has {len(y)} frames, features {len(x)} "
                                        f"(tolerance {tolerance})")
                        log.warning("skipped %s: %s", utt, skipped[utt])
                        continue
                    frames = min(len(x), len(y))
                    x, y = x[:frames], y[:frames]
                    priors += np.bincount(y, minlength=len(priors))
                x16 = _to_float16(utt, x)
                moments.add(x16)
                fx, fy, real = to_chunks(x16, y, chunk)
                index["utt_ids"].append(utt)
                index["first_chunk"].append(writer.written + writer.pending_chunks)
                index["num_chunks"].append(len(fx))
                index["num_frames"].append(len(x16))
                writer.add(fx, fy, real)
        writer.flush()
        if not index["utt_ids"]:
            raise InputError(f"no utterance could be used ({len(skipped)} skipped, first "
                             f"{next(iter(skipped.items()), ('', ''))}")
        mean, var = moments.result()
        _write_tables(h5, index, skipped, priors if ali is not None else None, mean, var)
        attrs = {"format": FORMAT, "format_version": FORMAT_VERSION, "chunk": chunk,
                 "feat_dim": dim, "num_pdfs": -1 if num_pdfs is None else int(num_pdfs),
                 "storage_chunks": storage, "num_utterances": len(index["utt_ids"]),
                 "num_frames": int(moments.count), "num_skipped": len(skipped),
                 "length_tolerance": tolerance, "layout": json.dumps(layout),
                 "options": json.dumps(options or {}, default=str),
                 "fingerprint": json.dumps(fingerprint({"layout": layout}), default=str)}
        tree_id = _tree_id_beside(ali_scp)
        if tree_id:
            attrs["tree_id"] = tree_id
        for key, value in attrs.items():
            h5.attrs[key] = value
    summary = {"path": str(out), "utterances": len(index["utt_ids"]), "frames": int(moments.count),
               "chunks": writer.written, "feat_dim": dim, "skipped": skipped, "layout": layout}
    log.info("archive %s: %d utterances, %d frames, %d chunks of %d, dim %d; %d skipped", out,
             summary["utterances"], summary["frames"], writer.written, chunk, dim, len(skipped))
    return summary


def _tree_id_beside(ali: str | None) -> str | None:
    """The id of the tree the pdf targets belong to (``tree_id`` beside the alignments, as
    ``prepare lang`` writes it), so that a model and a graph can be checked against each other."""
    if ali is None:
        return None
    marker = Path(str(ali)).parent / "tree_id"
    return marker.read_text(encoding="utf-8").strip() if marker.is_file() else None


def _load(reader: Any, utt: str, where: Any) -> np.ndarray:
    try:
        return np.asarray(reader[utt])
    except Exception as exc:  # kaldiio raises several kinds on corrupt arks
        raise InputError(f"utterance {utt!r}: cannot read ({type(exc).__name__}: {exc})",
                         where) from None


def _reason_to_skip(utt: str, streams: list[Any], ali: Any, utt2spk: dict[str, str] | None
                    ) -> str | None:
    missing = [s.name for s in streams if utt not in s]
    if missing:
        return "missing in stream " + ", ".join(missing)
    if ali is not None and utt not in ali:
        return "no alignment"
    if utt2spk is not None and any(s.cmvn is not None for s in streams) and utt not in utt2spk:
        return "not in utt2spk (no speaker for CMVN)"
    return None


def _to_float16(utt: str, x: np.ndarray) -> np.ndarray:
    """float16 of the frames; NaN, infinity or values beyond ±65504 are errors."""
    x16 = x.astype(np.float16)
    if not np.isfinite(x16).all():  # one pass: overflow and NaN/inf both end here
        if not np.isfinite(x).all():
            raise InputError(f"utterance {utt!r}: features contain NaN or infinity")
        raise InputError(f"utterance {utt!r}: a feature value exceeds the float16 range "
                         f"(max |x| = {np.abs(x).max():g})")
    return x16


def _write_tables(h5: Any, index: dict[str, list[Any]], skipped: dict[str, str],
                  priors: np.ndarray | None, mean: np.ndarray, var: np.ndarray) -> None:
    import h5py

    text = h5py.string_dtype("utf-8")
    group = h5.create_group("index")
    group.create_dataset("utt_ids", data=np.array(index["utt_ids"], dtype=object), dtype=text)
    group.create_dataset("first_chunk", data=np.asarray(index["first_chunk"], dtype=np.int64))
    group.create_dataset("num_chunks", data=np.asarray(index["num_chunks"], dtype=np.int32))
    group.create_dataset("num_frames", data=np.asarray(index["num_frames"], dtype=np.int32))
    sk = h5.create_group("skipped")
    sk.create_dataset("utt_ids", data=np.array(list(skipped), dtype=object), dtype=text)
    sk.create_dataset("reasons", data=np.array(list(skipped.values()), dtype=object), dtype=text)
    if priors is not None:
        h5.create_dataset("priors", data=priors)
    h5.create_dataset("mean", data=mean)
    h5.create_dataset("var", data=var)

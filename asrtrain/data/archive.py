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
    /checksums/feats, /checksums/targets  uint32     Adler-32 of each HDF5 storage chunk (format 2)
    attrs           format, format_version, chunk, feat_dim, num_pdfs, layout (JSON),
                    fingerprint (JSON), storage_chunks, counts, options

``/feats`` and ``/targets`` are stored in HDF5 chunks of ``storage_chunks``
consecutive 21-frame chunks, written in order, so a block of consecutive chunks
that starts on a storage boundary is a few large sequential reads. The reader
checks each storage chunk against its checksum the first time a process reads it
(a block of the loader is whole storage chunks, so this reads nothing twice), and
the targets it returns against ``num_pdfs``: a corrupted or edited archive is an
error naming the chunks, not a quietly different training run. Archives of format 1
(no checksums) are read with a warning. The writer is :mod:`asrtrain.data.archive_writer`.
"""

from __future__ import annotations

import json
import logging
import os
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import InputError

log = logging.getLogger("asrtrain.archive")

#: Some chunks' features (float16 [n, chunk, D]) and targets (int32 [n, chunk], None without).
Chunks = tuple[np.ndarray, np.ndarray | None]

FORMAT = "asrtrain-archive"
FORMAT_VERSION = 2  # 2: /checksums
#: Padding value of /targets (the loader maps it to the loss's ignore index).
PAD_TARGET = -1
#: Bytes per HDF5 storage chunk of /feats the writer aims for.
STORAGE_BYTES = 1 << 20


def storage_chunks_for(chunk: int, dim: int) -> int:
    """21-frame chunks per HDF5 storage chunk: about 1 MiB, a power of two (64 for D=260)."""
    per = chunk * dim * 2
    n = max(1, STORAGE_BYTES // per)
    return 1 << (n.bit_length() - 1)


def checksum(block: np.ndarray) -> int:
    """Adler-32 of an array's bytes (fast: the reader checks every storage chunk it reads)."""
    return zlib.adler32(np.ascontiguousarray(block).data) & 0xFFFFFFFF


class Archive:
    """Read-only view of an archive; the HDF5 file opens on first use, once per process.

    Safe to create before ``fork``: a child process that touches it opens its own
    handle (HDF5 handles must not cross a fork). Readers open a path with
    :func:`asrtrain.data.shards.open_archive`, which also takes the manifest of a
    :class:`~asrtrain.data.shards.ShardedArchive`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: Any = None
        self._pid: int | None = None
        self._cache: dict[str, Any] = {}
        self._datasets: dict[str, Any] = {}
        self._verified: set[int] = set()  # storage chunks checked by this process

    # -- opening ---------------------------------------------------------------------------
    @property
    def h5(self) -> Any:
        """The open ``h5py.File`` of this process."""
        if self._file is None or self._pid != os.getpid():
            import h5py

            if not self.path.is_file():
                what = "not a regular file (an archive is an HDF5 file)" if self.path.exists() else "archive not found"
                raise InputError(what, self.path)
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
            self._file, self._pid, self._datasets, self._verified = handle, os.getpid(), {}, set()
            if version < 2 and str(self.path) not in _UNCHECKED:
                _UNCHECKED.add(str(self.path))
                log.warning("%s: archive format %d has no checksums: its data is read unchecked "
                            "(write it again to have them)", self.path, version)
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

    @property
    def nbytes(self) -> int:
        """Bytes on disk."""
        return self.path.stat().st_size

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
    def identity(self) -> dict[str, Any]:
        """What tells this archive from another written at the same path: when and where it was
        written, and its size (a resumed run checks it: its chunk order depends on the archive)."""
        def read() -> dict[str, Any]:
            written = json.loads(self.h5.attrs.get("fingerprint", "{}")).get("written")
            return {"written": written, "chunks": self.num_chunks, "frames": self.num_frames}
        return self._cached("identity", read)

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

    @property
    def utterance_starts(self) -> np.ndarray:
        """bool per chunk: whether it begins an utterance (context never reaches across one)."""
        def make() -> np.ndarray:
            starts = np.zeros(self.num_chunks, dtype=bool)
            starts[[f for _, f, n, _ in self.utterances if n]] = True
            return starts
        return self._cached("utterance_starts", make)

    def _position(self) -> dict[str, tuple[int, int, int]]:
        return self._cached("position", lambda: {u: (f, n, t) for u, f, n, t in self.utterances})

    # -- data ------------------------------------------------------------------------------
    def read_chunks(self, start: int, stop: int, out: Chunks | None = None) -> Chunks:
        """Chunks ``[start, stop)``: float16 [n, chunk, D] and int32 [n, chunk] (or None), checked.

        ``out``: arrays of that shape to read into (a sharded archive gathers a block in place)."""
        if not 0 <= start <= stop <= self.num_chunks:
            raise IndexError(f"chunks [{start}, {stop}) outside [0, {self.num_chunks})")
        feats, targets = self._read(start, stop, out)
        if stop > start:
            self._verify(start, stop, feats, targets)
        return feats, targets

    def _read(self, start: int, stop: int, out: Chunks | None = None) -> Chunks:
        feats, targets = out if out is not None else (
            np.empty((stop - start, self.chunk, self.feat_dim), dtype=np.float16),
            np.empty((stop - start, self.chunk), dtype=np.int32) if self.has_targets else None)
        if stop > start:
            self._dataset("feats").read_direct(feats, np.s_[start:stop], np.s_[:])
            if targets is not None:
                self._dataset("targets").read_direct(targets, np.s_[start:stop], np.s_[:])
        return feats, targets

    def _verify(self, start: int, stop: int, feats: np.ndarray, targets: np.ndarray | None) -> None:
        """Check the storage chunks of ``[start, stop)`` not checked yet, and the targets' range."""
        if targets is not None and self.num_pdfs is not None and targets.size and int(targets.max()) >= self.num_pdfs:
            raise InputError(f"chunks [{start}, {stop}) hold target {int(targets.max())}, outside the "
                             f"archive's {self.num_pdfs} pdfs (the archive was changed after it was written)",
                             self.path)
        sums = self._checksums()
        if sums is None:
            return
        size = self.storage_chunks
        for unit in range(start // size, (stop - 1) // size + 1):
            if unit in self._verified:
                continue
            a, b = unit * size, min((unit + 1) * size, self.num_chunks)
            if start <= a and b <= stop:
                parts = (feats[a - start:b - start], None if targets is None else targets[a - start:b - start])
            else:
                parts = self._read(a, b)
            for name, data in zip(("feats", "targets"), parts, strict=True):
                if data is not None and name in sums and checksum(data) != int(sums[name][unit]):
                    raise InputError(f"chunks [{a}, {b}) of /{name} are corrupted (checksum mismatch); "
                                     "write the archive again", self.path)
            self._verified.add(unit)

    def _checksums(self) -> dict[str, np.ndarray] | None:
        def read() -> dict[str, np.ndarray] | None:
            if "checksums" not in self.h5:
                return None
            return {name: np.asarray(self.h5["checksums"][name][...]) for name in self.h5["checksums"]}
        return self._cached("checksums", read)

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


_UNCHECKED: set[str] = set()  # archives without checksums already warned about

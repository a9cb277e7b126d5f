"""A training archive in shards: N HDF5 archives and a JSON manifest, read as one archive.

At 2,000 hours one archive is ~370 GB written by one process; shards are written
by parallel jobs (:mod:`asrtrain.data.shard_writer`), each a complete archive of a
contiguous run of the sorted utterances. Their chunks, one shard after the other,
are the chunks the single archive would hold (every utterance starts a chunk), so
chunk numbers, blocks, the loader's shuffles and the resume position are the same.

Why a manifest and not an HDF5 virtual dataset: a virtual dataset reads a missing
source file as its fill value (zeros: a quietly different training run), resolves
source paths by rules of its own, and cannot carry the per-shard index, priors,
moments and checksums that must be combined. The manifest lists each shard's file
(relative to the manifest), size, sizes inside and a digest of its checksum table;
opening it checks every shard against that (a few KiB read per shard), and each
storage chunk is checked against its own checksum when first read, as in one file.

``open_archive(path)`` of a ``*.json`` path gives a :class:`ShardedArchive`, so whatever
reads an archive takes a manifest where it takes an ``.h5``.
"""

from __future__ import annotations

import bisect
import json
import os
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.data.archive import Archive, Chunks

MANIFEST_FORMAT = "asrtrain-archive-shards"
MANIFEST_VERSION = 1
MANIFEST_SUFFIX = ".json"
#: Attributes every shard of one archive shares (checked when the shards are put together).
SHARED_ATTRS = ("chunk", "feat_dim", "num_pdfs", "storage_chunks", "layout", "length_tolerance")


def is_manifest(path: str | os.PathLike[str]) -> bool:
    """A sharded archive is named by its manifest, a ``.json`` file."""
    return Path(path).suffix == MANIFEST_SUFFIX


def open_archive(path: str | os.PathLike[str]) -> Archive:
    """The archive at ``path``: one HDF5 file, or the shards a manifest names (every reader
    opens archives here, so each takes either)."""
    return ShardedArchive(path) if is_manifest(path) else Archive(path)


def shard_path(manifest: str | os.PathLike[str], k: int) -> Path:
    """Shard ``k`` (1-based, as Kaldi numbers jobs) of ``train.json``: ``train.k.h5`` beside it."""
    path = Path(manifest)
    return path.with_name(f"{path.stem}.{k}.h5")


def shard_digest(shard: Archive) -> str:
    """Adler-32 of the shard's storage-chunk checksums and its index's sizes: changes with any data
    or any utterance's place (a few KiB a shard to read, where the data is many GB)."""
    sums = shard._checksums() or {}
    value = zlib.adler32(str(shard.num_chunks).encode())
    arrays = [sums[name] for name in sorted(sums)]
    arrays += [shard.h5["index"][name][...] for name in ("first_chunk", "num_chunks", "num_frames")]
    for array in arrays:
        value = zlib.adler32(np.ascontiguousarray(array).data, value)
    return f"{value & 0xFFFFFFFF:08x}"


def shard_record(shard: Archive) -> dict[str, Any]:
    """What the manifest says of a shard, and what opening it checks."""
    return {"file": shard.path.name, "bytes": shard.path.stat().st_size, "chunks": shard.num_chunks,
            "frames": shard.num_frames, "utterances": int(shard.h5.attrs["num_utterances"]),
            "written": shard.identity["written"], "checksum": shard_digest(shard)}


def read_manifest(path: Path) -> dict[str, Any]:
    """The manifest's JSON, checked for form; an error names the file."""
    if not path.is_file():
        raise InputError("archive manifest not found", path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"not a shard manifest (bad JSON: {exc})", path) from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise InputError(f"not a shard manifest (no format={MANIFEST_FORMAT!r})", path)
    if int(data.get("format_version", 0)) > MANIFEST_VERSION:
        raise InputError(f"manifest version {data['format_version']} is newer than this asrtrain "
                         f"reads ({MANIFEST_VERSION})", path)
    shards = data.get("shards")
    if not isinstance(shards, list) or not shards or not all(isinstance(s, dict) and "file" in s for s in shards):
        raise InputError("manifest lists no shards", path)
    return data


def check_shard(shard: Archive, expected: dict[str, Any], k: int, n: int, manifest: Path) -> None:
    """Stop on a shard that is not the one the manifest recorded: missing, resized, rewritten."""
    where, name = shard.path, f"shard {k} of {n}"
    if not where.is_file():
        raise InputError(f"{name} is missing (listed in {manifest}); write it again "
                         f"(asrtrain prepare archive ... --shard {k})", where)
    size = where.stat().st_size
    if size != expected.get("bytes"):
        raise InputError(f"{name} has {size} bytes, the manifest {manifest} records "
                         f"{expected.get('bytes')}: damaged or rewritten since; write it again", where)
    found = shard_record(shard)
    for key in ("chunks", "frames", "utterances", "written", "checksum"):
        if found[key] != expected.get(key):
            raise InputError(f"{name}: its {key} ({found[key]}) is not the manifest's "
                             f"({expected.get(key)}, {manifest}): damaged or rewritten since; "
                             "write it again", where)


class ShardedArchive(Archive):
    """The shards of a manifest as one :class:`Archive` (global chunk numbers, one index).

    Opening (the first use in an object) reads the manifest and checks every shard;
    data is read only from the shards that hold the chunks asked for.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path)
        self._shards: list[Archive] | None = None
        self._offsets: list[int] = []  # first global chunk of each shard, then the total
        self._manifest: dict[str, Any] = {}

    @property
    def shards(self) -> list[Archive]:
        """The shard archives, checked against the manifest (once per object)."""
        if self._shards is None:
            manifest = read_manifest(self.path)
            records = manifest["shards"]
            shards = [Archive(self.path.parent / r["file"]) for r in records]
            for k, (shard, record) in enumerate(zip(shards, records, strict=True), 1):
                check_shard(shard, record, k, len(records), self.path)
                for key in SHARED_ATTRS:
                    if shard.h5.attrs.get(key) != shards[0].h5.attrs.get(key):
                        raise InputError(f"shard {k} has another {key} than shard 1 (not shards of "
                                         "one archive)", shard.path)
            self._offsets = np.concatenate([[0], np.cumsum([s.num_chunks for s in shards])]).tolist()
            self._manifest, self._shards = manifest, shards
        return self._shards

    @property
    def h5(self) -> Any:
        raise AttributeError("a sharded archive has no single HDF5 file: read it through its shards")

    @property
    def nbytes(self) -> int:
        return sum(s.path.stat().st_size for s in self.shards)

    def close(self) -> None:
        for shard in self._shards or []:
            shard.close()

    def _cached(self, key: str, make: Any) -> Any:
        if key not in self._cache:
            merge = getattr(self, f"_merged_{key}", None)
            self._cache[key] = merge() if merge is not None else make()
        return self._cache[key]

    # -- the header, merged ---------------------------------------------------------------
    def _first(self) -> Archive:
        return self.shards[0]

    def _merged_num_chunks(self) -> int:
        self.shards  # noqa: B018 - fills the offsets
        return int(self._offsets[-1])

    def _merged_chunk(self) -> int:
        return self._first().chunk

    def _merged_feat_dim(self) -> int:
        return self._first().feat_dim

    def _merged_num_pdfs(self) -> int:
        return -1 if self._first().num_pdfs is None else int(self._first().num_pdfs or 0)

    def _merged_has_targets(self) -> bool:
        return self._first().has_targets

    def _merged_storage_chunks(self) -> int:
        return self._first().storage_chunks

    def _merged_layout(self) -> list[dict[str, Any]]:
        return self._first().layout

    def _merged_num_frames(self) -> int:
        return sum(s.num_frames for s in self.shards)

    def _merged_priors(self) -> np.ndarray | None:
        priors = [s.priors for s in self.shards]
        return None if priors[0] is None else np.sum([p for p in priors if p is not None], axis=0)

    def _moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance over all frames from each shard's (float64, weighted by frames)."""
        counts = np.array([s.num_frames for s in self.shards], dtype=np.float64)
        means = np.array([s.h5["mean"][...] for s in self.shards], dtype=np.float64)
        vars_ = np.array([s.h5["var"][...] for s in self.shards], dtype=np.float64)
        w = counts[:, None] / max(counts.sum(), 1.0)
        mean = (w * means).sum(axis=0)
        return mean, (w * (vars_ + (means - mean) ** 2)).sum(axis=0)

    def _merged_mean(self) -> np.ndarray:
        return self._moments()[0].astype(np.float32)

    def _merged_var(self) -> np.ndarray:
        return self._moments()[1].astype(np.float32)

    def _merged_skipped(self) -> list[tuple[str, str]]:
        return [item for s in self.shards for item in s.skipped]

    def _merged_utterances(self) -> list[tuple[str, int, int, int]]:
        shards = self.shards
        return [(u, first + self._offsets[k], n, t) for k, s in enumerate(shards)
                for u, first, n, t in s.utterances]

    def _merged_identity(self) -> dict[str, Any]:
        self.shards  # noqa: B018 - reads the manifest
        return {"written": self._manifest.get("written"), "chunks": self.num_chunks,
                "frames": self.num_frames,
                "shards": [r.get("checksum") for r in self._manifest["shards"]]}

    def _merged_header(self) -> dict[str, Any]:
        head = {k: v for k, v in self._first().header.items() if k not in ("shard", "split")}
        head.update(num_utterances=len(self.utterances), num_frames=self.num_frames,
                    num_skipped=len(self.skipped), shards=len(self.shards),
                    num_unaligned=sum(int(s.header.get("num_unaligned", 0)) for s in self.shards),
                    skipped=[{"utt": u, "reason": r} for u, r in self.skipped])
        return head

    # -- data ------------------------------------------------------------------------------
    def read_chunks(self, start: int, stop: int, out: Chunks | None = None) -> Chunks:
        """Chunks ``[start, stop)`` (global numbers), read in place from the shards that hold them,
        each checked."""
        if not 0 <= start <= stop <= self.num_chunks:
            raise IndexError(f"chunks [{start}, {stop}) outside [0, {self.num_chunks})")
        shards, offsets = self.shards, self._offsets
        k = min(bisect.bisect_right(offsets, start) - 1, len(shards) - 1)
        if stop <= offsets[k + 1]:  # within one shard (nearly every block)
            return shards[k].read_chunks(start - offsets[k], stop - offsets[k], out)
        feats, targets = out if out is not None else (
            np.empty((stop - start, self.chunk, self.feat_dim), dtype=np.float16),
            np.empty((stop - start, self.chunk), dtype=np.int32) if self.has_targets else None)
        while k < len(shards) and offsets[k] < stop:
            a, b = max(start, offsets[k]), min(stop, offsets[k + 1])
            if b > a:
                part = slice(a - start, b - start)
                shards[k].read_chunks(a - offsets[k], b - offsets[k],
                                      (feats[part], None if targets is None else targets[part]))
            k += 1
        return feats, targets

    def __repr__(self) -> str:
        return f"ShardedArchive({str(self.path)!r})"

"""Writing the HDF5 training archive: fuse streams and targets into chunks, with checksums.

See :mod:`asrtrain.data.archive` for the layout. Two things here are about failing
well. A full disk: HDF5 keeps what it could not write in its caches and crashed
(a segmentation fault) when it tried again at exit; so the file is written with no
chunk cache, and on an error it is emptied (giving the space back) before HDF5
closes it, then removed: the error is one line naming the archive. Corruption: every
HDF5 storage chunk of ``/feats`` and ``/targets`` gets an Adler-32 checksum in
``/checksums``, which the reader verifies the first time it reads that storage chunk.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_text
from asrtrain.data.archive import FORMAT, FORMAT_VERSION, PAD_TARGET, checksum, storage_chunks_for


@contextlib.contextmanager
def hdf5_for_writing(tmp: Path, out: Path) -> Iterator[Any]:
    """An HDF5 file to write at ``tmp``; a full disk (or any write error) is an ``OSError`` naming ``out``."""
    import h5py

    h5 = h5py.File(tmp, "w", rdcc_nbytes=0)  # no chunk cache: nothing left to write at close
    try:
        yield h5
        h5.close()
    except BaseException as exc:
        _abandon(h5, tmp)
        if isinstance(exc, (OSError, RuntimeError)) and _errno_of(exc) is not None:
            code = _errno_of(exc)
            raise OSError(code, os.strerror(code or errno.EIO), str(out)) from None
        raise


def _errno_of(exc: BaseException) -> int | None:
    """The errno of an h5py write failure (it wraps the system's error in its message)."""
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno
    text = str(exc)
    if "errno = " in text:
        with contextlib.suppress(ValueError):
            return int(text.split("errno = ", 1)[1].split(",", 1)[0])
    return None


def _abandon(h5: Any, tmp: Path) -> None:
    """Give the space back (empty the file), let HDF5 close it (its metadata fits now), remove it."""
    with contextlib.suppress(OSError):
        os.truncate(tmp, 0)
    with contextlib.suppress(Exception):
        h5.close()
    with contextlib.suppress(OSError):
        tmp.unlink()


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
    """Appends chunks to /feats, /targets, /chunk_frames in whole HDF5 storage chunks, with the
    checksum of each storage chunk."""

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
        self.sums: dict[str, list[int]] = {"feats": [], "targets": []}

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
        for name, data in (("feats", feats), ("targets", targets)):
            if data is not None:  # writes start on a storage boundary: n covers whole units, the last maybe short
                self.sums[name] += [checksum(data[i:min(i + self.storage, n)]) for i in range(0, n, self.storage)]
        self.written = stop
        rest = (feats[n:], None if targets is None else targets[n:], frames[n:])
        self.pending = [rest] if len(rest[0]) else []
        self.pending_chunks = len(rest[0])

    def write_checksums(self) -> None:
        group = self.h5.create_group("checksums")
        for name, sums in self.sums.items():
            if name == "feats" or self.targets is not None:
                group.create_dataset(name, data=np.asarray(sums, dtype=np.uint32))


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
                  options: dict[str, Any] | None = None, part: tuple[int, int] | None = None,
                  unaligned: str = "skip") -> dict[str, Any]:
    """Fuse ``streams`` (:class:`asrtrain.data.fuse.Stream`) into the archive ``out``.

    Utterances missing in a stream, without an alignment, without CMVN stats, or
    whose lengths disagree beyond ``tolerance`` are skipped, logged, and listed in
    ``/skipped``. The file appears under its name only when complete.

    ``unaligned="keep"`` (a held-out set): an utterance the aligner could not align is
    written with every target ignored, counted in ``num_unaligned`` and logged, so that
    decoding the archive still sees it (Kaldi decodes a dev set's data dir, not its
    alignments) while the held-out loss leaves it out. Training sets keep ``"skip"``.

    ``part=(k, n)``: write only the k-th (0-based) of n contiguous runs of the sorted
    utterances (a shard, :mod:`asrtrain.data.shard_writer`); the shards, one after
    the other, hold what the whole archive would, in its order. A shard may be empty.
    """
    import logging

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
    if unaligned not in ("skip", "keep"):
        raise ConfigError(f"--unaligned is skip or keep, got {unaligned!r}")
    if ali_scp is None and num_pdfs is not None:
        log.warning("--num-pdfs %s ignored: without --ali the archive has no targets", num_pdfs)
        num_pdfs = None
    names = [s.name for s in streams]
    if not streams or len(set(names)) != len(names):
        raise ConfigError(f"streams need distinct names, got {names}")
    if any(s.cmvn is not None for s in streams) and utt2spk is None:
        raise ConfigError("--cmvn needs --utt2spk (CMVN stats are per speaker)")
    everything = sorted(set().union(*(s.keys() for s in streams)), key=lambda u: u.encode())  # LC_ALL=C
    common = next((u for u in everything if all(u in s for s in streams)), None)
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
        from asrtrain.data.kaldi_read import open_scp

        ali = open_scp(ali_scp, "alignment scp", max_cache_fd=16)
    storage = storage_chunks or storage_chunks_for(chunk, dim)
    first, stop = (0, len(everything)) if part is None else split_range(len(everything), *part)
    utts = everything[first:stop]
    moments = _Moments(dim)
    priors = np.zeros(num_pdfs or 0, dtype=np.float64)
    index: dict[str, list[Any]] = {"utt_ids": [], "first_chunk": [], "num_chunks": [],
                                   "num_frames": []}
    skipped: dict[str, str] = {}
    kept_unaligned: list[str] = []
    with atomic_path(out) as tmp, hdf5_for_writing(tmp, Path(out)) as h5:
        writer = _ChunkWriter(h5, chunk, dim, storage, ali is not None)
        with Progress("archive", total=len(utts), unit=" utts") as bar:
            for utt in utts:
                bar.advance()
                no_targets = unaligned == "keep" and ali is not None and utt not in ali
                reason = _reason_to_skip(utt, streams, None if no_targets else ali, utt2spk)
                fused = None if reason else fuse_utterance(
                    streams, utt, None if utt2spk is None else utt2spk.get(utt), tolerance)
                if fused is not None and fused.reason:
                    reason = fused.reason
                if reason or fused is None or fused.feats is None:
                    skipped[utt] = reason or "no frames"
                    log.warning("skipped %s: %s", utt, skipped[utt])
                    continue
                x, y = fused.feats, None
                if no_targets:
                    y = np.full(len(x), PAD_TARGET, dtype=np.int32)
                    kept_unaligned.append(utt)
                elif ali is not None:
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
        writer.write_checksums()
        if kept_unaligned:
            log.warning("kept %d utterances without an alignment (decoded, not in the held-out "
                        "loss: every target ignored), first %s", len(kept_unaligned), kept_unaligned[0])
        if part is None or part[0] == part[1] - 1:  # listed once, last: where the whole archive lists them
            skipped.update(_aligned_without_features(ali, set(everything), log))
        if not index["utt_ids"] and part is None:
            reasons: dict[str, int] = {}
            for reason in skipped.values():
                reasons[reason] = reasons.get(reason, 0) + 1
            example = next(iter(skipped), "")
            raise InputError("no utterance could be used: " + ", ".join(
                f"{n} {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
                + f" (e.g. {example!r}); do the features and alignments describe the same utterances?")
        mean, var = moments.result()
        _write_tables(h5, index, skipped, priors if ali is not None else None, mean, var)
        attrs = {"format": FORMAT, "format_version": FORMAT_VERSION, "chunk": chunk,
                 "feat_dim": dim, "num_pdfs": -1 if num_pdfs is None else int(num_pdfs),
                 "storage_chunks": storage, "num_utterances": len(index["utt_ids"]),
                 "num_frames": int(moments.count), "num_skipped": len(skipped),
                 "num_unaligned": len(kept_unaligned),
                 "length_tolerance": tolerance, "layout": json.dumps(layout),
                 "options": json.dumps(options or {}, default=str),
                 "fingerprint": json.dumps(fingerprint({"layout": layout}), default=str)}
        if part is not None:
            attrs.update(shard=part[0] + 1, shards=part[1], split=json.dumps(
                {"utterances": len(everything), "first": first, "stop": stop,
                 "digest": _digest(everything)}))
        tree_id = _tree_id_beside(ali_scp)
        if tree_id:
            attrs["tree_id"] = tree_id
        for key, value in attrs.items():
            h5.attrs[key] = value
    summary = {"path": str(out), "utterances": len(index["utt_ids"]), "frames": int(moments.count),
               "chunks": writer.written, "feat_dim": dim, "skipped": skipped, "layout": layout,
               "unaligned": kept_unaligned}
    log.info("archive %s: %d utterances, %d frames, %d chunks of %d, dim %d; %d skipped", out,
             summary["utterances"], summary["frames"], writer.written, chunk, dim, len(skipped))
    return summary


def split_range(total: int, k: int, n: int) -> tuple[int, int]:
    """Items ``[start, stop)`` of part ``k`` (0-based) of ``n`` near-equal contiguous parts."""
    if not 0 <= k < n:
        raise ValueError(f"part {k} outside [0, {n})")
    return k * total // n, (k + 1) * total // n


def _digest(utts: list[str]) -> str:
    """What shards of one split share: a hash of every utterance id, in order."""
    import hashlib

    return hashlib.sha256("\n".join(utts).encode()).hexdigest()[:16]


def _tree_id_beside(ali: str | None) -> str | None:
    """The id of the tree the pdf targets belong to (``tree_id`` beside the alignments, as
    ``prepare lang`` writes it), so that a model and a graph can be checked against each other."""
    if ali is None:
        return None
    marker = Path(str(ali)).parent / "tree_id"
    return read_text(marker).strip() if marker.is_file() else None


def _load(reader: Any, utt: str, where: Any) -> np.ndarray:
    from asrtrain.data.kaldi_read import load_entry

    return np.asarray(load_entry(reader, utt, where))


def _aligned_without_features(ali: Any, utts: set[str], log: Any) -> dict[str, str]:
    """Alignments of utterances that no stream has: skipped like the rest, and counted."""
    if ali is None:
        return {}
    lost = {utt: "alignment only: no stream has its features" for utt in ali if utt not in utts}
    if lost:
        log.warning("skipped %d aligned utterances that no feature stream has (first %s)",
                    len(lost), next(iter(lost)))
    return lost


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

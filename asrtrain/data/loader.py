"""Stream training batches out of an archive: blocks, seeded shuffles, a prefetch thread.

An epoch is a permutation of *blocks* (runs of ``block_chunks`` consecutive
21-frame chunks, each one contiguous read); a learner takes its shard of that
permutation (``rank::world_size``), or whatever block ids it is handed (a
work-sharing counter in distributed training). Inside a block the chunks are
shuffled, then cut into batches of ``batch_size`` chunks; a batch never spans
two blocks. Both shuffles come from ``(seed, epoch[, block])``, so every learner
computes the same permutation alone and a resumed epoch repeats exactly.

The unit of work is a :class:`Piece`: a block from a chunk of its shuffled order
on (0 for a whole block; more for a block resumed in the middle of an epoch).
:meth:`ChunkLoader.tagged` says with every batch which piece it came from and how
far into the block it reaches, so whoever hands out the work knows exactly what
was trained when a run stops.

A background thread reads and converts the next batches while the model
computes. The HDF5 file opens lazily in the process that reads it, so a loader
made before ``fork`` (DataLoader workers, ``mp.spawn``) is safe.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from asrtrain.core.errors import ConfigError
from asrtrain.data.archive import PAD_TARGET, Archive

#: Target value on padded frames (``torch.nn.CrossEntropyLoss``'s default ignore index).
IGNORE_INDEX = -100

Batch = tuple[Any, Any]
_END = object()


@dataclass(frozen=True)
class Piece:
    """Block ``block`` (at position ``pos`` of the epoch's block order) from chunk ``start`` of its
    shuffled order on. ``start`` > 0 only for a block resumed in the middle."""

    pos: int
    block: int
    start: int = 0


Tagged = tuple[Any, Any, Piece, int]  # x, y, the piece, the chunk of the block's order it reaches


def real_frames(y: Any) -> int:
    """Frames of a target batch that count in the loss (padding carries ``IGNORE_INDEX``)."""
    return int((y != IGNORE_INDEX).sum())


class ChunkLoader:
    """Batches ``(x [B, chunk, D] as stored (float16), y int64 [B, chunk])`` of one archive."""

    def __init__(self, archive_path: str | os.PathLike[str], batch_size: int = 256,
                 block_chunks: int = 1024, seed: int = 0, rank: int = 0, world_size: int = 1,
                 prefetch: int = 4, shuffle: bool = True, pin_memory: bool | None = None) -> None:
        if batch_size < 1 or block_chunks < 1:
            raise ConfigError(f"batch_size ({batch_size}) and block_chunks ({block_chunks}) "
                              "must be positive")
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} outside [0, {world_size})")
        self.archive = Archive(archive_path)
        self.batch_size = batch_size
        self.block_chunks = block_chunks
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.prefetch = prefetch
        self.shuffle = shuffle
        self._pin = pin_memory

    # -- the plan --------------------------------------------------------------------------
    @property
    def num_chunks(self) -> int:
        return self.archive.num_chunks

    @property
    def num_blocks(self) -> int:
        return -(-self.num_chunks // self.block_chunks)

    def block_range(self, block: int) -> tuple[int, int]:
        """Chunks ``[start, stop)`` of a block."""
        if not 0 <= block < self.num_blocks:
            raise IndexError(f"block {block} outside [0, {self.num_blocks})")
        start = block * self.block_chunks
        return start, min(start + self.block_chunks, self.num_chunks)

    def block_order(self, epoch: int) -> list[int]:
        """The epoch's permutation of all blocks (identical on every learner)."""
        if not self.shuffle:
            return list(range(self.num_blocks))
        rng = np.random.default_rng([self.seed, epoch])
        return rng.permutation(self.num_blocks).tolist()

    def shard(self, epoch: int) -> list[int]:
        """This learner's blocks of the epoch: every ``world_size``-th of the permutation."""
        return self.block_order(epoch)[self.rank::self.world_size]

    def chunk_order(self, epoch: int, block: int) -> np.ndarray:
        """Offsets within ``block`` in the order its chunks are served this epoch."""
        start, stop = self.block_range(block)
        if not self.shuffle:
            return np.arange(stop - start)
        return np.random.default_rng([self.seed, epoch, block, 1]).permutation(stop - start)

    # -- the data --------------------------------------------------------------------------
    def epoch(self, epoch: int, blocks: Iterable[int] | None = None) -> Iterator[Batch]:
        """Yield the batches of ``blocks`` (default: this learner's shard of the epoch)."""
        order = self.shard(epoch) if blocks is None else blocks
        for x, y, _, _ in self.tagged(epoch, (Piece(i, int(b)) for i, b in enumerate(order))):
            yield x, y

    def tagged(self, epoch: int, pieces: Iterable[Piece], claim_late: bool = False) -> Iterator[Tagged]:
        """Yield ``(x, y, piece, end)`` for the batches of ``pieces``, ``end`` the chunk reached.

        ``claim_late``: take the next piece from ``pieces`` only when at most one
        batch is left waiting. Where taking a piece is claiming work from a shared
        counter, a slow learner must not hoard blocks in its prefetch queue that a
        fast one could be training on; the next block is still read while the last
        queued batch computes.
        """
        if not self.archive.has_targets:
            raise ConfigError("archive has no targets (made without --ali); it can be decoded "
                              "but not trained on", self.archive.path)
        if self.prefetch <= 0:
            yield from self._batches(epoch, pieces)
            return
        buffer: queue.Queue[Any] = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        if claim_late:
            pieces = _when_drained(pieces, buffer, stop)
        yield from _prefetched(self._batches(epoch, pieces), buffer, stop)

    def block_length(self, block: int) -> int:
        """Chunks in ``block``."""
        start, stop = self.block_range(block)
        return stop - start

    def _batches(self, epoch: int, pieces: Iterable[Piece]) -> Iterator[Tagged]:
        import torch

        pin = torch.cuda.is_available() if self._pin is None else self._pin
        for piece in pieces:
            start, stop = self.block_range(piece.block)
            feats, targets = self.archive.read_chunks(start, stop)
            assert targets is not None
            order = self.chunk_order(epoch, piece.block)
            for first in range(piece.start, len(order), self.batch_size):
                idx = order[first:first + self.batch_size]
                # As stored (float16), gathered by numpy: the step converts on its device
                # (half the bytes to pin and copy), and a torch op here would start a second
                # OpenMP team beside the step's, which on 2 cores cost 12% of the step.
                x = torch.from_numpy(feats[idx])
                y = targets[idx].astype(np.int64)
                y[y == PAD_TARGET] = IGNORE_INDEX
                yt = torch.from_numpy(y)
                if pin:
                    x, yt = x.pin_memory(), yt.pin_memory()
                yield x, yt, piece, first + len(idx)

    def __repr__(self) -> str:
        return (f"ChunkLoader({str(self.archive.path)!r}, batch_size={self.batch_size}, "
                f"block_chunks={self.block_chunks}, seed={self.seed}, rank={self.rank}, "
                f"world_size={self.world_size})")


def _when_drained(pieces: Iterable[Piece], buffer: queue.Queue[Any], stop: threading.Event,
                  low: int = 1, poll_s: float = 0.001) -> Iterator[Piece]:
    """``pieces``, each taken only once ``buffer`` holds at most ``low`` items (or on stop)."""
    it = iter(pieces)
    while True:
        while buffer.qsize() > low and not stop.is_set():
            time.sleep(poll_s)
        if stop.is_set():
            return
        piece = next(it, None)
        if piece is None:
            return
        yield piece


def _prefetched(items: Iterator[Any], buffer: queue.Queue[Any], stop: threading.Event) -> Iterator[Any]:
    """Run ``items`` in a daemon thread, filling ``buffer`` ahead; errors re-raise here.

    Closing the consumer (``break`` out of the loop) stops the thread promptly.
    """

    def put(value: Any) -> bool:
        while not stop.is_set():
            try:
                buffer.put(value, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_END)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            put(_Failure(exc))

    thread = threading.Thread(target=work, name="asrtrain-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = buffer.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item
    finally:
        stop.set()
        thread.join(timeout=10)


class _Failure:
    """An exception raised in the prefetch thread, carried to the consumer."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

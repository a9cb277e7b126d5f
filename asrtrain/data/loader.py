"""Stream training batches out of an archive: blocks, seeded shuffles, a prefetch thread.

An epoch is a permutation of *blocks* (runs of ``block_chunks`` consecutive
21-frame chunks, each one contiguous read); a learner takes its shard of that
permutation (``rank::world_size``), or whatever block ids it is handed (a
work-sharing counter in distributed training). Inside a block the chunks are
shuffled; the learner's blocks, one after the other, make one stream of chunks
that is cut into batches of ``batch_size`` chunks. A batch carries over a block
boundary (the tail of one block and the head of the next), so every batch holds
exactly ``batch_size`` chunks whatever the block size, except the last of the
learner's epoch: a step is the batch the learning rate was computed for. Both shuffles come from ``(seed, epoch[, block])``, so every learner
computes the same permutation alone and a resumed epoch repeats exactly.

The unit of work is a :class:`Piece`: a block from a chunk of its shuffled order
on (0 for a whole block; more for a block resumed in the middle of an epoch).
:meth:`ChunkLoader.tagged` says with every batch the last piece it reaches into and
how far (the pieces before it, in the order given, are then trained to their end),
so whoever hands out the work knows exactly what was trained when a run stops.

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
from asrtrain.data.archive import PAD_TARGET
from asrtrain.data.context import with_context
from asrtrain.data.shards import open_archive

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


Tagged = tuple[Any, Any, Piece, int]  # x, y, the last piece it reaches into, the chunk of its order reached
Part = tuple[np.ndarray, np.ndarray]  # features as stored, int64 targets: some chunks of one block


def real_frames(y: Any) -> int:
    """Frames of a target batch that count in the loss (padding carries ``IGNORE_INDEX``)."""
    return int((y != IGNORE_INDEX).sum())


class ChunkLoader:
    """Batches ``(x [B, chunk + 2·context, D] as stored (float16), y int64 [B, chunk + 2·context])``
    of one archive (``columns``: only those of its D, in that order; the context frames' targets
    ``IGNORE_INDEX``)."""

    def __init__(self, archive_path: str | os.PathLike[str], batch_size: int = 256,
                 block_chunks: int = 1024, seed: int = 0, rank: int = 0, world_size: int = 1,
                 prefetch: int = 4, shuffle: bool = True, pin_memory: bool | None = None,
                 columns: list[int] | None = None, context: int = 0) -> None:
        if batch_size < 1 or block_chunks < 1:
            raise ConfigError(f"batch_size ({batch_size}) and block_chunks ({block_chunks}) "
                              "must be positive")
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} outside [0, {world_size})")
        #: ``context`` > 0: each chunk with that many frames of its neighbours each side (data/context.py)
        self.archive = with_context(open_archive(archive_path), context)
        self.batch_size = batch_size
        self.block_chunks = block_chunks
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.prefetch = prefetch
        self.shuffle = shuffle
        self._pin = pin_memory
        #: The feature columns served (``asrtrain train --streams``); None: all, as stored.
        self.columns = None if columns is None else np.asarray(columns, dtype=np.intp)

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

    def tagged(self, epoch: int, pieces: Iterable[Piece], claim_late: bool = False,
               carry: Tagged | None = None) -> Iterator[Tagged]:
        """Yield ``(x, y, piece, end)`` for the batches of ``pieces``: ``piece`` the last one the
        batch reaches into, ``end`` the chunk of its order reached.

        ``carry``: a short batch left over from pieces served earlier (a lockstep member's
        last batch of its piece); its chunks start the first batch, which the next
        piece fills up.

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
            yield from self._batches(epoch, pieces, carry)
            return
        buffer: queue.Queue[Any] = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        if claim_late:
            pieces = _when_drained(pieces, buffer, stop)
        yield from _prefetched(self._batches(epoch, pieces, carry), buffer, stop)

    def block_length(self, block: int) -> int:
        """Chunks in ``block``."""
        start, stop = self.block_range(block)
        return stop - start

    def _batches(self, epoch: int, pieces: Iterable[Piece], carry: Tagged | None = None) -> Iterator[Tagged]:
        """The stream of the pieces' chunks cut into full batches; only the last may be short."""
        parts: list[Part] = [] if carry is None else [(carry[0].numpy(), carry[1].numpy())]
        have = sum(len(y) for _, y in parts)
        last: tuple[Piece, int] | None = None if carry is None else (carry[2], carry[3])
        for piece in pieces:
            feats, targets = self._read(piece.block)
            order = self.chunk_order(epoch, piece.block)
            first = piece.start
            while first < len(order):
                idx = order[first:first + self.batch_size - have]
                # As stored (float16), gathered by numpy: the step converts on its device
                # (half the bytes to pin and copy), and a torch op here would start a second
                # OpenMP team beside the step's, which on 2 cores cost 12% of the step.
                parts.append((feats[idx], targets[idx]))
                have, first = have + len(idx), first + len(idx)
                last = (piece, first)
                if have == self.batch_size:
                    yield self._batch(parts, *last)
                    parts, have = [], 0
        if parts and last is not None:
            yield self._batch(parts, *last)

    def _read(self, block: int) -> Part:
        """A block's features as stored (only ``columns``, if given) and its targets (int64,
        padding as ``IGNORE_INDEX``)."""
        feats, targets = self.archive.read_chunks(*self.block_range(block))
        assert targets is not None
        if self.columns is not None:
            feats = feats[:, :, self.columns]
        y = targets.astype(np.int64)
        y[y == PAD_TARGET] = IGNORE_INDEX
        return feats, y

    def _batch(self, parts: list[Part], piece: Piece, end: int) -> Tagged:
        """One batch of ``parts`` (pinned for the GPU copy where there is a GPU)."""
        import torch

        x = torch.from_numpy(parts[0][0] if len(parts) == 1 else np.concatenate([f for f, _ in parts]))
        y = torch.from_numpy(parts[0][1] if len(parts) == 1 else np.concatenate([t for _, t in parts]))
        if torch.cuda.is_available() if self._pin is None else self._pin:
            x, y = x.pin_memory(), y.pin_memory()
        return x, y, piece, end

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

"""The chunk loader: every frame exactly once per epoch with its own target, seeded order,
sharding, handed-out blocks, batches over block boundaries, prefetch thread, fork safety."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from feature_helpers import make_streams, utt_index

from asrtrain.core.errors import ConfigError
from asrtrain.data.archive import Archive
from asrtrain.data.archive_writer import write_archive
from asrtrain.data.fuse import Stream
from asrtrain.data.loader import IGNORE_INDEX, ChunkLoader, Piece

LENGTHS = [int(n) for n in np.random.default_rng(7).integers(1, 120, 37)]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("loader")
    src = make_streams(root / "src", LENGTHS, dims=(5, 2))
    write_archive(root / "x.h5", [Stream("a", src["a_scp"]), Stream("b", src["b_scp"])],
                  str(src["ali_scp"]), 7, storage_chunks=4)
    return root / "x.h5", src


def frames_of(batches: list[tuple[torch.Tensor, torch.Tensor]]) -> Counter:
    """(utterance number, frame number, target) of every real frame served."""
    seen: Counter = Counter()
    for x, y in batches:
        real = y != IGNORE_INDEX
        for (u, t), label in zip(x[real][:, :2].tolist(), y[real].tolist(), strict=True):
            seen[(int(u), int(t), int(label))] += 1
    return seen


def expected_frames(src: dict) -> Counter:
    return Counter((utt_index(u), t, int(v)) for u, ali in src["ali"].items()
                   for t, v in enumerate(ali))


@pytest.mark.parametrize("prefetch", [0, 2])
def test_every_frame_once_with_its_target(archive: tuple[Path, dict], prefetch: int) -> None:
    path, src = archive
    loader = ChunkLoader(path, batch_size=5, block_chunks=6, seed=3, prefetch=prefetch)
    for epoch in (0, 1):
        batches = list(loader.epoch(epoch))
        assert frames_of(batches) == expected_frames(src)
        for x, y in batches:
            assert x.dtype == torch.float16 and y.dtype == torch.int64  # as stored: the step converts
            assert x.shape[1:] == (21, 7) and y.shape == x.shape[:2] and 1 <= len(x) <= 5
            assert (x[y == IGNORE_INDEX] == 0).all()


def test_shards_cover_the_epoch_once(archive: tuple[Path, dict]) -> None:
    path, src = archive
    loaders = [ChunkLoader(path, batch_size=4, block_chunks=5, seed=1, rank=r, world_size=3,
                           prefetch=0) for r in range(3)]
    shards = [ld.shard(2) for ld in loaders]
    assert sorted(sum(shards, [])) == list(range(loaders[0].num_blocks))
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    total = sum((frames_of(list(ld.epoch(2))) for ld in loaders), Counter())
    assert total == expected_frames(src)


def test_order_is_seeded(archive: tuple[Path, dict]) -> None:
    path, _ = archive

    def firsts(seed: int, epoch: int) -> list[list[float]]:
        ld = ChunkLoader(path, batch_size=3, block_chunks=8, seed=seed, prefetch=0)
        return [x[:, 0, :2].tolist() for x, _ in ld.epoch(epoch)]

    assert firsts(5, 0) == firsts(5, 0)
    assert firsts(5, 0) != firsts(5, 1)
    assert firsts(5, 0) != firsts(6, 0)
    ld = ChunkLoader(path, block_chunks=8, seed=5)
    assert ld.block_order(0) != ld.block_order(1)
    assert sorted(ld.block_order(0)) == list(range(ld.num_blocks))


def _chunk_ids(path: Path) -> dict[tuple[int, int], int]:
    """Archive chunk number of (utterance number, first frame), read back from the features."""
    chunk_of = {}
    for utt, first, count, _ in Archive(path).utterances:
        for c in range(count):
            chunk_of[(utt_index(utt), c * 21)] = first + c
    return chunk_of


@pytest.mark.parametrize("batch", [4, 6, 13])
def test_batches_carry_over_blocks_and_follow_handed_out_blocks(archive: tuple[Path, dict], batch: int) -> None:
    """Below, at and above a block (6): every batch but the last holds ``batch`` chunks, the handed-out
    blocks' chunks in their order, each block's shuffled chunks one after the other."""
    path, _ = archive
    chunk_of = _chunk_ids(path)
    ld = ChunkLoader(path, batch_size=batch, block_chunks=6, seed=0, prefetch=1)
    handed = [3, 0, ld.num_blocks - 1, 5]
    served: list[int] = []
    sizes = []
    for x, _ in ld.epoch(0, blocks=iter(handed)):
        sizes.append(len(x))
        served.extend(chunk_of[(int(u), int(t))] for u, t in x[:, 0, :2].tolist())
    expected = [ld.block_range(b)[0] + int(i) for b in handed for i in ld.chunk_order(0, b)]
    assert served == expected
    total = len(expected)
    assert sizes == [batch] * (total // batch) + ([total % batch] if total % batch else [])


def test_tags_name_the_last_piece_reached(archive: tuple[Path, dict]) -> None:
    """A batch over a block boundary is tagged with the piece it ends in and the chunk reached there."""
    path, _ = archive
    ld = ChunkLoader(path, batch_size=4, block_chunks=6, seed=2, prefetch=0)
    tags = [(piece.block, end) for *_, piece, end in ld.tagged(0, [Piece(0, 2), Piece(1, 5)])]
    assert tags == [(2, 4), (5, 2), (5, 6)]


def test_a_carried_batch_is_filled_by_the_next_piece(archive: tuple[Path, dict]) -> None:
    """A lockstep member's short last batch of one piece, carried into the next: the batches are
    those of the two pieces served together."""
    path, _ = archive
    ld = ChunkLoader(path, batch_size=4, block_chunks=6, seed=2, prefetch=0)
    together = list(ld.tagged(0, [Piece(0, 2), Piece(1, 5)]))
    first = list(ld.tagged(0, [Piece(0, 2)]))
    assert [len(b[0]) for b in first] == [4, 2]
    rest = list(ld.tagged(0, [Piece(1, 5)], carry=first[-1]))
    for a, b in zip(together, [first[0], *rest], strict=True):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) and a[2:] == b[2:]


def test_unshuffled_order_is_the_archive_order(archive: tuple[Path, dict]) -> None:
    path, src = archive
    ld = ChunkLoader(path, batch_size=7, block_chunks=10, shuffle=False, prefetch=0)
    x = torch.cat([b[0] for b in ld.epoch(0)])
    arc = Archive(path)
    feats, _ = arc.read_chunks(0, arc.num_chunks)
    np.testing.assert_array_equal(x.numpy(), feats.astype(np.float32))


def test_errors_in_the_prefetch_thread_reach_the_consumer(archive: tuple[Path, dict]) -> None:
    path, _ = archive
    ld = ChunkLoader(path, batch_size=4, block_chunks=6, prefetch=2)
    with pytest.raises(IndexError, match="block 999 outside"):
        list(ld.epoch(0, blocks=[0, 999]))


def test_breaking_out_stops_the_thread(archive: tuple[Path, dict]) -> None:
    path, _ = archive
    ld = ChunkLoader(path, batch_size=1, block_chunks=4, prefetch=1)
    before = threading.active_count()
    it = ld.epoch(0)
    next(it)
    assert threading.active_count() == before + 1
    it.close()
    assert threading.active_count() == before


def test_forked_child_opens_its_own_handle(archive: tuple[Path, dict]) -> None:
    import multiprocessing as mp

    path, _ = archive
    arc = Archive(path)
    expected = float(arc.read_chunks(0, 10)[0].astype(np.float64).sum())  # parent opened it
    ctx = mp.get_context("fork")
    queue = ctx.Queue()

    def child() -> None:
        queue.put(float(arc.read_chunks(0, 10)[0].astype(np.float64).sum()))

    proc = ctx.Process(target=child)
    proc.start()
    got = queue.get(timeout=30)
    proc.join(timeout=30)
    assert proc.exitcode == 0 and got == expected
    assert float(arc.read_chunks(0, 10)[0].astype(np.float64).sum()) == expected


def test_archive_without_targets_cannot_be_trained_on(tmp_path: Path) -> None:
    src = make_streams(tmp_path / "src", [30, 40])
    write_archive(tmp_path / "x.h5", [Stream("a", src["a_scp"])])
    with pytest.raises(ConfigError, match="no targets"):
        next(ChunkLoader(tmp_path / "x.h5").epoch(0))


def test_bad_arguments(archive: tuple[Path, dict]) -> None:
    path, _ = archive
    with pytest.raises(ConfigError, match="rank 3 outside"):
        ChunkLoader(path, rank=3, world_size=2)
    with pytest.raises(ConfigError, match="must be positive"):
        ChunkLoader(path, batch_size=0)


@pytest.mark.parametrize("claim_late", [False, True])
def test_late_claims_do_not_hoard_blocks(archive: tuple[Path, dict], claim_late: bool) -> None:
    """With work sharing, taking a block id is claiming it: a slow consumer must not hold many unread.

    One batch per block, prefetch 4: eager prefetching takes 5 blocks beyond the one
    being trained (queue full + one in hand); late claims take the next only when at most
    one batch waits, so at most 2 blocks are claimed and not yet trained.
    """
    import time

    path, _ = archive
    loader = ChunkLoader(path, batch_size=6, block_chunks=6, seed=0, prefetch=4)
    taken: list[int] = []

    def claims():
        for b in range(loader.num_blocks):
            taken.append(b)
            yield Piece(b, b)

    ahead = []
    for consumed, _batch in enumerate(loader.tagged(0, claims(), claim_late=claim_late), 1):
        if consumed == 1 and not claim_late:  # wait as long as busy cores need for what must come
            deadline = time.monotonic() + 30
            while len(taken) - consumed < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            time.sleep(0.05)  # a slow learner: the prefetch thread has time to claim ahead
        ahead.append(len(taken) - consumed)
    assert len(taken) == loader.num_blocks  # every block still served once
    if claim_late:
        assert max(ahead) <= 2, ahead  # a bound, whatever the timing
    else:  # what the prefetch queue does unchecked
        assert max(ahead) >= 3, ahead


def test_a_piece_resumes_a_block_where_it_stopped(archive: tuple[Path, dict]) -> None:
    """Batches of a block from chunk k on are the uninterrupted block's batches from k on."""
    path, _ = archive
    loader = ChunkLoader(path, batch_size=2, block_chunks=6, seed=5, prefetch=0)
    whole = list(loader.tagged(1, [Piece(0, 3)]))
    assert [end for *_, end in whole] == [2, 4, 6]
    rest = list(loader.tagged(1, [Piece(0, 3, start=4)]))
    assert len(rest) == 1 and rest[0][3] == 6 and rest[0][2] == Piece(0, 3, start=4)
    assert torch.equal(rest[0][0], whole[2][0]) and torch.equal(rest[0][1], whole[2][1])

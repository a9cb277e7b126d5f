"""Sharded archives: the same batches as one archive, checks on open, the manifest last."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch  # noqa: F401 - imported once here, not inside the first test that makes a batch
from click.testing import CliRunner
from feature_helpers import make_streams

from asrtrain.cli.main import cli
from asrtrain.core.errors import ConfigError, InputError
from asrtrain.data.archive import Archive
from asrtrain.data.archive_writer import write_archive
from asrtrain.data.context import read_with_context
from asrtrain.data.fuse import Stream
from asrtrain.data.loader import ChunkLoader, Piece
from asrtrain.data.shard_writer import write_manifest, write_sharded
from asrtrain.data.shards import ShardedArchive, open_archive, shard_path

LENGTHS = [int(n) for n in np.random.default_rng(7).integers(1, 120, 37)]


def streams(src: dict) -> list[Stream]:
    return [Stream("a", src["a_scp"]), Stream("b", src["b_scp"])]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """One archive and the same data in 5 shards (storage chunks of 4, so blocks of 8 straddle
    shard boundaries at every offset)."""
    root = tmp_path_factory.mktemp("shards")
    src = make_streams(root / "src", LENGTHS, dims=(5, 2))
    write_archive(root / "one.h5", streams(src), str(src["ali_scp"]), 7, storage_chunks=4)
    write_sharded(root / "five.json", streams(src), str(src["ali_scp"]), 7, shards=5, nj=1,
                  storage_chunks=4)
    return root / "one.h5", root / "five.json", src


def test_the_index_and_header_are_one_archives(pair: tuple[Path, Path, dict]) -> None:
    one, five = open_archive(pair[0]), open_archive(pair[1])
    assert isinstance(five, ShardedArchive) and len(five.shards) == 5
    assert five.num_chunks == one.num_chunks and five.num_frames == one.num_frames
    assert five.utterances == one.utterances  # same order, same global chunk numbers
    assert five.layout == one.layout and five.num_pdfs == one.num_pdfs and five.skipped == one.skipped
    np.testing.assert_array_equal(five.priors, one.priors)
    np.testing.assert_allclose(five.mean, one.mean, rtol=1e-6, atol=1e-6)  # float32 of sums in another order
    np.testing.assert_allclose(five.var, one.var, rtol=1e-6)
    for utt, *_ in one.utterances[::5]:
        for a, b in zip(one.read_utterance(utt), five.read_utterance(utt), strict=True):
            np.testing.assert_array_equal(a, b)
    assert pickle.loads(pickle.dumps(five)).utterances == one.utterances
    # chunks with their neighbours' frames (--context) read across shard boundaries as from one file
    np.testing.assert_array_equal(five.utterance_starts, one.utterance_starts)
    for a, b in zip(read_with_context(one, 0, one.num_chunks, 3), read_with_context(five, 0, five.num_chunks, 3),
                    strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("block_chunks", [8, 50])
def test_the_loader_serves_the_same_batches_in_the_same_order(pair: tuple[Path, Path, dict],
                                                               block_chunks: int) -> None:
    """The trainer's loader on both: every batch, its tag (the resume position), on two learners,
    and a block resumed in its middle across a shard boundary."""
    def run(path: Path, rank: int, epoch: int, prefetch: int) -> list:
        loader = ChunkLoader(path, batch_size=16, block_chunks=block_chunks, seed=3, rank=rank,
                             world_size=2, prefetch=prefetch)
        pieces = [Piece(i, b, 5 if i == 0 else 0) for i, b in enumerate(loader.shard(epoch))]
        return [(x.numpy(), y.numpy(), piece, end) for x, y, piece, end in loader.tagged(epoch, pieces)]

    one, five = ChunkLoader(pair[0], block_chunks=block_chunks), ChunkLoader(pair[1], block_chunks=block_chunks)
    assert five.num_blocks == one.num_blocks and five.block_order(1) == one.block_order(1)
    for rank in (0, 1):
        for epoch in (0, 1):
            a, b = run(pair[0], rank, epoch, 0), run(pair[1], rank, epoch, 2)
            assert len(a) == len(b) > 0
            for (xa, ya, pa, ea), (xb, yb, pb, eb) in zip(a, b, strict=True):
                assert (pa, ea) == (pb, eb)
                np.testing.assert_array_equal(xa, xb)
                np.testing.assert_array_equal(ya, yb)


def test_a_missing_or_damaged_shard_is_one_line_naming_it(pair: tuple[Path, Path, dict], tmp_path: Path) -> None:
    for k in range(1, 6):
        shutil.copy(shard_path(pair[1], k), shard_path(tmp_path / "five.json", k))
    manifest = tmp_path / "five.json"
    shutil.copy(pair[1], manifest)
    assert CliRunner().invoke(cli, ["info", str(manifest)]).exit_code == 0
    third = shard_path(manifest, 3)
    data = bytearray(third.read_bytes())
    third.rename(tmp_path / "aside.h5")
    res = CliRunner().invoke(cli, ["info", str(manifest)])
    assert res.exit_code == 1 and res.output.count("\n") == 1
    assert str(third) in res.output and "shard 3 of 5 is missing" in res.output
    third.write_bytes(bytes(data[:-100]))  # truncated
    res = CliRunner().invoke(cli, ["info", str(manifest)])
    assert res.exit_code == 1 and str(third) in res.output and "damaged or rewritten" in res.output
    # the same size, some feature bytes changed: found when those chunks are read
    feats = Archive(tmp_path / "aside.h5").h5["feats"].id.get_chunk_info(0).byte_offset
    data[feats + 40] ^= 0xFF
    third.write_bytes(bytes(data))
    loader = ChunkLoader(manifest, batch_size=16, block_chunks=8, prefetch=0)
    with pytest.raises(InputError, match="corrupted") as err:
        list(loader.epoch(0))
    assert str(third) in str(err.value)


def test_array_jobs_write_the_manifest_only_when_every_shard_is_there(tmp_path: Path) -> None:
    src = make_streams(tmp_path / "src", LENGTHS[:12])
    manifest = tmp_path / "arc.json"
    done = [write_sharded(manifest, streams(src), str(src["ali_scp"]), 7, shards=3, only=k)["manifest"]
            for k in (3, 1)]
    assert done == [False, False] and not manifest.exists()
    assert write_sharded(manifest, streams(src), str(src["ali_scp"]), 7, shards=3, only=2)["manifest"]
    assert open_archive(manifest).utterances == Archive(_single(tmp_path, src)).utterances
    # a shard job starting again takes the manifest away before it writes
    bad = dict(src["ali"])
    bad[sorted(bad)[-1]] = np.full(5, 99, dtype=np.int32)  # target outside the 7 pdfs, in shard 3
    import kaldiio
    kaldiio.save_ark(str(tmp_path / "bad.ark"), bad, scp=str(tmp_path / "bad.scp"))
    with pytest.raises(InputError, match="outside"):
        write_sharded(manifest, streams(src), str(tmp_path / "bad.scp"), 7, shards=3, only=3)
    assert not manifest.exists() and shard_path(manifest, 3).exists()  # the old shard 3 stays whole
    # shards of another split are not put together
    assert not write_sharded(manifest, streams(src), str(src["ali_scp"]), 7, shards=4, only=1)["manifest"]
    with pytest.raises(InputError, match="another split"):
        write_manifest(manifest, 3)
    with pytest.raises(ConfigError, match="manifest"):
        write_sharded(tmp_path / "arc.h5", streams(src), shards=2)


def _single(root: Path, src: dict) -> Path:
    write_archive(root / "single.h5", streams(src), str(src["ali_scp"]), 7)
    return root / "single.h5"


def test_prepare_archive_in_parallel_jobs_then_info(tmp_path: Path) -> None:
    src = make_streams(tmp_path / "src", LENGTHS[:10])
    out = tmp_path / "arc.json"
    res = CliRunner().invoke(cli, ["prepare", "archive", str(out), "--stream", f"a={src['a_scp']}",
                                   "--ali", str(src["ali_scp"]), "--num-pdfs", "7", "--shards", "2",
                                   "--nj", "2"])
    assert res.exit_code == 0, res.output
    assert "(2 shards): 10 utterances" in res.output
    assert [s["file"] for s in json.loads(out.read_text())["shards"]] == ["arc.1.h5", "arc.2.h5"]
    assert sorted(p.name for p in (tmp_path / "log").glob("arc.*.h5.log")) == ["arc.1.h5.log", "arc.2.h5.log"]
    res = CliRunner().invoke(cli, ["info", str(out)], env={"COLUMNS": "160"})
    assert res.exit_code == 0 and "in 2 shards" in res.output and "10" in res.output, res.output
    res = CliRunner().invoke(cli, ["prepare", "archive", str(out), "--stream", f"a={src['a_scp']}"])
    assert res.exit_code == 1 and "--shards" in res.output

#!/usr/bin/env python3
"""Frames per second of the archive writer and of the chunk loader (from page cache).

Makes the paper's three streams (FMLLR 40, online i-vectors 100 every 10 frames,
log-mel+Δ+ΔΔ 120) as Kaldi arks of random numbers, times ``write_archive`` on
them, then times reading the archive back: raw block reads, the loader in the
calling thread (prefetch 0), and the loader with its prefetch thread. The
target is 1M frames/s for the loader from one reader thread. The same data is
also written as ``--shards`` shards and a manifest, and the loader timed on both,
epoch by epoch in turn (so both see the same load): frames/s of each and the ratio.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_loader.py --frames 300000 --shards 8
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

TARGET = 1_000_000


def make_streams(root: Path, frames: int, seed: int = 0) -> list:
    """Random Kaldi arks of the paper's streams, ~``frames`` frames in 300–900-frame utterances."""
    import kaldiio

    from asrtrain.data.fuse import Stream

    rng = np.random.default_rng(seed)
    tables: dict[str, dict[str, np.ndarray]] = {"fmllr": {}, "ivector": {}, "logmel": {}}
    total, i = 0, 0
    while total < frames:
        n = int(rng.integers(300, 900))
        utt = f"spk{i % 50:03d}-{i:06d}"
        tables["fmllr"][utt] = rng.normal(size=(n, 40)).astype(np.float32)
        tables["ivector"][utt] = rng.normal(size=(-(-n // 10), 100)).astype(np.float32)
        tables["logmel"][utt] = rng.normal(size=(n, 120)).astype(np.float32)
        total, i = total + n, i + 1
    streams = []
    for name, table in tables.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        scp = root / name / "feats.scp"
        kaldiio.save_ark(str(root / name / "feats.ark"), table, scp=str(scp))
        streams.append(Stream(name, scp, period=10 if name == "ivector" else None))
    return streams


def rate(frames: int, seconds: float) -> str:
    return f"{frames / seconds:>12,.0f} frames/s ({frames:,} frames in {seconds:.2f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--block-chunks", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--shards", type=int, default=8, help="shards of the sharded copy (0: none)")
    parser.add_argument("--dir", type=Path, default=None, help="work dir (default: a temp dir)")
    args = parser.parse_args()

    import logging

    import torch

    from asrtrain.data.archive import Archive
    from asrtrain.data.archive_writer import write_archive
    from asrtrain.data.loader import ChunkLoader, real_frames

    logging.getLogger("asrtrain").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        streams = make_streams(root / "src", args.frames)
        for s in streams:  # page cache, so the writer is timed, not the first disk read
            (s.scp.parent / "feats.ark").read_bytes()
        t0 = time.perf_counter()
        summary = write_archive(root / "bench.h5", streams)
        write_s = time.perf_counter() - t0
        frames = summary["frames"]
        print(f"archive writer (3 streams -> 260 dims, fp16):  {rate(frames, write_s)}")
        # a decoding archive has no targets; the loader needs them: add an alignment
        import kaldiio

        from asrtrain.data.kaldi_dir import read_scp
        rng = np.random.default_rng(1)
        utts = list(read_scp(streams[0].scp))
        lengths = {u: n for u, _, _, n in Archive(root / "bench.h5").utterances}
        ali = {u: rng.integers(0, 1000, lengths[u]).astype(np.int32) for u in utts}
        kaldiio.save_ark(str(root / "ali.ark"), ali, scp=str(root / "ali.scp"))
        write_archive(root / "train.h5", streams, str(root / "ali.scp"), 1000)
        path = root / "train.h5"
        path.read_bytes()  # into the page cache
        size_mb = path.stat().st_size / 2**20

        arc = Archive(path)
        t0 = time.perf_counter()
        for start in range(0, arc.num_chunks, args.block_chunks):
            arc.read_chunks(start, min(start + args.block_chunks, arc.num_chunks))
        raw_s = time.perf_counter() - t0
        print(f"raw block reads ({args.block_chunks} chunks, {size_mb:.0f} MiB file): "
              f"{rate(frames, raw_s)}")
        paths = {"one file": path}
        if args.shards:
            from asrtrain.data.shard_writer import write_sharded

            t0 = time.perf_counter()
            write_sharded(root / "train.json", streams, str(root / "ali.scp"), 1000, shards=args.shards)
            print(f"sharded writer ({args.shards} shards, {os.cpu_count()} cores):{'':<9}"
                  f"{rate(frames, time.perf_counter() - t0)}")
            for shard in root.glob("train.*.h5"):
                shard.read_bytes()
            paths[f"{args.shards} shards"] = root / "train.json"
        results: dict[tuple[str, int], float] = {}
        for prefetch in (0, 4):
            loaders = {name: ChunkLoader(p, batch_size=args.batch_size, block_chunks=args.block_chunks,
                                         seed=0, prefetch=prefetch) for name, p in paths.items()}
            times: dict[str, list[float]] = {name: [] for name in loaders}
            for epoch in range(args.epochs):  # in turn, first one then the other, so both see the same load
                for name, loader in sorted(loaders.items(), reverse=epoch % 2 == 1):
                    t0, served = time.perf_counter(), 0
                    for _x, y in loader.epoch(epoch):
                        served += real_frames(y)
                    times[name].append(time.perf_counter() - t0)
                    assert served == frames, (served, frames)
            label = "loader, calling thread (prefetch 0)" if prefetch == 0 else \
                f"loader, prefetch thread ({prefetch})"
            for name, seconds in times.items():
                results[name, prefetch] = frames / min(seconds)
                print(f"{label + ', ' + name + ':':<48}{rate(frames, min(seconds))}; first epoch "
                      f"(checksums checked) {frames / seconds[0]:,.0f}")
            if args.shards:
                sharded = f"{args.shards} shards"
                print(f"{'':<4}{sharded} / one file: {results[sharded, prefetch] / results['one file', prefetch]:.3f} "
                      f"(first epoch {times['one file'][0] / times[sharded][0]:.3f})")
        print(f"loader / target ({TARGET:,} frames/s): {results['one file', 0] / TARGET:.2f}x in one thread, "
              f"{results['one file', 4] / TARGET:.2f}x with prefetch")


if __name__ == "__main__":
    main()

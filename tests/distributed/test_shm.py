"""Shared-memory gossip snapshots: learners of one host read each other's, others fall back."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from asrtrain.distributed.shm import SHM_DIR, SharedSnapshots


def _build(hosts: list[str], dirs: list[Path], numel: int = 1000) -> list[SharedSnapshots]:
    """One SharedSnapshots per rank, built concurrently (each waits on the store for all)."""
    store = dist.HashStore()
    out: list[SharedSnapshots | None] = [None] * len(hosts)
    errors: list[BaseException] = []

    def make(rank: int) -> None:
        try:
            out[rank] = SharedSnapshots(store, rank, len(hosts), numel, torch.float32, host=hosts[rank],
                                        shm_dir=dirs[rank])
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(r,)) for r in range(len(hosts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    return [s for s in out if s is not None]


@pytest.mark.skipif(not (SHM_DIR.is_dir() and os.access(SHM_DIR, os.W_OK)), reason="no writable /dev/shm")
def test_learners_on_one_host_read_each_others_snapshot_in_place() -> None:
    snaps = _build(["h", "h", "other"], [SHM_DIR] * 3)
    try:
        a, b, c = snaps
        assert a.local_peers == [1] and b.local_peers == [0] and c.local_peers == []
        assert a.shared_with(1) and b.shared_with(0) and not a.shared_with(2) and not c.shared_with(0)
        a.own.copy_(torch.arange(1000, dtype=torch.float32))
        assert torch.equal(b.peer(0), a.own)  # the same memory, no copy
        b.own.fill_(7.0)
        assert float(a.peer(1).sum()) == 7000.0
        # the names are gone once everyone has mapped: a crashed job leaves nothing in /dev/shm
        assert not any(s.path.exists() for s in snaps)
    finally:
        for s in snaps:
            s.close()


def test_a_learner_without_shared_memory_makes_its_pair_use_the_group(tmp_path: Path) -> None:
    # Rank 1 cannot create its buffer (no such directory): neither side of the pair may
    # choose shared memory, or one would read while the other waits on the network.
    snaps = _build(["h", "h"], [tmp_path, tmp_path / "missing"])
    try:
        a, b = snaps
        assert not a.shared_with(1) and not b.shared_with(0)
        assert a.own.numel() == b.own.numel() == 1000  # each still has its snapshot buffer
        assert list(tmp_path.iterdir()) == []
    finally:
        for s in snaps:
            s.close()


def test_a_full_shared_memory_is_a_fallback_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.posix_fallocate", no_space)
    a, b = _build(["h", "h"], [tmp_path, tmp_path])
    assert not a.shared_with(1) and not b.shared_with(0)
    assert list(tmp_path.iterdir()) == []  # the half-made files were removed

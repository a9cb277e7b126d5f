"""The three strategies' invariants, proven for the loop ``asrtrain train`` runs.

Four gloo learners started by the ``--nproc`` launcher run :class:`Trainer` with a
tiny BLSTM on a tiny archive (one launch runs every scenario in turn); a
:class:`~jobs.Recorder` hook watches the batches and weights. The single-learner
reference of the SSGD test is the same ``Trainer.train_step`` on the union of the
learners' batches.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs import SSGD, SSGD_ADAM, STEP, mechanism_runs, scenarios, tiny_config  # noqa: E402

from asrtrain.data.archive import Archive  # noqa: E402
from asrtrain.data.loader import ChunkLoader, real_frames  # noqa: E402
from asrtrain.distributed.local import launch_local  # noqa: E402
from asrtrain.distributed.shm import SHM_DIR  # noqa: E402
from asrtrain.train.device import DeviceBatch  # noqa: E402
from asrtrain.train.trainer import Trainer  # noqa: E402

HAVE_SHM = SHM_DIR.is_dir() and os.access(SHM_DIR, os.W_OK)
@pytest.fixture(scope="module")
def runs(archives, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("mechanism")
    return launch_local(4, scenarios, (mechanism_runs(archives[0], root),), run_id="test-mechanism")[0]


def _expected_shared(name: str, exchanged: int) -> int:
    """Rounds through shared memory: all of them on this one host, unless the group was asked for."""
    return 0 if name.endswith("-group") or not HAVE_SHM else exchanged


def _t(v) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.float64)


@pytest.mark.parametrize("name,options", [("ssgd", SSGD), ("ssgd-adam", SSGD_ADAM)])
def test_ssgd_equals_one_learner_on_the_union_of_the_batches(runs, archives, tmp_path, name, options):
    recs = runs[name]
    steps = recs[0]["steps"]
    assert steps >= 4 and all(r["steps"] == steps for r in recs)
    # Members claim a block each per round (member j: positions j, j+4, ...); a member's batches carry
    # over its blocks, so it takes ceil(its chunks / 3) batches. Its shorter share ends in empty steps.
    loader = ChunkLoader(archives[0], batch_size=3, block_chunks=8, seed=tiny_config(archives[0], tmp_path).seed)
    order = loader.block_order(1)
    batches = sum(math.ceil(sum(loader.block_length(b) for b in order[j::4]) / 3) for j in range(4))
    assert sum(b is not None for r in recs for b in r["batches"]) == batches
    assert any(b is None for r in recs for b in r["batches"])
    # The reference: one learner (the base strategy) taking the same steps on the union.
    one = Trainer(tiny_config(archives[0], tmp_path / "one", **options))
    assert torch.equal(_t(recs[0]["initial"]), _t([w for p in one.model.parameters() for w in p.reshape(-1).tolist()]))
    for s in range(steps):
        real = [r["batches"][s] for r in recs if r["batches"][s] is not None]
        x = torch.cat([torch.tensor(b[0]) for b in real])
        y = torch.cat([torch.tensor(b[1]) for b in real])
        one.train_step(one.model, DeviceBatch(x, y, real_frames(y)), recs[0]["lrs"][s])
        ref = torch.cat([p.detach().reshape(-1) for p in one.model.parameters()])
        for r in recs:
            assert torch.allclose(torch.tensor(r["weights"][s]), ref, atol=1e-5, rtol=0), f"step {s} rank {r['rank']}"


@pytest.mark.parametrize("name", ["adpsgd-zero", "random-zero", "adpsgd-zero-group"])
def test_adpsgd_keeps_the_mean_and_reaches_consensus(runs, name):
    recs = runs[name]
    initial = torch.stack([_t(r["initial"]) for r in recs])
    final = torch.stack([_t(r["final"]) for r in recs])
    for r in recs:
        last = r["epochs"][-1]  # the gossip counters run on across epochs
        assert last["exchanged"] == last["rounds"] >= 3  # 4 learners: a perfect matching every round
        # one host: shared memory unless the process group was asked for
        assert last["shared_memory"] == _expected_shared(name, last["exchanged"])
    # Doubly stochastic mixing: the mean is kept (to float32 rounding).
    assert torch.allclose(final.mean(0), initial.mean(0), atol=2e-6, rtol=0)
    spread0 = (initial - initial.mean(0)).abs().max()
    spread1 = (final - final.mean(0)).abs().max()
    assert spread0 > 0.5
    assert spread1 < 0.5 * spread0


@pytest.mark.parametrize("name", ["h-adpsgd", "h-adpsgd-group"])
def test_h_adpsgd_members_identical_after_every_step(runs, name):
    recs = runs[name]
    for a, b in ((0, 1), (2, 3)):
        wa, wb = recs[a]["weights"], recs[b]["weights"]
        assert len(wa) == len(wb) >= 3
        for s, (x, y) in enumerate(zip(wa, wb, strict=True)):
            assert x == y, f"members {a},{b} differ after step {s}"
    # Gossip happened between the two super-learners, and the global average makes all equal.
    first = recs[0]["epochs"][0]
    assert first["exchanged"] >= 1
    assert first["shared_memory"] == _expected_shared(name, first["exchanged"])
    assert recs[0]["final"] == recs[2]["final"]
    assert recs[0]["weights"][-1] != recs[2]["weights"][-1]


def test_straggler_does_not_slow_the_others(runs, archives):
    recs = runs["straggler"]
    blocks = [r["epochs"][0]["blocks"] for r in recs]
    assert sum(blocks) == math.ceil(Archive(archives[0]).num_chunks / 4)  # the epoch finished, each block once
    assert blocks[3] < min(blocks[:3])  # work sharing: the straggler did less
    # However the 2 cores are shared: the straggler sleeps twice its own step time beyond the
    # STEP every learner sleeps, so its steps take 3 STEP at least, and the others, which
    # never wait for it, step faster than it does.
    fast = [statistics.median(r["iter_times"]) for r in recs[:3] if r["iter_times"]]
    if recs[3]["iter_times"]:
        slow = statistics.median(recs[3]["iter_times"])
        assert slow >= 3 * STEP * 0.98
        assert max(fast) < slow


def test_every_block_trained_once_and_gossip_ends_on_one_round(runs, archives):
    blocks_in_epoch = math.ceil(Archive(archives[0]).num_chunks / 8)
    for name in ("adpsgd-zero", "random-zero", "adpsgd-zero-group", "h-adpsgd", "h-adpsgd-group", "straggler"):
        recs = runs[name]
        assert not any(r["gossip_alive_after_close"] for r in recs), name
        first = [r["epochs"][0] for r in recs]
        if name != "straggler":  # (blocks of 4 chunks there: its own test counts them)
            assert sum(e["blocks"] for e in first) == blocks_in_epoch, name
        rounds = {e["rounds"] for e in first}
        assert len(rounds) == 1, (name, rounds)  # every learner ran to the agreed last round
        # a round begins after a step: the last round is the most steps any learner took
        assert rounds.pop() <= max(e["steps"] for e in first)

"""The three strategies' invariants, on 4 gloo learners started by the --nproc launcher.

One launch runs every scenario in turn (starting 4 workers costs ~10 s on 2 cores).
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tiny_job import IGNORE, JobSpec, make_model, scenarios  # noqa: E402

from asrtrain.distributed.launch import launch_local  # noqa: E402
from asrtrain.distributed.shm import SHM_DIR  # noqa: E402

HAVE_SHM = SHM_DIR.is_dir() and os.access(SHM_DIR, os.W_OK)

SSGD_SPEC = JobSpec(num_blocks=6, batches_per_block=3, last_block_batches=1, record_weights=True,
                    record_batches=True, step_sleep_s=0.005)
# Three epochs: each ends on an agreed round that at least one learner began after a
# step, so at least three rounds happen however the 2 shared cores schedule the workers.
ZERO_LR = JobSpec(num_blocks=16, lr=0.0, momentum=0.0, perturb=1.0, step_sleep_s=0.01, epochs=3)
HADP = JobSpec(num_blocks=9, record_weights=True, step_sleep_s=0.005)
STEP = 0.03
STRAGGLE = JobSpec(num_blocks=24, step_sleep_s=STEP)

RUNS = [
    ("ssgd", {"strategy": "ssgd", "nproc": 4}, SSGD_SPEC),
    ("adpsgd-zero", {"strategy": "adpsgd", "nproc": 4, "global_average": False}, ZERO_LR),
    ("random-zero", {"strategy": "adpsgd", "nproc": 4, "global_average": False, "topology": "random-ring",
                     "reshuffle_every": 1, "gossip_seed": 3}, ZERO_LR),
    # the same through the gossip process group (gloo point to point) instead of shared memory
    ("adpsgd-zero-group", {"strategy": "adpsgd", "nproc": 4, "global_average": False,
                           "gossip_transport": "group"}, ZERO_LR),
    ("h-adpsgd", {"strategy": "h-adpsgd", "group_size": 2, "nproc": 4}, HADP),
    ("h-adpsgd-group", {"strategy": "h-adpsgd", "group_size": 2, "nproc": 4, "gossip_transport": "group"}, HADP),
    ("straggler", {"strategy": "adpsgd", "nproc": 4, "straggler_rank": 3, "straggler_factor": 3.0}, STRAGGLE),
]


@pytest.fixture(scope="module")
def runs() -> dict:
    return launch_local(4, scenarios, (RUNS,), run_id="test-mechanism")[0]


def _expected_shared(name: str, exchanged: int) -> int:
    """Rounds through shared memory: all of them on this one host, unless the group was asked for."""
    return 0 if name.endswith("-group") or not HAVE_SHM else exchanged


def _t(v) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.float64)


def test_ssgd_equals_one_learner_on_the_union_of_the_batches(runs):
    recs = runs["ssgd"]
    steps = recs[0]["steps"]
    assert steps >= 4 and all(r["steps"] == steps for r in recs)
    # Blocks of unequal length: some members took empty steps, and no batch was lost.
    assert sum(len([b for b in r["batches"] if b is not None]) for r in recs) == 5 * 3 + 1
    spec = SSGD_SPEC
    model = make_model(spec)
    opt = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum)
    for s in range(steps):
        xs = [torch.tensor(r["batches"][s][0]) for r in recs if r["batches"][s] is not None]
        ys = [torch.tensor(r["batches"][s][1]) for r in recs if r["batches"][s] is not None]
        x, y = torch.cat(xs), torch.cat(ys)
        loss_sum = nn.functional.cross_entropy(model(x).reshape(-1, spec.classes), y.reshape(-1),
                                               ignore_index=IGNORE, reduction="sum")
        opt.zero_grad()
        (loss_sum / int((y != IGNORE).sum())).backward()
        nn.utils.clip_grad_norm_(model.parameters(), spec.clip)
        opt.step()
        ref = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
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
    assert recs[0]["epochs"][0]["exchanged"] >= 1
    assert recs[0]["epochs"][0]["shared_memory"] == _expected_shared(name, recs[0]["epochs"][0]["exchanged"])
    assert recs[0]["final"] == recs[2]["final"]
    assert recs[0]["weights"][-1] != recs[2]["weights"][-1]


def test_straggler_does_not_slow_the_others(runs):
    recs = runs["straggler"]
    assert not any(r["gossip_alive_after_close"] for r in recs)
    blocks = [r["epochs"][0]["blocks"] for r in recs]
    assert sum(blocks) == STRAGGLE.num_blocks  # the epoch finished, every block done once
    assert blocks[3] < min(blocks[:3])  # work sharing: the straggler did less
    fast = [statistics.median(r["iter_times"]) for r in recs[:3] if r["iter_times"]]
    slow = statistics.median(recs[3]["iter_times"]) if len(recs[3]["iter_times"]) else 3 * STEP
    assert max(fast) < 1.8 * STEP < slow


def test_gossip_threads_end_after_the_same_last_round(runs):
    for name in ("adpsgd-zero", "random-zero", "adpsgd-zero-group", "h-adpsgd", "h-adpsgd-group", "straggler"):
        recs = runs[name]
        assert not any(r["gossip_alive_after_close"] for r in recs), name
        rounds = {r["epochs"][0]["rounds"] for r in recs}
        assert len(rounds) == 1, (name, rounds)  # every learner ran to the agreed last round
        # a round begins after a step: the last round is the most steps any learner took
        assert rounds.pop() <= max(r["steps"] for r in recs)

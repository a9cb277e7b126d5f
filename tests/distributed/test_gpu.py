"""The strategies with tensors on a GPU: several learners sharing one device (the lent machines have one).

Under gloo (NCCL refuses two ranks on one GPU) the learners keep their weights on the
GPU; gossip partners on the host read each other's snapshot through CUDA IPC, and the
gossip thread's device work runs on its own stream, ordered by CUDA events. The same
invariants as tests/distributed/test_mechanism.py, through the real Trainer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs import Recorder, scenarios, tiny_config  # noqa: E402

from asrtrain.distributed.local import launch_local  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a GPU: learners sharing one device, CUDA IPC gossip, stream ordering")

ZERO = dict(lr=0.0, momentum=0.0, epochs=3)


@pytest.fixture(scope="module")
def runs(archives, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("gpu")
    train = archives[0]
    jobs = [
        ("adpsgd-zero", {"strategy": "adpsgd", "nproc": 4, "global_average": False},
         tiny_config(train, root / "a", **ZERO), Recorder(perturb=1.0, step_sleep_s=0.01)),
        ("h-adpsgd", {"strategy": "h-adpsgd", "group_size": 2, "nproc": 4}, tiny_config(train, root / "h"),
         Recorder(record_weights=True, step_sleep_s=0.005)),
        ("ssgd", {"strategy": "ssgd", "nproc": 4}, tiny_config(train, root / "s"), Recorder()),
    ]
    return launch_local(4, scenarios, (jobs,), run_id="test-gpu")[0]


def test_learners_sharing_a_gpu_keep_the_mean_through_cuda_ipc(runs):
    recs = runs["adpsgd-zero"]
    initial = torch.tensor([r["initial"] for r in recs], dtype=torch.float64)
    final = torch.tensor([r["final"] for r in recs], dtype=torch.float64)
    last = recs[0]["epochs"][-1]
    assert last["exchanged"] == last["rounds"] >= 3
    assert last["shared_memory"] == last["exchanged"]  # every round through CUDA IPC on this host
    assert torch.allclose(final.mean(0), initial.mean(0), atol=2e-6, rtol=0)
    assert (final - final.mean(0)).abs().max() < 0.5 * (initial - initial.mean(0)).abs().max()


def test_h_adpsgd_members_on_a_shared_gpu_stay_identical(runs):
    recs = runs["h-adpsgd"]
    for a, b in ((0, 1), (2, 3)):
        assert len(recs[a]["weights"]) >= 3
        assert recs[a]["weights"] == recs[b]["weights"]
    assert recs[0]["final"] == recs[2]["final"]


def test_ssgd_on_a_shared_gpu_ends_with_one_model(runs):
    recs = runs["ssgd"]
    assert all(r["final"] == recs[0]["final"] for r in recs)
    assert all(r["steps"] == recs[0]["steps"] > 0 for r in recs)

"""Learners on separate hosts: two network namespaces, each with its own name and /dev/shm.

``netns.Hosts`` makes the hosts; ``torchrun`` on each joins a c10d rendezvous on
host 0's address, as on a cluster. The mechanism scenarios of test_mechanism.py
run across them (SSGD equals one learner, gossip keeps the mean, H-ADPSGD members
stay identical), and the transport is checked per pair: shared memory between
learners of one host, the gossip process group across hosts. Then a host's link is
cut in the middle of an epoch.

Checkpoints assume what a cluster has: the experiment directory on a filesystem
every host sees (here the hosts share the machine's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs import SSGD  # noqa: E402
from netns import Hosts, torchrun, unavailable  # noqa: E402
from test_mechanism import (
    test_ssgd_equals_one_learner_on_the_union_of_the_batches as ssgd_equals_one,  # noqa: E402
)

from asrtrain.distributed.groups import Layout, spanning_hosts  # noqa: E402
from asrtrain.distributed.topology import matching  # noqa: E402
from asrtrain.train.checkpoint import all_checkpoints, load_checkpoint  # noqa: E402

JOB = Path(__file__).resolve().parent / "jobs.py"
WHY = unavailable()
needs_hosts = pytest.mark.skipif(WHY is not None, reason=f"cannot make hosts: {WHY}")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env["OMP_NUM_THREADS"] = "1"
    return env


def _port() -> int:
    return 29400 + os.getpid() % 500


@pytest.fixture(scope="module")
def runs(archives, tmp_path_factory) -> dict:
    """The mechanism scenarios on 2 hosts × 2 learners (about 30 s)."""
    if WHY is not None:
        pytest.skip(f"cannot make hosts: {WHY}")
    root = tmp_path_factory.mktemp("hosts")
    out = root / "out.json"
    with Hosts(2) as hosts:
        argv = torchrun(hosts, 2, _port(), [JOB, out, archives[0], root / "exp", "--mechanism"], run_id="mech")
        procs = [hosts.popen(i, argv, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for i in range(2)]
        outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    return json.loads(out.read_text())


def _hosts_of(recs: list[dict]) -> list[str]:
    return [r["host"] for r in recs]


@needs_hosts
@pytest.mark.slow  # one torchrun launch on each of 2 hosts (~30 s)
def test_learners_run_on_two_hosts_in_blocks(runs):
    assert runs["launcher"] == "torchrun" and runs["world"] == 4
    hosts = _hosts_of(runs["ssgd"])
    assert hosts[0] == hosts[1] != hosts[2] == hosts[3], hosts


@needs_hosts
@pytest.mark.slow
def test_ssgd_across_hosts_equals_one_learner(runs, archives, tmp_path):
    recs = runs["ssgd"]
    assert len({r["host"] for r in recs}) == 2  # the learners compared really were on two hosts
    ssgd_equals_one(runs, archives, tmp_path, "ssgd", SSGD)  # step by step to 1e-5: its own assertions


@needs_hosts
@pytest.mark.slow
@pytest.mark.parametrize("name,topology,seed,reshuffle", [("adpsgd-zero", "ring", 0, 4),
                                                           ("random-zero", "random-ring", 3, 1),
                                                           ("adpsgd-zero-group", "ring", 0, 4)])
def test_adpsgd_across_hosts_keeps_the_mean_and_picks_the_transport_per_pair(runs, name, topology, seed, reshuffle):
    recs = runs[name]
    hosts = _hosts_of(recs)
    initial = torch.stack([torch.tensor(r["initial"], dtype=torch.float64) for r in recs])
    final = torch.stack([torch.tensor(r["final"], dtype=torch.float64) for r in recs])
    assert torch.allclose(final.mean(0), initial.mean(0), atol=2e-6, rtol=0)
    assert (final - final.mean(0)).abs().max() < 0.5 * (initial - initial.mean(0)).abs().max()
    for r in recs:
        last = r["epochs"][-1]
        rounds = last["rounds"]
        assert last["exchanged"] == rounds >= 3
        same_host = sum(hosts[matching(4, k, topology, seed, reshuffle)[r["rank"]]] == hosts[r["rank"]]
                        for k in range(rounds))
        expected = 0 if name.endswith("-group") else same_host
        assert last["shared_memory"] == expected, (r["rank"], last, same_host)
        if not name.endswith("-group"):
            assert 0 < last["shared_memory"] < rounds  # some partners on this host, some across


@needs_hosts
@pytest.mark.slow
@pytest.mark.parametrize("name", ["h-adpsgd", "h-adpsgd-group"])
def test_h_adpsgd_super_learners_are_hosts(runs, name):
    recs = runs[name]
    hosts = _hosts_of(recs)
    assert spanning_hosts(Layout(0, 4, 2), hosts) is None
    for a, b in ((0, 1), (2, 3)):
        assert recs[a]["weights"] == recs[b]["weights"], f"members {a},{b} differ"
    first = recs[0]["epochs"][0]
    assert first["exchanged"] >= 1 and first["shared_memory"] == 0  # super-learners gossip across hosts


@needs_hosts
@pytest.mark.slow  # one run of 2 hosts × 2 learners, cut after its second checkpoint (~40 s)
def test_cut_link_names_the_unreachable_learners_and_keeps_the_checkpoint(archives, tmp_path):
    timeout, margin = 10.0, 15.0
    exp, logs = tmp_path / "exp", tmp_path / "logs"
    logs.mkdir()
    args = [JOB, "chunks", archives[0], exp, logs, "adpsgd", 2, "--epochs", 50, "--every", 5, "--timeout", timeout]
    with Hosts(2) as hosts:
        outs = [tmp_path / f"host{i}.out" for i in range(2)]
        procs = [hosts.popen(i, torchrun(hosts, 2, _port() + 1, args, run_id="cut"), env=_env(),
                             stdout=open(outs[i], "w"), stderr=subprocess.STDOUT) for i in range(2)]
        end = time.monotonic() + 240
        while len(all_checkpoints(exp)) < 2:
            assert procs[0].poll() is None and time.monotonic() < end, outs[0].read_text()[-3000:]
            time.sleep(0.05)
        hosts.cut(1)
        cut_at = time.monotonic()
        procs[0].wait(timeout=timeout + 120)
        took = time.monotonic() - cut_at
        while time.monotonic() < cut_at + timeout + margin and "has not answered" not in outs[1].read_text():
            time.sleep(0.2)
        host0, host1 = outs[0].read_text(), outs[1].read_text()
    assert procs[0].returncode not in (0, None)
    errors = [ln for ln in host0.splitlines() if ln.startswith("Error:")]
    assert {"rank 2", "rank 3"} & {w for ln in errors for w in ("rank 2", "rank 3") if w in ln}, host0[-3000:]
    assert took <= timeout + margin, f"host 0 stopped {took:.1f} s after the cut"
    # the cut-off learners end too, saying why, instead of hanging in TCP for a quarter of an hour
    assert "the job's store (on rank 0's host) has not answered" in host1, host1[-3000:]
    _, last = all_checkpoints(exp)[-1]
    state = load_checkpoint(last)  # complete and readable: written atomically before the cut
    assert set(state) == {"model", "optimizer", "trainer"} and state["model"]

"""Rank, world and master address from each launcher's environment."""

from __future__ import annotations

import pytest

from asrtrain.core.errors import ConfigError
from asrtrain.distributed.launch import detect, expand_hostlist


def test_torchrun():
    p = detect({"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4",
                "MASTER_ADDR": "h0", "MASTER_PORT": "1234"})
    assert (p.rank, p.world_size, p.local_rank, p.local_world_size, p.master_addr, p.master_port,
            p.launcher) == (5, 8, 1, 4, "h0", 1234, "torchrun")


def test_mpich():
    p = detect({"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"})
    assert (p.rank, p.world_size, p.local_rank, p.local_world_size, p.launcher) == (3, 4, 1, 2, "mpich")
    assert p.master_addr is None  # shared over MPI by rank 0 at start


def test_openmpi():
    p = detect({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "6",
                "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "3",
                "PMI_RANK": "9", "PMI_SIZE": "9"})
    assert (p.rank, p.world_size, p.local_rank, p.local_world_size, p.launcher) == (2, 6, 0, 3, "openmpi")


def test_slurm():
    p = detect({"SLURM_PROCID": "7", "SLURM_NTASKS": "8", "SLURM_LOCALID": "3",
                "SLURM_NTASKS_PER_NODE": "4(x2)", "SLURM_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "4242"})
    assert (p.rank, p.world_size, p.local_rank, p.local_world_size) == (7, 8, 3, 4)
    assert p.master_addr == "gpu07" and p.master_port == 12000 + 4242 and p.launcher == "slurm"


def test_torchrun_wins_inside_srun():
    p = detect({"RANK": "1", "WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"})
    assert p.launcher == "torchrun" and p.rank == 1


def test_no_launcher():
    assert detect({"HOME": "/root"}) is None


@pytest.mark.parametrize("spec,hosts", [
    ("node1", ["node1"]),
    ("n[1-3]", ["n1", "n2", "n3"]),
    ("n[08-11,20]", ["n08", "n09", "n10", "n11", "n20"]),
    ("a[1-2],b7,c[003-004]", ["a1", "a2", "b7", "c003", "c004"]),
    ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
])
def test_slurm_hostlist(spec, hosts):
    assert expand_hostlist(spec) == hosts


def test_bad_hostlist():
    with pytest.raises(ConfigError, match="host list"):
        expand_hostlist("n[1-x]")

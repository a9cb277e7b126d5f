"""Where a worker is: rank and world from whichever launcher started it.

torch reads only ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT``; this
module maps the environments of torchrun, MPICH (``PMI_*``), Open MPI
(``OMPI_COMM_WORLD_*``) and Slurm (``SLURM_*``) onto them, initialises the default
process group (gloo on CPU, NCCL on GPU), and starts ``--nproc`` local workers
through torch's own elastic launcher.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asrtrain.core.errors import ConfigError

DEFAULT_PORT = 29517


@dataclass(frozen=True)
class Placement:
    """A worker's place in the job, and how to reach rank 0's store."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str | None
    master_port: int | None
    launcher: str


def expand_hostlist(spec: str) -> list[str]:
    """Expand Slurm's compressed host list: ``n[01-03,7],gpu5`` → n01 n02 n03 n7 gpu5."""
    hosts: list[str] = []
    for item in _split_top(spec):
        m = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\](.*)", item)
        if not m:
            if "[" in item or "]" in item:
                raise ConfigError(f"cannot parse Slurm host list {spec!r}")
            hosts.append(item)
            continue
        prefix, ranges, rest = m.groups()
        tails = expand_hostlist(rest) if rest else [""]
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ConfigError(f"cannot parse Slurm host list {spec!r}")
            width = len(lo)
            for i in range(int(lo), int(hi or lo) + 1):
                hosts.extend(f"{prefix}{i:0{width}d}{tail}" for tail in tails)
    return hosts


def _split_top(spec: str) -> list[str]:
    """Split on commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in spec:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return [s.strip() for s in out if s.strip()]


def _tasks_per_node(value: str) -> int:
    """First node's count of ``SLURM_NTASKS_PER_NODE`` (``2(x3),1`` → 2)."""
    m = re.match(r"\s*(\d+)", value)
    if not m:
        raise ConfigError(f"cannot parse SLURM_NTASKS_PER_NODE={value!r}")
    return int(m.group(1))


def _int(env: Mapping[str, str], name: str, default: int | None = None) -> int:
    """An integer launcher variable, or an error naming it."""
    value = env.get(name, "").strip()
    if not value:
        if default is None:
            raise ConfigError(f"environment variable {name} is not set")
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"environment variable {name}={value!r} is not an integer") from None


def _port(env: Mapping[str, str]) -> int | None:
    return _int(env, "MASTER_PORT") if env.get("MASTER_PORT", "").strip() else None


def detect(env: Mapping[str, str] | None = None) -> Placement | None:
    """The placement from the environment, or ``None`` outside any launcher.

    The one place that decides whether a launcher started this process. A Slurm
    step of one task is no launcher (``srun asrtrain train --nproc 4`` starts its
    own workers); torchrun wins inside srun, Open MPI over the PMI variables it
    may also set.
    """
    env = os.environ if env is None else env
    addr = env.get("MASTER_ADDR")
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        return Placement(rank, world, _int(env, "LOCAL_RANK", rank), _int(env, "LOCAL_WORLD_SIZE", world),
                         addr, _port(env), env.get("ASRTRAIN_LAUNCHER", "torchrun"))
    if "OMPI_COMM_WORLD_RANK" in env:
        rank, world = _int(env, "OMPI_COMM_WORLD_RANK"), _int(env, "OMPI_COMM_WORLD_SIZE")
        return Placement(rank, world, _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", rank),
                         _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", world), addr, _port(env), "openmpi")
    if "PMI_RANK" in env and "PMI_SIZE" in env:
        rank, world = _int(env, "PMI_RANK"), _int(env, "PMI_SIZE")
        return Placement(rank, world, _int(env, "MPI_LOCALRANKID", rank), _int(env, "MPI_LOCALNRANKS", world),
                         addr, _port(env), "mpich")
    if "SLURM_PROCID" in env and _int(env, "SLURM_NTASKS", 1) > 1:
        world = _int(env, "SLURM_NTASKS")
        nodes = env.get("SLURM_NODELIST") or env.get("SLURM_JOB_NODELIST")
        if addr is None and nodes:
            addr = expand_hostlist(nodes)[0]
        port = _port(env)
        if port is None and "SLURM_JOB_ID" in env:
            port = 12000 + _int(env, "SLURM_JOB_ID") % 20000
        local_world = _tasks_per_node(env["SLURM_NTASKS_PER_NODE"]) if "SLURM_NTASKS_PER_NODE" in env else world
        return Placement(_int(env, "SLURM_PROCID"), world, _int(env, "SLURM_LOCALID", 0),
                         local_world, addr, port, "slurm")
    return None


def _mpi_master(place: Placement) -> tuple[str, int]:
    """Rank 0's address and a free port, shared over MPI (mpiexec sets neither)."""
    try:
        from mpi4py import MPI
    except ImportError:  # pragma: no cover - mpi4py is a dependency
        return place.master_addr or "127.0.0.1", place.master_port or DEFAULT_PORT
    comm = MPI.COMM_WORLD
    mine = None
    if comm.Get_rank() == 0:
        addr = place.master_addr or ("127.0.0.1" if place.local_world_size == place.world_size
                                     else socket.gethostname())
        mine = (addr, place.master_port or free_port())
    return comm.bcast(mine, root=0)


def free_port() -> int:
    """A TCP port free right now on this host."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def local_gpus() -> int:
    """The GPUs torch sees on this machine (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def choose_backend(backend: str, local_world_size: int = 1) -> str:
    """``auto``: NCCL when every learner of this node has a GPU of its own, gloo otherwise.

    NCCL refuses two ranks of one communicator on one GPU, so learners that share
    GPUs (more learners than GPUs on a node) use gloo, with their tensors still on the
    GPU: DDP's allreduce stages them, gossip goes through CUDA IPC between learners of
    the host and a staged copy to other hosts.
    """
    gpus = local_gpus()
    if backend == "auto":
        return "nccl" if gpus and local_world_size <= gpus else "gloo"
    if backend == "nccl" and not gpus:
        raise ConfigError("--backend nccl needs a GPU; this worker has none")
    if backend == "nccl" and local_world_size > gpus:
        raise ConfigError(f"--backend nccl: {local_world_size} learners on this node share {gpus} GPU(s), "
                          "and NCCL refuses two ranks on one GPU; use --backend gloo (or auto)")
    return backend


def set_threads(local_world_size: int) -> int:
    """Share the cores among the local workers (spawned workers otherwise oversubscribe).

    ``OMP_NUM_THREADS`` wins when set (torchrun sets it to 1); otherwise each of the
    node's workers gets an equal share of the cores it may run on.
    """
    import torch

    n = int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
    if n <= 0:   # the cores this process may run on (a batch job's share), not the node's
        n = max(1, len(os.sched_getaffinity(0)) // max(local_world_size, 1))
    torch.set_num_threads(n)
    return n


def init_worker(backend: str = "auto", timeout_s: float = 60.0,
                place: Placement | None = None) -> tuple[Placement, Any]:
    """Join the job: default process group and a store; returns the placement and the store."""
    import torch
    import torch.distributed as dist

    place = place or detect()
    if place is None:
        raise ConfigError("no launcher environment found (torchrun, mpiexec, srun) and --nproc is 1")
    addr, port = place.master_addr, place.master_port
    if place.launcher in ("mpich", "openmpi") and (addr is None or port is None):
        addr, port = _mpi_master(place)
    if addr is None or port is None:
        raise ConfigError(f"{place.launcher}: set MASTER_ADDR and MASTER_PORT for rank 0's store")
    os.environ.update(MASTER_ADDR=str(addr), MASTER_PORT=str(port), RANK=str(place.rank),
                      WORLD_SIZE=str(place.world_size), LOCAL_RANK=str(place.local_rank),
                      LOCAL_WORLD_SIZE=str(place.local_world_size))
    set_threads(place.local_world_size)
    name = choose_backend(backend, place.local_world_size)
    if torch.cuda.is_available():  # this learner's GPU (several learners may share one under gloo)
        torch.cuda.set_device(place.local_rank % torch.cuda.device_count())
    timeout = timedelta(seconds=timeout_s)
    store, _, _ = next(dist.rendezvous("env://", place.rank, place.world_size, timeout=timeout))
    store.set_timeout(timeout)
    dist.init_process_group(name, store=dist.PrefixStore("default_pg", store), rank=place.rank,
                            world_size=place.world_size, timeout=timeout)
    return place, dist.PrefixStore("asrtrain", store)

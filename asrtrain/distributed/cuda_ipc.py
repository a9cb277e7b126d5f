"""Gossip snapshots on the GPU shared between learners of one host, through CUDA IPC.

Why: several learners may share one GPU (a machine with fewer GPUs than learners,
or a test machine with one), where NCCL refuses two ranks of one communicator on a
device and gloo cannot send CUDA tensors without staging them through the host.
With CUDA IPC a learner maps its partner's snapshot buffer, which stays on the
device, and the round's delta is one kernel over the two buffers: the device
analogue of :mod:`asrtrain.distributed.shm`, with the same interface.

Each learner publishes the IPC handle of its snapshot buffer (PyTorch's own
``reduce_tensor``) in the store; learners of the same host open each other's. The
owner keeps its buffer alive until :meth:`CudaSnapshots.close`, which every learner
reaches after the job's last round.
"""

from __future__ import annotations

import logging
import pickle
from typing import Any

import torch

from asrtrain.distributed.shm import gather, host_id

log = logging.getLogger("asrtrain.distributed")


class CudaSnapshots:
    """This learner's snapshot buffer on its GPU, and the mapped buffers of learners on its host."""

    def __init__(self, store: Any, rank: int, world_size: int, numel: int, dtype: torch.dtype,
                 device: torch.device, host: str | None = None) -> None:
        from torch.multiprocessing.reductions import reduce_tensor

        self.rank, self.world_size = rank, world_size
        self.host = host if host is not None else host_id()
        self.own = torch.zeros(numel, dtype=dtype, device=device)
        rebuild, args = reduce_tensor(self.own)
        store.set(f"cuda-ipc/{rank}", pickle.dumps({"host": self.host, "rebuild": rebuild, "args": args}))
        self._peers: dict[int, torch.Tensor] = {}
        ok = True
        for r, raw in enumerate(gather(store, "cuda-ipc", world_size)):
            info = pickle.loads(raw)
            if r == rank or info["host"] != self.host:
                continue
            try:
                self._peers[r] = info["rebuild"](*info["args"])
            except (RuntimeError, OSError) as exc:
                log.warning("rank %d: cannot open the CUDA IPC snapshot of rank %d (%s): gossip goes "
                            "through the process group", rank, r, exc)
                ok = False
        store.set(f"cuda-ipc-ok/{rank}", pickle.dumps(ok))
        oks = [pickle.loads(v) for v in gather(store, "cuda-ipc-ok", world_size)]
        self._local = {r for r in self._peers if ok and oks[r]}

    @property
    def local_peers(self) -> list[int]:
        """Ranks whose snapshots this learner reads on the device."""
        return sorted(self._local)

    def shared_with(self, rank: int) -> bool:
        """Whether the exchange with ``rank`` goes through CUDA IPC."""
        return rank in self._local

    def peer(self, rank: int) -> torch.Tensor:
        """The snapshot buffer of a learner on this host (read it only during a round with it)."""
        return self._peers[rank]

    def close(self) -> None:
        """Drop the mapped buffers, then this learner's own."""
        self._peers.clear()
        self._local.clear()
        self.own = torch.empty(0)

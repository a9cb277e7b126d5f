"""Super-learners and the process groups each thread talks on.

A super-learner is ``group_size`` consecutive ranks. Each learner owns:

* ``world``: the default group, main thread only (epoch-end average, metrics);
* ``super``: its super-learner's group, main thread only (DDP's gradient
  allreduce and the small per-step agreement of the members);
* ``gossip``: a world-wide group used only by the gossip thread for the
  point-to-point exchange with the partner;
* ``super_gossip``: a second group on the super-learner's ranks, used only by the
  gossip thread (H-ADPSGD's collective of shard deltas).

Two threads never share a group: gloo aborts with "collective mismatch" when they do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from asrtrain.core.errors import ConfigError


@dataclass(frozen=True)
class Layout:
    """Where a rank sits: its super-learner and its index within it."""

    rank: int
    world_size: int
    group_size: int

    def __post_init__(self) -> None:
        if self.world_size % self.group_size:
            raise ConfigError(
                f"the {self.world_size} learners cannot form super-learners of {self.group_size} "
                "(the group size must divide the number of learners)"
            )

    @property
    def num_super(self) -> int:
        """Number of super-learners (nodes of the gossip ring)."""
        return self.world_size // self.group_size

    @property
    def super_id(self) -> int:
        """This rank's super-learner."""
        return self.rank // self.group_size

    @property
    def member(self) -> int:
        """This rank's index within its super-learner."""
        return self.rank % self.group_size

    def ranks_of(self, super_id: int) -> list[int]:
        """The global ranks of super-learner ``super_id``."""
        return list(range(super_id * self.group_size, (super_id + 1) * self.group_size))

    def counterpart(self, super_id: int) -> int:
        """The rank of the member with this rank's index in super-learner ``super_id``."""
        return super_id * self.group_size + self.member


def resolve_group_size(strategy: str, world_size: int, local_world_size: int,
                       group_size: int | None) -> int:
    """The super-learner size of a strategy: all (ssgd), 1 (adpsgd), a node (h-adpsgd)."""
    if strategy in ("ssgd", "single"):
        return world_size
    if strategy == "adpsgd":
        return 1
    if strategy == "h-adpsgd":
        size = group_size if group_size is not None else local_world_size
        if size < 1 or world_size % size:
            raise ConfigError(f"--group-size {size} must divide the number of learners ({world_size})")
        return size
    raise ConfigError(f"unknown strategy {strategy!r}")


def spanning_hosts(layout: Layout, hosts: list[str]) -> str | None:
    """Which super-learner spans more than one host (None when each lies on one).

    A super-learner is ``group_size`` consecutive ranks. torchrun numbers ranks in
    blocks per node, but ``srun --distribution=cyclic`` or a round-robin ``mpiexec``
    deal them out one per node in turn: the hierarchy would then allreduce over the
    slow links it exists to avoid. ``hosts[r]`` is rank r's host id.
    """
    for k in range(layout.num_super):
        ranks = layout.ranks_of(k)
        names = sorted({hosts[r].split("/")[0] for r in ranks})
        if len(names) > 1:
            return (f"super-learner {k} (ranks {ranks[0]}-{ranks[-1]}) spans {len(names)} hosts "
                    f"({', '.join(names[:4])}{', …' if len(names) > 4 else ''})")
    return None


@dataclass
class Groups:
    """The process groups of one learner (``None`` where a group is not needed)."""

    layout: Layout
    super: Any
    gossip: Any
    super_gossip: Any


def make_groups(layout: Layout, timeout_s: float, backend: str | None = None) -> Groups:
    """Create the groups; every rank must call this in the same order (c10d's rule)."""
    import torch.distributed as dist

    timeout = timedelta(seconds=timeout_s)
    g = layout.group_size
    mine = None
    for k in range(layout.num_super):
        ranks = layout.ranks_of(k)
        grp = dist.new_group(ranks, timeout=timeout, backend=backend) if g > 1 else None
        if k == layout.super_id:
            mine = grp
    gossip = None
    super_gossip = None
    if layout.num_super > 1:
        gossip = dist.new_group(list(range(layout.world_size)), timeout=timeout, backend=backend)
        if g > 1:
            for k in range(layout.num_super):
                grp = dist.new_group(layout.ranks_of(k), timeout=timeout, backend=backend)
                if k == layout.super_id:
                    super_gossip = grp
    return Groups(layout=layout, super=mine, gossip=gossip, super_gossip=super_gossip)

"""Options of distributed training, as the ``train`` command hands them over.

One small frozen dataclass so the CLI, the dry-run plan, the launcher and every
worker read the same values (it crosses process boundaries as a plain dict).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from asrtrain.core.config import strict_from_dict
from asrtrain.core.errors import ConfigError

STRATEGIES = ("single", "ssgd", "adpsgd", "h-adpsgd")
TOPOLOGIES = ("ring", "random-ring")
BACKENDS = ("auto", "gloo", "nccl")
TRANSPORTS = ("auto", "group")


@dataclass(frozen=True)
class DistConfig:
    """How learners cooperate.

    ``group_size`` is the super-learner size for ``h-adpsgd`` (``None``: the local
    world size, i.e. one super-learner per node); ``ssgd`` and ``adpsgd`` fix it
    (all learners, and 1). ``nproc`` > 1 starts that many local workers through
    torch's elastic launcher; with ``nproc`` = 1 the ranks come from the
    environment of ``torchrun``/``mpiexec``/``srun`` when one is present.
    ``straggler_rank``/``straggler_factor`` slow one rank down (tests and benches).
    ``global_average`` averages all learners' weights at each epoch end for
    validation and the checkpoint. ``reshuffle_every``: rounds between redraws of
    the randomized ring. ``gossip_transport``: ``auto`` exchanges snapshots through
    shared memory between learners of one host (on CPUs) and through the gossip
    process group otherwise; ``group`` always uses the process group. ``elastic``:
    under ADPSGD and H-ADPSGD the survivors of a dead learner (or super-learner)
    train on while at least ``min_learners`` are left (default: half the job).
    """

    strategy: str
    group_size: int | None = None
    topology: str = "ring"
    nproc: int = 1
    backend: str = "auto"
    timeout_s: float = 60.0
    gossip_seed: int = 0
    straggler_rank: int | None = None
    straggler_factor: float = 1.0
    global_average: bool = True
    reshuffle_every: int = 4
    gossip_transport: str = "auto"
    elastic: bool = False
    min_learners: int | None = None

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"unknown strategy {self.strategy!r} (choose from {', '.join(STRATEGIES)})")
        if self.topology not in TOPOLOGIES:
            raise ConfigError(f"unknown topology {self.topology!r} (choose from {', '.join(TOPOLOGIES)})")
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown backend {self.backend!r} (choose from {', '.join(BACKENDS)})")
        if self.gossip_transport not in TRANSPORTS:
            raise ConfigError(f"unknown gossip transport {self.gossip_transport!r} "
                              f"(choose from {', '.join(TRANSPORTS)})")
        if self.group_size is not None and self.group_size < 1:
            raise ConfigError(f"--group-size must be at least 1, got {self.group_size}")
        if self.group_size is not None and self.strategy != "h-adpsgd":
            raise ConfigError("--group-size applies to --strategy h-adpsgd only")
        if self.nproc < 1:
            raise ConfigError(f"--nproc must be at least 1, got {self.nproc}")
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout must be positive, got {self.timeout_s}")
        if self.straggler_factor < 1.0:
            raise ConfigError(f"straggler factor must be at least 1, got {self.straggler_factor}")
        if self.reshuffle_every < 1:
            raise ConfigError(f"reshuffle_every must be at least 1, got {self.reshuffle_every}")
        if self.elastic and self.strategy in ("single", "ssgd"):
            raise ConfigError(f"--elastic needs a decentralized strategy (adpsgd, h-adpsgd): under "
                              f"{self.strategy} every step needs every learner")
        if self.min_learners is not None and self.min_learners < 1:
            raise ConfigError(f"--min-learners must be at least 1, got {self.min_learners}")

    @property
    def distributed(self) -> bool:
        """Whether any process group is needed at all."""
        return self.strategy != "single"

    def to_dict(self) -> dict[str, Any]:
        """Plain values (for the plan, the run log and workers' arguments)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DistConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error naming them."""
        return strict_from_dict(cls, data, "distributed option")

"""The members of a super-learner step together: one small collective before every step.

DDP's gradient allreduce needs every member at every step, so before each step
the members agree (one allreduce of a few integers on the super-learner's group)
on whether each has a batch, their total of real frames (the loss denominator),
whether each has the gossip delta in hand (applied by all at this step, so they
stay identical), whether any wants to pause for a checkpoint after this step, and
the newest membership version any has seen (the next gossip round begins in it on
every member, so they number their rounds alike).
A member whose piece ran out while others' have not takes an empty step (zero
gradient), so no data is dropped; when all are out, member 0 claims a piece for
each member and broadcasts them; when none is left, all stop together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from asrtrain.data.loader import Piece
from asrtrain.distributed.worksharing import EpochWork


@dataclass(frozen=True)
class Agreement:
    """What the members agreed before a step."""

    have: int       # members with a batch
    frames: int     # their real frames, together
    ready: int      # members with the gossip delta in hand
    pause: int      # the checkpoint to pause for after this step (its id; 0: none)
    version: int    # the newest membership version any member has seen (gossip rounds begin in it)


class Lockstep:
    """The collectives that keep one super-learner's members in step (main thread only)."""

    def __init__(self, group: Any, size: int, member: int, root: int, device: str) -> None:
        self.group, self.size, self.member, self.root, self.device = group, size, member, root, device

    def _ints(self, values: list[Any]) -> torch.Tensor:
        return torch.tensor([int(v) for v in values], dtype=torch.int64, device=self.device)

    def agree(self, have: bool, frames: int, ready: bool, pause: int, version: int) -> Agreement:
        """Sum the first three over the members; the pause and the membership version are the newest
        any member has seen."""
        import torch.distributed as dist

        t = self._ints([have, frames, ready])
        dist.all_reduce(t, group=self.group)
        p = self._ints([pause, version])
        dist.all_reduce(p, op=dist.ReduceOp.MAX, group=self.group)
        h, f, r = (int(v) for v in t.cpu())
        return Agreement(h, f, r, int(p[0]), int(p[1]))

    def claim(self, work: EpochWork, wait_more: Any = None) -> tuple[Piece | None, bool]:
        """Member 0 claims a piece for every member; returns (this member's, whether any got one).

        ``wait_more`` (elastic): member 0, finding none, waits for pieces handed out again.
        """
        import torch.distributed as dist

        t = self._ints([-1] * (3 * self.size))
        if self.member == 0:
            pieces: list[Piece] = []
            while True:
                while len(pieces) < self.size and (piece := work.claim()) is not None:
                    pieces.append(piece)
                if pieces or wait_more is None or not wait_more():
                    break
            for j, piece in enumerate(pieces):
                t[3 * j:3 * j + 3] = self._ints([piece.pos, piece.block, piece.start])
        dist.broadcast(t, src=self.root, group=self.group)
        pos, block, start = (int(v) for v in t[3 * self.member:3 * self.member + 3].cpu())
        mine = Piece(pos, block, start) if pos >= 0 else None
        return mine, int(t[0]) >= 0

    def shape(self, shape: tuple[int, int] | None) -> tuple[int, int]:
        """The (chunk, feature dim) of the batches, for a member that has seen none yet."""
        import torch.distributed as dist

        t = self._ints(list(shape or (0, 0)))
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        return int(t[0]), int(t[1])

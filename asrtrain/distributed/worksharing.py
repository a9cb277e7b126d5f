"""Work sharing: blocks of chunks handed out from a shared counter.

The epoch's blocks are taken in the loader's seeded order (the same for every
learner: :meth:`asrtrain.data.loader.ChunkLoader.block_order`), and position ``i``
of that order goes to whoever increments the counter
``ws/<epoch>`` (the c10d store's atomic ``add``) past ``i``. A fast super-learner
therefore does more of the epoch, nobody waits on a straggler, and the epoch ends
when the blocks run out. The members of a super-learner claim together: member 0
takes ``group_size`` positions at once and broadcasts the first on the
super-learner's group, member ``j`` trains on position ``first + j``. With one
super-learner (SSGD) that is exactly the epoch split evenly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from asrtrain.distributed.groups import Layout


class WorkQueue:
    """The blocks of one epoch, claimed from the store by the super-learners."""

    def __init__(self, store: Any, layout: Layout, super_group: Any, order: Sequence[int], epoch: int,
                 device: str = "cpu") -> None:
        self.store, self.layout, self.super_group = store, layout, super_group
        self.order = list(order)
        self.num_blocks = len(self.order)
        self.device = device  # where the broadcast's tensor lives (NCCL: the GPU)
        self.key = f"ws/{epoch}"
        self.claimed: list[int] = []
        self.handed_out = 0  # the counter as of this learner's last claim (all learners' blocks)

    def claim(self) -> int | None:
        """This member's next block id, or ``None`` when its position is past the end.

        With ``group_size`` > 1 this is a collective on the super-learner's group
        (every member must call it at the same time).
        """
        g = self.layout.group_size
        if g == 1:
            pos = int(self.store.add(self.key, 1)) - 1
            self.handed_out = min(pos + 1, self.num_blocks)
        else:
            import torch
            import torch.distributed as dist

            first = torch.zeros(1, dtype=torch.int64, device=self.device)
            if self.layout.member == 0:
                first[0] = int(self.store.add(self.key, g)) - g
            dist.broadcast(first, src=self.layout.ranks_of(self.layout.super_id)[0], group=self.super_group)
            pos = int(first.cpu()[0]) + self.layout.member
            self.handed_out = min(pos - self.layout.member + g, self.num_blocks)
        if pos >= self.num_blocks:
            return None
        block = int(self.order[pos])
        self.claimed.append(block)
        return block

    def iter_blocks(self) -> Iterator[int]:
        """Blocks one after another (``group_size`` 1 only: no collective involved)."""
        assert self.layout.group_size == 1, "members of a super-learner claim in lockstep"
        while (block := self.claim()) is not None:
            yield block

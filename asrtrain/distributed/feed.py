"""Feeding a learner its share of the epoch: claimed blocks, in lockstep inside a super-learner.

Super-learners take blocks from a shared counter (:mod:`asrtrain.distributed.worksharing`),
so a fast one does more of the epoch. A learner on its own is fed its claims as
they come; the members of a super-learner agree before every step
(:mod:`asrtrain.distributed.lockstep`) and stop together. Under ``--elastic`` a
learner out of work waits for blocks that learners which left were holding.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import torch

from asrtrain.data.loader import IGNORE_INDEX, real_frames
from asrtrain.distributed.base import Batches
from asrtrain.distributed.config import DistConfig
from asrtrain.distributed.groups import Layout
from asrtrain.distributed.heartbeat import CHECK_S, POLL_S, Heartbeat, own_client
from asrtrain.distributed.lockstep import Agreement, Lockstep
from asrtrain.distributed.membership import Membership, check_alive
from asrtrain.distributed.worksharing import EpochWork, Hand

log = logging.getLogger("asrtrain.distributed")


class WorkFeed:
    """One learner's batches from the shared work: claims, the lockstep, the elastic wait for more."""

    def __init__(self, store: Any, layout: Layout, cfg: DistConfig, rank: int, heartbeat: Heartbeat,
                 lockstep: Lockstep) -> None:
        self.layout, self.cfg, self.rank, self.heartbeat, self.lockstep = layout, cfg, rank, heartbeat, lockstep
        self.store = own_client(store)  # claims happen in the loader's prefetch thread
        self._members = Membership(self.store, layout, cfg.elastic, cfg.min_learners)
        self._rehanded: list[dict[str, Any]] = []  # pieces this (main) learner handed out again
        self.empty_steps = 0  # a member's steps without a batch this epoch

    def owner(self) -> int | None:
        """The rank claims are recorded under: only learners that may leave need it."""
        return self.rank if self.cfg.elastic else None

    def wait_more(self, work: EpochWork) -> Callable[[], bool] | None:
        """What a learner out of ``work`` waits on (``--elastic`` only)."""
        return (lambda: self._wait_for_more(work)) if self.cfg.elastic else None

    def _wait_for_more(self, work: EpochWork) -> bool:
        """Out of work under ``--elastic``: until pieces are handed out again (True) or the epoch is
        complete (False). The main learner sweeps what learners that left were holding."""
        members = self._members
        mine = self.layout.ranks_of(self.layout.super_id)  # a super-learner is out of work as one
        last_check = time.monotonic()
        while work.done() < work.num_blocks:
            self.heartbeat.touch()
            if work.new_again():
                work.set_idle(mine, False)
                if not work.sweeping():
                    return True
            work.set_idle(mine, True)
            members.refresh()
            if members.is_main:
                swept = work.sweep(members.live)
                if swept:
                    log.warning("rank %d: epoch %d: blocks handed out again (their learners left): %s",
                                self.rank, work.epoch, [p.block for p in swept])
                    self._rehanded.append({"epoch": work.epoch, "time": time.time(), "blocks": [p.block for p in swept]})
            if time.monotonic() - last_check > CHECK_S:
                check_alive(members, self.heartbeat)
                last_check = time.monotonic()
                if work.settled(members.live):  # the rest is in the hands of learners out of work
                    return False
            time.sleep(POLL_S * 10)
        return False

    def rehanded_events(self) -> list[dict[str, Any]]:
        """Blocks this learner handed out again since the last call, for the main learner's metrics."""
        out = [{"event": "blocks handed out again", **item} for item in self._rehanded]
        self._rehanded = []
        return out

    def alone(self, loader: Any, epoch: int, hand: Hand) -> Batches:
        """A super-learner of one: its claims as the loader drains them (no hoarding of blocks in the prefetch)."""
        for x, y, piece, end in loader.tagged(epoch, hand.feed(), claim_late=True):
            self.heartbeat.touch()
            hand.served(piece, end)
            yield x, y

    def in_lockstep(self, loader: Any, epoch: int, hand: Hand, ready: Callable[[], bool],
                    pending: Callable[[], int | None], agreed: Callable[[Agreement], None],
                    version: Callable[[], int]) -> Batches:
        """Batches of the members in step: an empty one for a member out of work, all stop together.

        Before each step the members agree on who has a batch, their frames, whether each
        holds the gossip delta (``ready``), the checkpoint and the membership version any has
        seen (``pending``, ``version``);
        ``agreed`` gets the agreement of every step taken. A member's short last batch of
        its pieces is held back (``carry``) and filled up by the next piece it is given,
        so its batches hold ``--batch``'s share whatever the block size; when no piece
        is left the held batches are the epoch's last step.
        """
        it: Any = iter(loader.tagged(epoch, list(hand.pieces))) if hand.pieces else None
        shape: tuple[int, int] | None = None
        carry: Any = None
        last = False  # no piece left for anyone: the held batches are stepped, then the epoch ends
        while True:
            self.heartbeat.touch()
            item = next(it, None) if it is not None else None
            if item is not None and not last and len(item[1]) < loader.batch_size:
                carry, item = item, None  # only the iterator's last batch is short
            if item is not None:
                shape = (int(item[0].shape[1]), int(item[0].shape[2]))
            agreement = self.lockstep.agree(item is not None, 0 if item is None else real_frames(item[1]), ready(),
                                            pending() or 0, version())
            if agreement.have == 0:
                if last:
                    return
                piece, any_piece = self.lockstep.claim(hand.work, hand.wait_more)
                if piece is not None:
                    hand.take(piece)
                    it, carry = iter(loader.tagged(epoch, [piece], carry=carry)), None
                elif not any_piece:  # the held batches are the last step
                    it, carry, last = (iter([carry]) if carry is not None else None), None, True
                else:  # pieces for the others only: this member keeps its held batch for its next piece
                    it = None
                continue
            if agreement.have < self.layout.group_size:
                shape = self.lockstep.shape(shape)
            agreed(agreement)
            if item is None:
                assert shape is not None
                self.empty_steps += 1
                hand.served(None)
                yield (torch.zeros((1, *shape), dtype=torch.float16),
                       torch.full((1, shape[0]), IGNORE_INDEX, dtype=torch.int64))
            else:
                hand.served(item[2], item[3])
                yield item[0], item[1]

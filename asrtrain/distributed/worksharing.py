"""Work sharing: the epoch's blocks handed out from a shared store, and what each learner holds.

The epoch's blocks are taken in the loader's seeded order (the same for every
learner: :meth:`asrtrain.data.loader.ChunkLoader.block_order`). Position ``i`` of
that order goes to whoever increments the counter ``ws/<epoch>/next`` (the c10d
store's atomic ``add``) past ``i``: a fast super-learner does more of the epoch,
nobody waits on a straggler, and the epoch ends when every block is done. Pieces
handed out again (what a stopped run had in hand, what a dead learner had not
finished) are taken first, each by the one learner whose ``add`` on its key comes
first. The members of a super-learner claim together: member 0 takes
``group_size`` pieces and broadcasts them on the super-learner's group.

:class:`Hand` is one learner's side: the pieces it was given and has not finished,
in order, the first one trained up to a known chunk (a batch that reaches into a
later piece finishes the ones before it). A run stopped at a step
boundary therefore knows exactly what is done, what is half done and what was
claimed but not started, so a resumed epoch trains every chunk once.

Under ``--elastic`` every claim records its owner, and a learner out of work waits
(idle) until the epoch is complete or work appears again: when every learner alive
is idle and pieces are neither finished nor held by one of them (their owner left
the job), the main learner *sweeps* them onto the again-list. A sweep and a claim
never cross: a learner leaves idle before it looks for a sweep, the sweeper marks
its sweep before it looks at who is idle.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import asdict, replace
from typing import Any

from asrtrain.data.loader import Piece


class EpochWork:
    """One epoch's work in the store: a counter of new positions, pieces handed out again, pieces done."""

    def __init__(self, store: Any, epoch: int, order: Sequence[int], owner: int | None = None) -> None:
        self.store, self.epoch, self.owner = store, epoch, owner  # owner: this rank, when claims are recorded
        self.order = [int(b) for b in order]
        self.num_blocks = len(self.order)
        self.key = f"ws/{epoch}"
        self._cursor = 0  # entries of the again-list this learner has seen taken
        self.handed_out = 0  # positions handed out to all learners, as of this learner's last claim

    def claim(self) -> Piece | None:
        """The next piece for this learner: one handed out again first, then a new position."""
        again = int(self.store.add(f"{self.key}/again", 0))
        while self._cursor < again:
            k, self._cursor = self._cursor, self._cursor + 1
            if int(self.store.add(f"{self.key}/again/{k}/taken", 1)) == 1:
                return self._owned(Piece(**json.loads(self.store.get(f"{self.key}/again/{k}"))))
        pos = int(self.store.add(f"{self.key}/next", 1)) - 1
        self.handed_out = min(pos + 1, self.num_blocks)
        if pos >= self.num_blocks:
            return None
        return self._owned(Piece(pos, self.order[pos]))

    def _owned(self, piece: Piece) -> Piece:
        if self.owner is not None:
            self.store.set(f"{self.key}/owner/{piece.pos}", json.dumps({"rank": self.owner, "start": piece.start}))
        return piece

    def new_again(self) -> bool:
        """Whether pieces were handed out again since this learner last looked."""
        return int(self.store.add(f"{self.key}/again", 0)) > self._cursor

    def set_idle(self, ranks: Sequence[int], idle: bool) -> None:
        """These learners (one, or the members of a super-learner) are out of work, or not any more."""
        for r in ranks:
            if idle:
                self.store.set(f"{self.key}/idle/{r}", "1")
            elif self.store.check([f"{self.key}/idle/{r}"]):
                self.store.delete_key(f"{self.key}/idle/{r}")

    def sweeping(self) -> bool:
        return self.store.check([f"{self.key}/sweeping"])

    def sweep(self, live: Sequence[int]) -> list[Piece]:
        """The main learner: if every learner alive is idle, hand out again what nobody alive holds."""
        self.store.set(f"{self.key}/sweeping", "1")
        try:
            if not self.store.check([f"{self.key}/idle/{r}" for r in live]):
                return []
            pieces = self.orphans(live)
            if pieces:
                self.hand_again(pieces)
            return pieces
        finally:
            self.store.delete_key(f"{self.key}/sweeping")

    def settled(self, live: Sequence[int]) -> bool:
        """Every learner alive is out of work and nothing is left to hand out: what is not finished is
        held by learners alive as the rest of their last batch (a batch carries over block boundaries),
        which they train once they stop waiting. Asked only when the epoch's blocks are not all done."""
        if not self.store.check([f"{self.key}/idle/{r}" for r in live]):
            return False
        n = int(self.store.add(f"{self.key}/again", 0))
        if any(int(self.store.add(f"{self.key}/again/{k}/taken", 0)) == 0 for k in range(n)):
            return False
        return not self.orphans(live)

    def orphans(self, live: Sequence[int]) -> list[Piece]:
        """Pieces handed out, not finished, not on the again-list, and whose owner is not alive."""
        n = int(self.store.add(f"{self.key}/again", 0))
        waiting = {json.loads(self.store.get(f"{self.key}/again/{k}"))["pos"] for k in range(n)
                   if int(self.store.add(f"{self.key}/again/{k}/taken", 0)) == 0}
        out = []
        for pos in range(min(int(self.store.add(f"{self.key}/next", 0)), self.num_blocks)):
            if pos in waiting or self.store.check([f"{self.key}/fin/{pos}"]):
                continue
            owner: dict[str, Any] = {"rank": None, "start": 0}  # claimed by one that left before saying so
            if self.store.check([f"{self.key}/owner/{pos}"]):
                owner = json.loads(self.store.get(f"{self.key}/owner/{pos}"))
            if owner["rank"] not in live:
                out.append(Piece(pos, self.order[pos], int(owner["start"])))
        return out

    def finish(self, piece: Piece) -> None:
        """``piece`` is trained to the end of its block."""
        self.store.set(f"{self.key}/fin/{piece.pos}", "1")
        self.store.add(f"{self.key}/done", 1)

    def done(self) -> int:
        """Positions of the epoch trained to the end, by all learners."""
        return int(self.store.add(f"{self.key}/done", 0))

    def hand_again(self, pieces: Sequence[Piece]) -> None:
        """Put ``pieces`` on the again-list (one learner at a time appends: the main one)."""
        n = int(self.store.add(f"{self.key}/again", 0))
        for k, piece in enumerate(pieces, n):
            self.store.set(f"{self.key}/again/{k}", json.dumps(asdict(piece)))
        self.store.add(f"{self.key}/again", len(pieces))

    def snapshot(self, live: Sequence[int] | None = None) -> dict[str, Any]:
        """The store's side of the epoch (read while every learner is paused); with ``live`` (elastic),
        the pieces of learners that left go on the again-list too."""
        n = int(self.store.add(f"{self.key}/again", 0))
        open_again = [json.loads(self.store.get(f"{self.key}/again/{k}")) for k in range(n)
                      if int(self.store.add(f"{self.key}/again/{k}/taken", 0)) == 0]
        if live is not None:
            open_again += [asdict(p) for p in self.orphans(live)]
        return {"epoch": self.epoch, "next": min(int(self.store.add(f"{self.key}/next", 0)), self.num_blocks),
                "done": self.done(), "again": open_again}

    def restore(self, state: dict[str, Any]) -> None:
        """Set the store's side of a fresh epoch from :meth:`snapshot` (the main learner, before any claim)."""
        self.store.add(f"{self.key}/next", int(state["next"]))
        self.store.add(f"{self.key}/done", int(state["done"]))
        self.hand_again([Piece(**p) for p in state["again"]])


class Hand:
    """The pieces one learner was given and has not finished, in order; the first one is in progress.

    Progress is counted at steps, not at batches served: a consumer that looks one
    batch ahead (a device prefetch) must not make a batch count as trained.
    """

    def __init__(self, work: EpochWork, block_length: Any, pieces: Sequence[Piece] = (),
                 wait_more: Any = None) -> None:
        self.work = work
        self.block_length = block_length
        self.wait_more = wait_more  # elastic: blocks until work appears again (True) or the epoch is complete
        self.pieces: list[Piece] = list(pieces)
        self.finished = 0  # pieces this learner finished this epoch
        self._served: deque[tuple[Piece, int] | None] = deque()

    def feed(self) -> Iterator[Piece]:
        """Pieces for the loader: those in hand first (resumed), then new claims, kept in hand."""
        yield from list(self.pieces)
        while True:
            while (piece := self.work.claim()) is not None:
                self.pieces.append(piece)
                yield piece
            if self.wait_more is None or not self.wait_more():
                return

    def take(self, piece: Piece) -> None:
        """A piece given from outside (a super-learner's member 0 claimed it for this member)."""
        self.pieces.append(piece)

    def served(self, piece: Piece | None, end: int = 0) -> None:
        """A batch went to the loop (``None``: an empty lockstep step); it counts once its step is done."""
        self._served.append(None if piece is None else (piece, end))

    def stepped(self) -> None:
        """The oldest served batch was trained: finish the pieces it went past, move its last one on.

        A batch carries over block boundaries: it may end in a later piece than the
        one in progress, which is then trained to its end (pieces are served in order).
        """
        item = self._served.popleft() if self._served else None
        if item is None:
            return
        piece, end = item
        while self.pieces and self.pieces[0].pos != piece.pos:
            self.work.finish(self.pieces.pop(0))
            self.finished += 1
        assert self.pieces, "pieces are trained in the order served"
        if end >= self.block_length(piece.block):
            self.work.finish(self.pieces.pop(0))
            self.finished += 1
        else:
            self.pieces[0] = replace(self.pieces[0], start=end)

    def pause(self) -> list[Piece]:
        """Forget batches served but not trained (they are served again); returns the pieces in hand."""
        self._served.clear()
        return list(self.pieces)

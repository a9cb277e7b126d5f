"""Held-out evaluation: loss per real frame and frame accuracy, on every learner at once.

Learners whose weights agree (one learner, SSGD, or after the global average) split
the held-out set: batch ``i`` goes to learner ``i mod world``, and the strategy's
``all_sum`` of their figures covers every chunk once. Learners that keep their own
weights (no global average) each evaluate all of it, each in its own slot: the
figure reported is the main learner's (the weights saved), with every learner's beside.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from asrtrain.core.errors import InputError
from asrtrain.data.archive import Archive
from asrtrain.data.loader import IGNORE_INDEX
from asrtrain.data.shards import open_archive as open_any
from asrtrain.data.streams import InputSelection, whole_input
from asrtrain.distributed.base import Strategy
from asrtrain.train.step import autocast, frame_loss


def open_archive(path: Path, role: str) -> Archive:
    """An archive with targets (training needs them), or an error naming the file."""
    archive = open_any(path)
    if archive.num_pdfs is None:
        raise InputError(f"the {role} archive has no targets (made without --ali)", path)
    return archive


def archive_dims(archive: Archive) -> tuple[int, int]:
    """(feature dimension, pdfs) of an archive opened by :func:`open_archive`."""
    assert archive.num_pdfs is not None, "open_archive checked the targets"
    return archive.feat_dim, archive.num_pdfs


def batch_problem(archive: Archive, batch: int) -> str | None:
    """Why ``batch`` does not fit ``archive`` (None when it does): a step larger than the
    archive would scale the learning rate for chunks that do not exist."""
    if batch <= archive.num_chunks:
        return None
    return (f"--batch {batch} chunks per step, but the archive holds {archive.num_chunks} chunks: "
            f"not one full step per epoch (use --batch {archive.num_chunks} or less)")


def check_batch(archive: Archive, batch: int) -> None:
    """Stop before training when :func:`batch_problem` has something to say."""
    problem = batch_problem(archive, batch)
    if problem:
        raise InputError(problem, archive.path)


def open_held_out(path: Path | None, train: Archive,
                  chosen: InputSelection | None = None) -> tuple[Archive, InputSelection] | None:
    """The held-out archive and the model's input in it (``chosen``, the training archive's, by
    name; default its whole input), checked against the training input's width and pdfs."""
    if path is None:
        return None
    valid = open_archive(path, "held-out")
    chosen = chosen or whole_input(train)
    picked = chosen.on(valid, "held-out")
    if (picked.dim, valid.num_pdfs) != (chosen.dim, train.num_pdfs):
        what = "feat_dim" if not chosen.by_name else f"{'+'.join(chosen.streams)} width"
        raise InputError(f"held-out archive has {what} {picked.dim} and {valid.num_pdfs} pdfs; "
                         f"the training archive has {chosen.dim} and {train.num_pdfs}", path)
    check_same_tree(valid, train, path)
    return valid, picked


def check_same_tree(valid: Archive, train: Archive, path: Path) -> None:
    """Targets are pdfs of one tree: another tree with as many pdfs names other states, and
    the held-out loss and accuracy would measure nothing. Archives record their tree."""
    ours, theirs = train.header.get("tree_id"), valid.header.get("tree_id")
    if ours != theirs:
        def name(tree: Any) -> str:
            return f"tree {tree}" if tree else "no tree (phone or unrecorded targets)"
        raise InputError(f"held-out archive's targets are pdfs of {name(theirs)}, the training "
                         f"archive's of {name(ours)}: build both from one lang's alignments", path)


def batch_logits(model: nn.Module, archive: Archive, start: int, stop: int, device: torch.device,
                 dtype: torch.dtype | None, columns: list[int] | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's logits on chunks ``[start, stop)`` of the archive (its ``columns``, default
    all) and their targets (int64; padding negative), both on ``device``."""
    feats, targets = archive.read_chunks(start, stop)
    if columns is not None:
        feats = feats[..., columns]
    x = torch.as_tensor(feats).to(device=device, dtype=torch.float32)
    y = torch.as_tensor(targets).to(device=device, dtype=torch.int64)
    with autocast(device, dtype):
        return model(x), y


def evaluate(model: nn.Module, archive: Archive, batch: int, device: torch.device,
             dtype: torch.dtype | None, rank: int = 0, world_size: int = 1,
             columns: list[int] | None = None) -> list[float]:
    """[summed loss, real frames, correct frames] over batches ``rank::world_size`` of the archive
    (``columns``: the model's input columns, default all)."""
    was_training = model.training
    model.eval()
    loss_sum, frames, correct = 0.0, 0, 0
    starts = list(range(0, archive.num_chunks, batch))[rank::world_size]
    with torch.no_grad():
        for start in starts:
            logits, y = batch_logits(model, archive, start, min(start + batch, archive.num_chunks),
                                     device, dtype, columns)
            y[y < 0] = IGNORE_INDEX
            ls, n, c = frame_loss(logits, y)
            loss_sum, frames, correct = loss_sum + float(ls), frames + int(n), correct + int(c)
    model.train(was_training)
    return [loss_sum, float(frames), float(correct)]


def held_out(model: nn.Module, archive: Archive, strategy: Strategy, batch: int,
             device: torch.device, dtype: torch.dtype | None, columns: list[int] | None = None) -> list[float]:
    """This learner's part of the held-out figures, to be summed over all learners."""
    s = strategy
    if s.weights_agree:
        return evaluate(model, archive, batch, device, dtype, s.rank, s.world_size, columns)
    slots = [0.0] * (3 * s.world_size)
    slots[3 * s.rank:3 * s.rank + 3] = evaluate(model, archive, batch, device, dtype, columns=columns)
    return slots


def main_value(strategy: Strategy, value: float) -> float:
    """The main learner's ``value`` on every learner, bit for bit, for decisions all must share.

    The others add 0.0, and a sum of one number and zeros is that number exactly in
    whatever order the allreduce adds, so no learner can decide on a value rounded
    differently (or, without a global average, on its own weights' loss).
    """
    if strategy.world_size == 1:
        return value
    return strategy.all_sum([value if strategy.is_main else 0.0])[0]


def figures(sums: list[float]) -> dict[str, float]:
    """Loss per real frame and frame accuracy from :func:`evaluate`'s (summed) totals."""
    loss_sum, frames, correct = sums
    return {"valid_loss": loss_sum / max(frames, 1), "valid_acc": correct / max(frames, 1),
            "valid_frames": int(frames)}


def held_out_row(sums: list[float]) -> dict[str, Any]:
    """The epoch row's held-out figures from the summed :func:`held_out` values."""
    if len(sums) == 3:
        return figures(sums)
    learners = [figures(sums[i:i + 3]) for i in range(0, len(sums), 3)]
    return {**learners[0], "valid_loss_by_learner": [round(f["valid_loss"], 5) for f in learners]}

"""Refusals before a study runs anything: options that cannot work, with the reason and the numbers.

A study of hours that fails in its tenth run on an option the first line could have
refused wastes the hours. So every study checks all of its runs up front: each batch
splits evenly over the simulated learners (and they into super-learners), gossip has at
least two replicas to gossip between, and the corpus gives the largest batch the steps an
epoch the claim needs (``min_steps``, 100 by default: SWB-300 at batch 8192 gave about
630; the demo's corpus gave 6 at 2048, which could not decide anything).
"""

from __future__ import annotations

from pathlib import Path

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.study.simulate import STRATEGIES

#: Steps an epoch the largest batch of a study must take (the issue's floor; SWB-300 at 8192: ~630).
MIN_STEPS = 100


def check_learners(strategy: str, learners: int, group: int = 1) -> None:
    """Gossip needs two replicas at least: ADPSGD two learners, H-ADPSGD two super-learners."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy {strategy!r}: choose from {', '.join(STRATEGIES)}")
    if strategy == "adpsgd" and learners < 2:
        raise ConfigError(f"adpsgd over {learners} learner(s): gossip needs 2 learners at least (--learners)")
    if strategy == "h-adpsgd":
        if group < 1 or learners % group:
            raise ConfigError(f"h-adpsgd: {learners} learners do not split into super-learners of {group} (--group)")
        if learners // group < 2:
            raise ConfigError(f"h-adpsgd over {learners} learners in super-learners of {group}: "
                              f"{learners // group} super-learner(s), gossip needs 2 at least")


def check_batches(batches: list[int], learners: int) -> None:
    """Every batch is a whole number of chunks per learner."""
    bad = [b for b in batches if b % learners]
    if bad:
        raise ConfigError(f"batch(es) {', '.join(map(str, bad))} not a multiple of {learners} learners: "
                          f"each learner takes batch/{learners} chunks a step (--batches, --learners)")


def check_steps(archive: Path, chunks: int, batches: list[int], min_steps: int = MIN_STEPS) -> None:
    """The largest batch takes ``min_steps`` full steps an epoch of the archive."""
    if min_steps <= 0 or not batches:
        return
    largest = max(batches)
    steps = chunks // largest
    if steps < min_steps:
        raise InputError(f"{chunks} chunks make {steps} steps an epoch at batch {largest}, fewer than the "
                         f"{min_steps} required (--min-steps): use batches up to {chunks // min_steps}, or a "
                         f"corpus of {largest * min_steps} chunks at least", archive)


def check_multipliers(values: list[float]) -> None:
    bad = [v for v in values if not v > 0]
    if bad:
        raise ConfigError(f"rate multipliers must be positive, got {', '.join(map(str, bad))}")


def corpus_size(archive: Path) -> tuple[int, int]:
    """(chunks, pdfs) of a training archive (an epoch's chunks; ln(pdfs) is the uniform guess's loss)."""
    from asrtrain.train.validate import archive_dims, open_archive

    opened = open_archive(archive, "training")
    return opened.num_chunks, archive_dims(opened)[1]


def check_study(archive: Path, strategies: list[str], batches: list[int], learners: int, group: int = 1,
                min_steps: int = MIN_STEPS) -> tuple[int, int]:
    """Every refusal of a study's options, before anything runs; returns the archive's (chunks, pdfs)."""
    for strategy in strategies:
        check_learners(strategy, learners, group)
    if any(s != "ssgd" for s in strategies):
        check_batches(batches, learners)
    chunks, pdfs = corpus_size(archive)
    check_steps(archive, chunks, batches, min_steps)
    return chunks, pdfs

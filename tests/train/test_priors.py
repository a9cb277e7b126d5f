"""train/priors.py: which training frames the mean posterior is taken over."""

from __future__ import annotations

from asrtrain.train.priors import spread_batches


def test_all_batches_when_the_archive_is_small() -> None:
    assert spread_batches(num_chunks=100, chunk=21, batch=32, max_frames=10_000) == [0, 32, 64, 96]


def test_batches_spread_evenly_through_a_large_archive() -> None:
    starts = spread_batches(num_chunks=100_000, chunk=21, batch=256, max_frames=250_000)
    assert len(starts) == 47                             # ceil(250,000 / (256 x 21)) batches
    assert starts[0] == 0 and starts[-1] > 95_000        # from the start to the end, not a prefix
    gaps = {b - a for a, b in zip(starts, starts[1:], strict=False)}
    assert all(g % 256 == 0 for g in gaps) and max(gaps) - min(gaps) <= 256

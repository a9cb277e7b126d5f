"""A process's memory: its peak so far, and its freed heap handed back (glibc's ``malloc_trim``).

glibc raises its mmap threshold each time a mapped block is freed (up to 32 MB), so after the
first such free, arrays below that size come from the heap. A long loop that frees large
arrays while keeping small objects allocated between them (the aligner: an utterance's
likelihood matrices freed, its alignment kept; a speaker's fMLLR statistics freed, its
transform kept) leaves the freed space pinned inside the heap, where glibc never returns it
by itself: an alignment job's resident memory grew pass after pass with nothing live to show
for it. ``malloc_trim`` returns every free page, wherever it lies. Called between passes and
every few hundred utterances it costs nothing measurable; fixing the mmap threshold instead
(``mallopt``) kept memory as low but made the aligner 27% slower (every large array then
page-faults in afresh; docs/bench_scale/scale.md).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable


def peak_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux counts ``ru_maxrss`` in KB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, looked up once (None where the C library has none)."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):   # not glibc
        return None


def release_memory() -> None:
    """Give the C heap's free pages back to the system now; nothing where the C library is
    not glibc. Also what keeps a graph step's freed OpenFst heap out of the next step's peak."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)

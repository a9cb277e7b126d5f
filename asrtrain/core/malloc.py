"""Hand a process's freed heap back to the system (glibc's ``malloc_trim``).

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


def release_memory() -> None:
    """Give the C heap's free pages back to the system now; nothing where the C library is
    not glibc. Also what keeps a graph step's freed OpenFst heap out of the next step's peak."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):   # not glibc
        pass

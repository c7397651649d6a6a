"""Process-wide settings for the long-running commands (``run``, ``dump``).

Decoding allocates small objects by the million per minute (the values of columns decoded
as objects, the row tuples ``dump`` makes), and none of them can form a reference cycle.
CPython's cycle collector counts them all: with its default thresholds a young collection runs
every 700 allocations, and the older generations, which hold the rows of the batch being
built, are scanned again and again. Measured on the standard benchmark workload (before rows
events were decoded into blocks), building row changes while a batch is alive was four times
slower with the defaults than without collection. ``tune_gc`` freezes what start-up allocated
(imports, configuration) out of collection and makes collections rarer; cycles are still
collected. ``held_gc`` turns collection off until then: ``run``'s imports allocate about
80,000 objects, none of them garbage, and the default thresholds scanned them in young and
full collections that cost about a tenth of its start-up (docs/performance.md, Start-up).

Arrow's buffers come from the system allocator: pyarrow's default pool (mimalloc in current
wheels) keeps freed pages, and a daemon that converts and encodes a batch after another held
about 50 MB more at its peak for it on the standard benchmark (278 MB against 226 MB, no
faster). Arrow fixes its pool when it is first imported, so ``cli`` sets
``ARROW_DEFAULT_MEMORY_POOL=system`` before any import (unless the environment chose).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["GC_THRESHOLDS", "held_gc", "tune_gc"]

GC_THRESHOLDS = (50_000, 20, 100)


@contextlib.contextmanager
def held_gc() -> Iterator[None]:
    """No cycle collection inside (a command's imports), then ``tune_gc`` without its
    collection, however it ends: the imports leave little garbage (``run``'s: about 900
    objects, 280 KiB, most of them the classes that ``dataclass(slots=True)`` made anew),
    which stays frozen for the process's life, and a full collection of everything they
    allocated took 45 ms, a tenth of ``run``'s way to its first binlog request."""
    gc.disable()
    try:
        yield
    finally:
        tune_gc(collect=False)


def tune_gc(*, collect: bool = True) -> None:
    """Apply the collector settings above (once start-up is done), collection on again;
    ``collect``: free what start-up left unreachable first."""
    if collect:
        gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    gc.enable()

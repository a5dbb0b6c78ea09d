"""Pausing the cyclic GC around work that allocates many acyclic objects and keeps them.

In the domain because the builder and the fold pause it, and the store's reads too (and neither
may import the other): the collector's switch is one for the process, so its pauses must be
counted in one place.

Why a count: each pause used to read the switch, turn it off, and turn it back on only if it
had found it on. With builds and reads on several threads (a runtime's worker pool) that broke:
a thread read "off" during another's pause, that pause ended and turned the GC on, then the
first thread turned it off and, having found it off, never turned it on again: the GC stayed off
for the life of the process (4 threads pausing in a loop: off within seconds), and the cycles
later runs left behind were never collected. The first pause to end also turned the GC on under
the others' feet. Now the first pause of the process turns it off and the last one to end turns
it back on, if it was on; pauses nest, in a thread and across threads.

Why a pause that ends under others collects the young generations: a pool of threads building
back to back always has some pause open, so the GC, off from the first pause to the last, never
ran (4 threads building for 15 s: 1 collection, against 523 on one thread), and the cycles the
runtime's own code left (a build leaves none) piled up. A thread whose pauses end while others'
go on collects what the interpreter would have collected by then: generation 0, or 1 when its
count is past its threshold too, only once generation 0's count is past its threshold (so no
more often than the GC would run).

Why generation 2 too, by the interpreter's rule: a pool that always builds never has a last
pause, so a full collection that waited for it never came, and the cycles the runtime's code had
kept long enough to be promoted to generation 2 were never freed (4 threads building back to
back, ``scripts/measure_gc_under_pool.py --mode rebuild``: 1 full collection in 55 s and the
dropped agents in memory rising from 63k to 401k, RSS with them). CPython (3.11/3.12,
``gc_collect_generations``) collects generation 2 when its count is past its threshold AND the
objects promoted into it since the last full collection ("long-lived pending") are at least a
quarter of those that survived that collection ("long-lived total"): a full collection re-scans
the whole heap, the large states the pauses exist to spare among it, so it comes only once the
heap has grown by a quarter. Those two numbers are the interpreter's own and not readable from
Python, so the pauses keep an estimate of them: the survivors of each generation-1 collection
they run (the young objects counted before it, less what it found unreachable) are the pending
ones, and the size of generation 2 after a full collection is the total, read again after a full
collection the pauses did not run (the GC's own between pauses, a ``gc.collect()``). The
estimate misses what the GC's own young collections promoted between pauses, so it may come
later than the interpreter would, never earlier.

A child forked during another thread's pause gets its GC back: that thread's pause never ends
in the child, where only the forking thread exists.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading
from collections.abc import Iterator

from contextfold.domain.fork_locks import fork_safe_lock

__all__ = ["paused_gc"]

_PAUSES: dict[int, int] = {}
"""Thread id -> how many pauses that thread is inside (no entry: none)."""
_was_enabled = False
"""Whether the GC was on when the first of the current pauses began (turned on again after the
last). False when no pause is on."""
_long_lived_total = 0
"""Objects in generation 2 after the last full collection (the interpreter's ``long_lived_total``,
estimated); read again when ``_full_collections_seen`` is behind the GC's count."""
_long_lived_pending = 0
"""Objects the pauses' generation-1 collections promoted to generation 2 since then (the
interpreter's ``long_lived_pending``, estimated)."""
_full_collections_seen = -1
"""How many full collections the process had run when ``_long_lived_total`` was read."""


def _renew_in_child(lock_was_held: bool = False) -> None:
    """In a forked child: drop the pauses of the parent's other threads (they never end here)
    and, when none of this thread's is left, turn the GC back on if the pauses had turned it
    off. With ``lock_was_held`` (``_LOCK``'s ``on_held``), a parent's thread was counting under
    the lock: its pause may have begun or ended by half."""
    global _was_enabled
    me = threading.get_ident()
    mine = _PAUSES.get(me)
    if not lock_was_held and not _PAUSES.keys() - {me}:
        return
    _PAUSES.clear()
    if mine:
        _PAUSES[me] = mine
    elif _was_enabled:
        gc.enable()
        _was_enabled = False


_LOCK = fork_safe_lock(functools.partial(_renew_in_child, True))
os.register_at_fork(after_in_child=_renew_in_child)


def _begin() -> None:
    global _was_enabled
    me = threading.get_ident()
    with _LOCK:
        if not _PAUSES:
            _was_enabled = gc.isenabled()
            gc.disable()
        _PAUSES[me] = _PAUSES.get(me, 0) + 1


def _end() -> None:
    global _was_enabled, _long_lived_pending
    me = threading.get_ident()
    with _LOCK:
        depth = _PAUSES.pop(me, 1) - 1
        if depth:
            _PAUSES[me] = depth
            return
        if not _PAUSES and _was_enabled:
            gc.enable()
            _was_enabled = False
            return
        due = _due_generation() if _PAUSES and _was_enabled else None
    if due is None:
        return
    young = len(gc.get_objects(0)) + len(gc.get_objects(1)) if due == 1 else 0
    found = gc.collect(due)  # outside the lock: a finalizer the collection runs may pause the GC itself
    with _LOCK:
        if due == 1:
            _long_lived_pending += max(young - found, 0)
        elif due == 2:
            _read_long_lived_total()


def _due_generation() -> int | None:
    """The generation the interpreter would collect now were the GC on, or None when generation
    0's count is not past its threshold (or the thresholds turn collection off). Called under
    ``_LOCK``."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    if not thresholds[0] or counts[0] <= thresholds[0]:
        return None
    if gc.get_stats()[2]["collections"] != _full_collections_seen:
        _read_long_lived_total()  # a full collection the pauses did not run: count again from it
    if counts[2] > thresholds[2] and _long_lived_pending >= _long_lived_total // 4:
        return 2  # CPython skips generation 2 while pending < total / 4
    return 1 if counts[1] > thresholds[1] else 0


def _read_long_lived_total() -> None:
    """After a full collection: what survived it is the total, nothing is pending. Called under
    ``_LOCK``; costs a pass over generation 2, once per full collection (itself such a pass)."""
    global _long_lived_total, _long_lived_pending, _full_collections_seen
    _long_lived_total = len(gc.get_objects(2))
    _long_lived_pending = 0
    _full_collections_seen = gc.get_stats()[2]["collections"]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic GC while folding many events, building or reading a run (on again after
    the last pause of the process ends, if it was on).

    Why: a fold allocates several acyclic objects per event and keeps most of
    them, so the generational GC keeps promoting and re-scanning a growing
    heap: on a 20k-event fold it cost ~40% of the time (the store's reads pause
    it for the same reason). Nothing the fold allocates needs the cycle
    collector; pausing changes no result.

    A generator, not a class with ``__exit__`` (which runs ~0.1% fewer instructions per build):
    the generator's end allocates after ``_end`` turns the collector back on, so the collection
    the pause's allocations made due runs inside the pause's caller, the build that made them.
    With the class it ran at the caller's next allocation instead, wherever that was (in the
    benchmark, the next build or the loop around it): no less collecting, only the build's own
    figures without it.
    """
    _begin()
    try:
        yield
    finally:
        _end()

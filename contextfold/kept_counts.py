"""Folds of a run read the token counts the store kept, and keep what they had to tokenize.

Why here (beside ``api``): it joins the store's rows (``store/token_counts.py``) and the
process's counters (``projections/tokens.py``), and the layers below may not know each other.
See ``store/token_counts.py`` for why the counts are kept at all.

Only a fold that tokenized at least ``KEEP_AFTER`` texts keeps them: a cold fold (a new process,
a replay, an audit). An agent loop's per-turn fold of a few new events keeps none; it would pay
a write transaction per turn to save microseconds, and the next cold fold keeps them anyway.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from weakref import WeakKeyDictionary

from contextfold.projections.tokens import COUNTS_VERSION, counted_texts, get_counter
from contextfold.store.event_store import EventStore
from contextfold.store.token_counts import keep_counts, kept_counts

__all__ = ["KEEP_AFTER", "counts_kept"]

KEEP_AFTER = 32
"""A fold that tokenized fewer texts than this keeps none."""

_LOADED: WeakKeyDictionary[EventStore, set[str]] = WeakKeyDictionary()
"""Per store, the runs whose kept counts it has given the counters."""

_LOADED_RUNS = 4096
"""Runs whose kept counts a store remembers having read (then it starts over: a server folding
many runs reads a run's counts again at worst)."""


@contextmanager
def counts_kept(store: EventStore, run_id: str) -> Iterator[None]:
    """Around a fold of ``run_id``: the run's kept counts given to the process's counters (the
    first time this store folds the run), and what the fold tokenized kept after it succeeds."""
    loaded = _LOADED.setdefault(store, set())
    if run_id not in loaded:
        for encoding, rows in kept_counts(store, run_id, COUNTS_VERSION).items():
            counter = get_counter(encoding)
            if counter.encoding_name == encoding:  # an encoding this process cannot load is skipped
                counter.preload(rows)
        if len(loaded) >= _LOADED_RUNS:
            loaded.clear()
        loaded.add(run_id)
    with counted_texts() as counted:
        yield
    if len(counted) >= KEEP_AFTER:
        keep_counts(store, run_id, COUNTS_VERSION, counted)

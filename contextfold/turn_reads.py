"""A run's ``context_built`` records, read from the store without folding the run: a turn's
(:meth:`contextfold.api.Run.records`), and the encoding the first names (:func:`run_encoding`).

Apart from :mod:`contextfold.rebuild_api` (which re-exports them) because that module imports the
builder, and reading records (``Run.records``, a usage report's check) or folding the run
(``Run.state``, ``show call://...``) needs no builder: a process that records events and reads
its records back paid ~0.3 s of CPU for it (``tests/unit/test_library_light_imports.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from contextfold.domain.checked import checked_turn
from contextfold.domain.events import ContextBuilt
from contextfold.domain.manifest import manifest_encoding

if TYPE_CHECKING:
    from contextfold.api import Run

__all__ = ["run_encoding", "turn_keys", "turn_start"]


def turn_start(run: Run, turn: int) -> int:
    """The position after which ``turn`` (checked: ``checked_turn``) has its records: its previous
    model response (a build of turn N folds N-1 responses), 0 for the first turn."""
    return run.store.events.nth_position(run.run_id, "model_response", turn - 1) or 0


def turn_keys(run: Run, turn: int, keep: Sequence[str] | None) -> list[ContextBuilt]:
    """The records of ``turn`` (:meth:`Run.records`), each with its manifest cut to the keys
    ``keep`` (None: whole); the run's other records are read for their turn only."""
    turn = checked_turn(turn)
    found = run.store.events.turn_records(run.run_id, turn, after=turn_start(run, turn), keep=keep)
    return [r.event for r in found if isinstance(r.event, ContextBuilt)]


def run_encoding(run: Run) -> str | None:
    """The encoding the run's first context_built record names (None: no record yet, or one that
    names none), read without folding the run: two small queries.

    Why the first record's: once a build is recorded its encoding is the run's, so every later
    fold of the run (a replay, a resume or hand-off on another worker, ``--turn N``) counts as
    that build counted, instead of with whatever this machine can load
    (:mod:`contextfold.projections.recorded_encoding`)."""
    events = run.store.events
    position = events.nth_position(run.run_id, "context_built", 1)
    if position is None:
        return None
    found = events.record_keys(run.run_id, position, _ENCODING_KEYS)  # not the record's other lines
    record = found.event if found else None
    return manifest_encoding(record.manifest) if isinstance(record, ContextBuilt) else None


_ENCODING_KEYS = ("encoding",)
"""The key of a record's manifest ``manifest_encoding`` reads."""

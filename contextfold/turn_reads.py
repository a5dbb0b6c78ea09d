"""A turn's ``context_built`` records, read from the store (:meth:`contextfold.api.Run.records`).

Apart from :mod:`contextfold.rebuild_api` (which re-exports :func:`turn_keys` and reads through
:func:`turn_start`) because that module imports the builder and the folds, and reading a turn's
records (``Run.records``, a usage report's check) needs neither: a process that records events
and reads its records back paid ~0.3 s of CPU for them
(``tests/unit/test_library_light_imports.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from contextfold.domain.checked import checked_turn
from contextfold.domain.events import ContextBuilt

if TYPE_CHECKING:
    from contextfold.api import Run

__all__ = ["turn_keys", "turn_start"]


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

"""What a replay reports: a turn rebuilt from the log beside its first ``context_built`` record.

Kept apart from :mod:`contextfold.api` (which runs the rebuild) so that module stays about
wiring the store to the projections; the comparison and its wording live here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from contextfold.domain.events import ContextBuilt
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import ContextManifest
from contextfold.domain.version import BUILDER
from contextfold.projections.unicode_pins import reclassified_characters, unicode_database

__all__ = ["ReplayReport", "first_difference", "recorded_run_id", "unicode_note"]


@dataclass(frozen=True)
class ReplayReport:
    """A turn rebuilt from the log beside the ``context_built`` record it was checked against (the
    turn's first, unless ``Run.replay(record=...)`` named another)."""

    turn: int
    ok: bool
    differences: tuple[str, ...]
    recorded: ContextBuilt
    rebuilt: ContextManifest
    rebuilt_by: str = BUILDER
    """The contextfold that rebuilt the turn (``recorded.builder`` names the one that built it)."""
    unicode_note: str | None = None
    record: int = 1
    """Which of the turn's records ``recorded`` is (1-based, in log order)."""
    records: int = 1
    """How many ``context_built`` records the turn holds."""
    """On a difference, when the log holds characters Python 3.11, 3.12 and 3.13 classify
    differently: that a record made under another Python may differ there (:func:`unicode_note`)."""

    @property
    def builder_note(self) -> str | None:
        """Why a difference may not come from the log: the record was made by another builder
        (or does not say which). None when the same builder made both."""
        if self.recorded.builder == self.rebuilt_by:
            return None
        made = (f"recorded by {self.recorded.builder}" if self.recorded.builder is not None
                else "the record does not name its builder")
        return (f"{made}, rebuilt by {self.rebuilt_by}: a builder upgrade can change a request "
                "without the log changing")


def unicode_note(events: Iterable[RecordedEvent]) -> str | None:
    """What to tell an auditor whose replay differs over a log that holds letters or digits Unicode
    assigned after 14.0 (``unicode_pins.reclassified_characters``), else None.

    Why: the record names the contextfold that built it, not the interpreter, and the same
    contextfold on Python 3.11 (Unicode 14.0) and 3.13 (15.1) splits such text into other words
    and log lines (``\\b``, ``\\w``): without this the auditor saw a bare MISMATCH and could not
    tell an altered log from another Python."""
    count, first = 0, None
    for recorded in events:
        found = reclassified_characters(recorded.event.model_dump_json())
        if found and first is None:
            first = (found[0], recorded.position)
        count += len(found)
    if first is None:
        return None
    char, position = first
    return (f"the log holds {count} characters (the first: U+{ord(char):04X} at position {position}) "
            "that Unicode assigned after 14.0 and that Python 3.11 (Unicode 14.0), 3.12 (15.0) and "
            "3.13 (15.1) classify differently as letters or digits: a record made under another "
            f"Python can differ there without the log changing (this rebuild: {unicode_database()})")


def recorded_run_id(record: ContextBuilt, run_id: str) -> str:
    """The run ``record`` was built in (its manifest's ``run_id``), else ``run_id``.

    A run exported with ``events --json`` and imported under another name keeps its
    ``context_built`` records as they were: the request they hash names the old run in its
    refs (``event://OLD/5``) and its request id. A rebuild of a recorded turn reproduces what
    the model saw, so it folds the log under that name; without it ``replay --verify`` of every
    recorded turn of the copy was a MISMATCH though nothing in the log differed."""
    name = record.manifest.get("run_id")
    return name if isinstance(name, str) and name else run_id


def first_difference(a: Any, b: Any, path: str = "manifest") -> str:
    if type(a) is not type(b):
        return f"{path}: recorded {a!r} != rebuilt {b!r}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return first_difference(a.get(key), b.get(key), f"{path}.{key}")
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
        if len(a) != len(b):
            return f"{path}: recorded {len(a)} items != rebuilt {len(b)} items"
    return f"{path}: recorded {a!r} != rebuilt {b!r}"

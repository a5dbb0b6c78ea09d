"""Which request a usage report counts: one rule, read by calibration and by the audit.

A report counts the turn's newest ``context_built`` record logged before it. Not the turn's
latest record: a provider refuses a request for length ("your messages resulted in N tokens"),
the runtime reports N, then builds the turn again smaller; paired with that retry, N read as the
ratio of a far smaller estimate (1.2 as 2.1) and halved every later budget. Not the turn's first
record either: once the retry is answered and its own report recorded, that report counts the
retry, and the audit, which compared every report with the first record, showed x1.1 as x0.9 of
the refused request while calibration learnt 1.1. A report logged before any record of its turn
pairs with the turn's latest record (the calibration's cap bounds what that can do).

Pure: two maps from the fold (``RunState.builds``, ``RunState.usage_builds``) or from a reader of
the log that keeps them the same way (:class:`UsagePairs`).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field

__all__ = ["UsagePairs", "note_report", "reported_record"]


def note_report(turn: int, builds: Mapping[int, int], usage_builds: MutableMapping[int, int]) -> None:
    """Note that a usage report of ``turn`` was logged now: it counts the turn's newest record so
    far (``builds``: turn -> its latest record's position), kept in ``usage_builds``."""
    built = builds.get(turn)
    if built is None:
        usage_builds.pop(turn, None)
    else:
        usage_builds[turn] = built


def reported_record(turn: int, builds: Mapping[int, int], usage_builds: Mapping[int, int]) -> int | None:
    """The position of the record ``turn``'s newest usage report counts (None: the turn has none)."""
    return usage_builds.get(turn, builds.get(turn))


@dataclass(slots=True)
class UsagePairs:
    """The two maps kept over a stream of the log, for a reader that does not fold it (the audit)."""

    builds: dict[int, int] = field(default_factory=dict)
    usage_builds: dict[int, int] = field(default_factory=dict)

    def built(self, turn: int, position: int) -> None:
        self.builds[turn] = position

    def reported(self, turn: int) -> None:
        note_report(turn, self.builds, self.usage_builds)

    def record_of(self, turn: int) -> int | None:
        return reported_record(turn, self.builds, self.usage_builds)

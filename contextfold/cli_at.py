"""``--at TIME``: a time turned into the turn it names, before the command runs.

Why here and not in each command: ``build``, ``manifest``, ``replay``, ``audit`` and ``why`` all
take ``--turn N``; an incident starts from a time ("the agent deleted the table at 14:03"), not a
turn number. The time is resolved once (:meth:`contextfold.api.Run.turn_at`: the turn whose
request was the last one built at or before it), said on stderr with the reason, and set as
``args.turn``: each command then runs exactly as with that ``--turn``, its output the same (stdout
holds only what the command prints, a request body or JSON, whatever the time).
"""

from __future__ import annotations

import argparse
import sys

from contextfold.audit.text import visible
from contextfold.cli import store_for
from contextfold.domain.event_times import utc_time

__all__ = ["resolve_at"]


def resolve_at(args: argparse.Namespace) -> None:
    """Set ``args.turn`` from ``args.at`` (ISO 8601; no zone: UTC) and say which turn and why.
    :class:`~contextfold.domain.errors.TimeNotInRunError` (exit 2) for a time before the run's
    first request or a run without times; ``InvalidInputError`` for text that is no time."""
    when = utc_time(args.at)
    with store_for(args) as store:
        found = store.run(args.run).turn_at(when)
    args.turn = found.turn
    sys.stderr.write(f"contextfold: --at {visible(args.at)} is {found.why}\n")

"""The Python API for agent loops: open a store, append typed events, project, build.

    store = contextfold.open_store("sqlite:///runs.db")      # or postgresql://...
    run = store.run("run-42")
    run.append(UserInput("Fix the failing test"))
    run.append(ModelResponse(tool_calls=[ToolCall(call_id="c1", name="pytest")]))
    run.append(ToolResult(call_id="c1", content=log, is_error=True, exit_code=1))
    state = run.state()          # the projection now; run.state(turn=3) as of turn 3

This module wires the store (I/O) to the pure projections; it holds no rules
of its own. A ``Run`` keeps its folded state and catches up from its last
version, so repeated ``state()`` calls in a loop cost only the new events.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from contextfold.domain.events import AnyEvent
from contextfold.domain.log import RecordedEvent
from contextfold.store.event_store import EventStore, RunInfo, VerifyReport

if TYPE_CHECKING:
    from contextfold.projections.fold import RunState

__all__ = ["Run", "Store", "open_store"]


class Store:
    """A handle on one store. Use as a context manager or call ``close()``."""

    def __init__(self, events: EventStore) -> None:
        self.events = events

    @property
    def url(self) -> str:
        return self.events.url

    def run(self, run_id: str) -> Run:
        return Run(self, run_id)

    def runs(self) -> list[RunInfo]:
        return self.events.runs()

    def artifact(self, ref: str) -> bytes:
        return self.events.artifact(ref)

    def close(self) -> None:
        self.events.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(url: str | None = None, *, create_schema: bool = True) -> Store:
    """Open (and by default create) a store: ``sqlite:///file.db`` or ``postgresql://...``.

    Without a URL: ``$CONTEXTFOLD_STORE``, else ``sqlite:///contextfold.db``.
    """
    return Store(EventStore(url, create_schema=create_schema))


class Run:
    """One run's log, seen through a store."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self._state: RunState | None = None

    def append(self, *events: AnyEvent | Iterable[AnyEvent],
               expected_version: int | None = None) -> list[RecordedEvent]:
        """Append one or more events in one transaction (typed errors, nothing written on error)."""
        flat: list[AnyEvent] = []
        for item in events:
            if isinstance(item, BaseModel):
                flat.append(item)
            else:
                flat.extend(item)
        return self.store.events.append(self.run_id, flat, expected_version=expected_version)

    def events(self, *, upto: int | None = None) -> list[RecordedEvent]:
        return self.store.events.read(self.run_id, upto=upto)

    @property
    def version(self) -> int:
        return self.store.events.version(self.run_id)

    def verify(self) -> VerifyReport:
        return self.store.events.verify(self.run_id)

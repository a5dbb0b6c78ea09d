"""A spy on a store's event decoder, and the loop whose records it counts: what the tests of the
reads that skip a record's manifest (``record_head``) assert with, without timing.

A record's manifest lists every fragment its build left out, so on a long run it is most of the
log; a read that decodes every record whole to answer for one turn costs O(the run). The spy
counts the context_built records decoded whole, and the records read without their manifest with
the keys of it kept (``heads``, each as ``(turn, keys)``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from contextfold.api import Run
from contextfold.domain.events import (
    EVENT_ADAPTER,
    ContextBuilt,
    ModelResponse,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.domain.record_head import record_head
from contextfold.store import event_reads
from contextfold.store.event_reads import EventReads

__all__ = ["TURNS", "WholeRecords", "loop", "whole_reads", "whole_records"]

TURNS = 12
"""Built turns of the loop; turn 5 is left unbuilt, then rebuilt (and recorded) at the end."""


class WholeRecords:
    """The store's event adapter, counting the context_built records it decodes whole; and the
    records read without their manifest, each with the manifest keys read (``heads``) and, in
    ``turns``, the turn it is a record of with those keys."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        self.decoded = 0
        self.paused = False
        self.heads: list[frozenset[str]] = []
        self.turns: list[tuple[int, frozenset[str]]] = []

    def record_head(self, text: bytes | str, keep: Any = ()) -> ContextBuilt:
        self.heads.append(frozenset(keep))
        event = record_head(text, keep)
        self.turns.append((event.turn, frozenset(keep)))
        return event

    def reset(self) -> None:
        self.decoded, self.heads, self.turns = 0, [], []

    def validate_json(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        event = self.adapter.validate_json(data, *args, **kwargs)
        if isinstance(event, ContextBuilt) and not self.paused:
            self.decoded += 1
        return event

    def __getattr__(self, name: str) -> Any:
        return getattr(self.adapter, name)


@pytest.fixture
def whole_records(monkeypatch: pytest.MonkeyPatch) -> WholeRecords:
    spy = WholeRecords(EVENT_ADAPTER)
    monkeypatch.setattr(event_reads, "EVENT_ADAPTER", spy)
    monkeypatch.setattr(event_reads, "record_head", spy.record_head)
    return spy


def loop(run: Run, *, rebuild: bool = True, usage: bool = False) -> None:
    """A history the window cannot hold, then one build per turn (each record lists the left-out
    history), turn 5 built only at the end: a rebuild, recorded after every other turn's (or, with
    ``rebuild`` false, never: a past turn without a record). ``usage``: each built turn's usage
    observed after its response (a later build's calibration reads those turns' records)."""
    run.append(UserInput("fix the failing build"))
    history: list[Any] = []
    for i in range(30):
        history += [ModelResponse(tool_calls=(ToolCall(call_id=f"h{i}", name="sh", arguments="{}"),)),
                    ToolResult(call_id=f"h{i}", content=f"file_{i}.py " * 40, exit_code=0)]
    run.append(history)
    first = run.next_turn()
    for i in range(TURNS):
        built = None if i == 4 else run.build("anthropic", window=2_000, reserve=500)
        run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="sh", arguments="{}"),)),
                   ToolResult(call_id=f"c{i}", content=f"step {i} ok", exit_code=0))
        if usage and built is not None:
            run.observe_usage(first + i, built.manifest.selected_tokens + 40)
    if rebuild:
        run.build(turn=first + 4, provider="anthropic", window=2_000, reserve=500)


@contextlib.contextmanager
def whole_reads() -> Iterator[None]:
    """Every event read whole, records and their manifests, as every read did before the reads
    that skip a manifest (``EventReads._parse`` with ``slim`` and ``keep`` ignored): what a test
    compares the answers of those reads with."""
    parse = EventReads._parse

    def whole(self: EventReads, run_id: str, position: int, topic: str, state: bytes, **_: Any) -> Any:
        return parse(self, run_id, position, topic, state)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(EventReads, "_parse", whole)
        yield

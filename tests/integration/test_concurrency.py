"""Concurrent writers of one run: threads sharing a store, processes sharing a database."""

from __future__ import annotations

import threading

from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.store.event_store import EventStore


def test_threads_sharing_a_store_append_calls_and_results_to_one_run(store_url: str) -> None:
    """A run's cached head (version, hash, pairing) was updated in place by each write, unguarded:
    threads appending to one run through one store judged their batches against each other's
    half-staged pairing, so a fresh call id was refused as "call 'c5-0' already has a result"
    and results of calls just issued as unknown (37 of 180 appends on SQLite)."""
    store = EventStore(store_url)
    store.append("r", [UserInput("go")])
    workers, rounds = 6, 10
    start = threading.Barrier(workers)
    errors: list[BaseException] = []

    def work(w: int) -> None:
        start.wait()
        try:
            for i in range(rounds):
                store.append("r", [ModelResponse(tool_calls=[ToolCall(call_id=f"c{w}-{i}", name="t",
                                                                      arguments="{}")])])
                store.append("r", [ToolResult(call_id=f"c{w}-{i}", content=f"ok {w}-{i}")])
                store.append("r", [UserInput(f"w{w}-{i}")])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    try:
        assert errors == []
        events = store.read("r")
        assert [e.position for e in events] == list(range(1, 1 + 1 + workers * rounds * 3))
        assert store.verify("r").ok
        results = [e.event.call_id for e in events if isinstance(e.event, ToolResult)]
        assert sorted(results) == sorted(f"c{w}-{i}" for w in range(workers) for i in range(rounds))
    finally:
        store.close()

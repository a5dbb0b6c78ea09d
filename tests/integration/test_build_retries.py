"""``Run.build(retries=N)``: a live build that lost the race for the run's end builds again.

Another writer is made to append while a build renders (the one moment between the fold and the
append of its recovery events and record), through a second store on the same database, as
another process would. Then real threads on one run, with the store's real optimistic
concurrency and nothing forced.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import contextfold.api
from contextfold.api import Run, Store, open_store
from contextfold.domain.errors import ConcurrencyConflictError, InvalidInputError
from contextfold.domain.events import (
    ContextBuilt,
    ModelResponse,
    ToolCall,
    ToolCallCancelled,
    ToolResult,
    ToolResultLost,
    UserInput,
)
from contextfold.projections.builder import BuildResult
from tests.threads import errors_in_threads

Action = Callable[[], object]


@pytest.fixture
def stores(store_url: str) -> Iterator[tuple[Store, Store]]:
    """The builder's store and another writer's, on one database."""
    with open_store(store_url) as mine, open_store(store_url) as theirs:
        yield mine, theirs


def _while_rendering(monkeypatch: pytest.MonkeyPatch, actions: list[Action]) -> list[Action]:
    """Run the next of ``actions`` when a build renders its request; returns those that ran."""
    ran: list[Action] = []
    render = contextfold.api.render_request

    def rendering(*args: Any, **kwargs: Any) -> dict[str, Any]:
        if actions:
            action = actions.pop(0)  # popped first: an action that builds renders too
            ran.append(action)
            action()
        return render(*args, **kwargs)

    monkeypatch.setattr(contextfold.api, "render_request", rendering)
    return ran


def _one_call_in_flight(run: Run) -> None:
    run.append(UserInput("check the tests"),
               ModelResponse(tool_calls=[ToolCall(call_id="c1", name="pytest", arguments="{}")]))


def _records(run: Run) -> list[ContextBuilt]:
    return [r.event for r in run.events() if isinstance(r.event, ContextBuilt)]


def _recoveries(run: Run) -> list[tuple[str, str]]:
    return [(r.event.type, r.event.call_id) for r in run.events()
            if isinstance(r.event, ToolCallCancelled | ToolResultLost)]


def _logged(run: Run, result: BuildResult) -> None:
    """``result`` is what the log's last record says was built: manifest and request hash."""
    last = _records(run)[-1]
    assert last.manifest == result.manifest.model_dump(mode="json")
    assert last.manifest["request_hash"] == result.manifest.request_hash


def test_a_retry_folds_the_result_that_arrived_while_building(
        stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch) -> None:
    """The build would cancel c1, in flight; its result arrives while the build renders. Without a
    retry that is the documented ConcurrencyConflictError; with one, the build sees the result."""
    mine, theirs = stores
    run = mine.run("r")
    _one_call_in_flight(run)
    _while_rendering(monkeypatch, [lambda: theirs.run("r").append(ToolResult(call_id="c1", content="ok"))])
    with pytest.raises(ConcurrencyConflictError):
        run.build("anthropic", window=20_000, reserve=1_000)
    assert _records(run) == [] and _recoveries(run) == []  # the losing attempt wrote nothing

    run.append(ModelResponse(tool_calls=[ToolCall(call_id="c2", name="pytest", arguments="{}")]))
    ran = _while_rendering(monkeypatch, [lambda: theirs.run("r").append(
        ToolResult(call_id="c2", content="4 passed"))])
    result = run.build("anthropic", window=20_000, reserve=1_000, retries=1)
    assert len(ran) == 1
    assert _recoveries(run) == [] and "4 passed" in result.body
    assert not [r for r in result.manifest.repairs if r.startswith(("tool_call_cancelled", "tool_result"))]
    _logged(run, result)
    assert run.replay(result.manifest.turn).ok and run.verify().ok


@pytest.mark.parametrize("auto_compact", [False, True])
def test_a_retry_never_writes_the_recovery_another_build_wrote(
        stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch, auto_compact: bool) -> None:
    """Two builds both plan to cancel c1; the other one wins and records the cancellation. The retry
    folds it: c1 is cancelled once in the log, and each record describes its own build. With
    ``auto_compact`` the recovery is part of the planned events, planned again from the new log."""
    mine, theirs = stores
    run = mine.run("r")
    _one_call_in_flight(run)
    other: list[BuildResult] = []
    ran = _while_rendering(monkeypatch, [lambda: other.append(
        theirs.run("r").build("anthropic", window=20_000, reserve=1_000))])
    result = run.build("anthropic", window=20_000, reserve=1_000, retries=1, auto_compact=auto_compact)
    assert len(ran) == 1 and len(other) == 1
    assert _recoveries(run) == [("tool_call_cancelled", "c1")]
    first, second = _records(run)
    assert first.manifest == other[0].manifest.model_dump(mode="json")
    _logged(run, result)
    assert second.log_version == first.log_version + 1  # it folded the other build's record
    assert run.replay(result.manifest.turn).ok and run.verify().ok


def test_when_the_retries_run_out_the_last_conflict_is_raised_and_nothing_is_written(
        stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each attempt plans a recovery (a cancellation, then, the run having moved on, a lost result)
    and each loses to another writer: retries=2 is three attempts, then the conflict."""
    mine, theirs = stores
    run = mine.run("r")
    _one_call_in_flight(run)
    before = run.version
    more: list[Action] = [functools.partial(theirs.run("r").append, UserInput(f"also {i}")) for i in range(5)]
    ran = _while_rendering(monkeypatch, more)
    with pytest.raises(ConcurrencyConflictError) as caught:
        run.build("anthropic", window=20_000, reserve=1_000, retries=2)
    assert len(ran) == 3
    assert caught.value.expected_version == before + 2  # the third attempt's, not the first's
    assert [type(r.event) for r in run.events()[before:]] == [UserInput] * 3  # theirs only
    assert run.verify().ok


def test_retries_must_be_a_count(stores: tuple[Store, Store]) -> None:
    run = stores[0].run("r")
    _one_call_in_flight(run)
    for bad in (-1, True, "3", 1.5, None):
        with pytest.raises(InvalidInputError, match="retries must be an integer >= 0"):
            run.build("anthropic", window=20_000, reserve=1_000, retries=bad)  # type: ignore[arg-type]
    assert _records(run) == [] and _recoveries(run) == []


def test_threads_appending_and_building_one_run_with_retries(store_url: str) -> None:
    """Nothing forced: each thread issues a call, records its result and builds, on its own store
    (as processes would) or all through one. Without retries most of these builds raise (measured
    on SQLite with 8 threads: 157 of 200). A conflict means another writer appended in between,
    and the threads append a bounded number of events, so ``retries`` above that bound can never
    run out: every build succeeds, each returned request is the one its record describes, and no
    call is answered twice."""
    workers, rounds = 6, 6
    bound = workers * rounds * 4
    with open_store(store_url) as setup:
        setup.run("r").append(UserInput("go"))
    shared = open_store(store_url)
    own = [open_store(store_url) if w % 2 else shared for w in range(workers)]
    built: list[BuildResult] = []
    lock = threading.Lock()
    start = threading.Barrier(workers)

    def work(w: int) -> None:
        run = own[w].run("r")
        start.wait()
        for i in range(rounds):
            run.append(ModelResponse(tool_calls=[ToolCall(call_id=f"c{w}-{i}", name="t", arguments="{}")]))
            run.append(ToolResult(call_id=f"c{w}-{i}", content=f"ok {w}-{i}"))
            result = run.build(window=50_000, reserve=1_000, retries=bound)
            with lock:
                built.append(result)

    try:
        errors = errors_in_threads(workers, work)
        assert errors == []
        run = shared.run("r")
        assert run.verify().ok
        logged = Counter(json.dumps(r.manifest, sort_keys=True) for r in _records(run))
        assert len(built) == workers * rounds == sum(logged.values())
        returned = Counter(json.dumps(b.manifest.model_dump(mode="json"), sort_keys=True) for b in built)
        assert returned == logged
        answers = Counter(r.event.call_id for r in run.events()
                          if isinstance(r.event, ToolResult | ToolCallCancelled | ToolResultLost))
        assert set(answers) == {f"c{w}-{i}" for w in range(workers) for i in range(rounds)}
        recovered = Counter(call for _, call in _recoveries(run))
        assert all(n == 1 for n in recovered.values())
        assert all(run.replay(t).ok for t in {r.turn for r in _records(run)})
    finally:
        for store in {id(s): s for s in own}.values():
            store.close()

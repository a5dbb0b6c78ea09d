"""What a long-lived process keeps of a run once its handle is dropped, and of a store once closed.

Why: a runtime keeps one process alive for days and serves thousands of runs through it. A
run's handle holds its folded state (every fragment of the run); anything process-wide that
kept a handle, a state or a store after the caller let go of it (a memo keyed by run or store,
a registry of handles, a cache of connections) would grow by every run served, past any memo
ceiling. Weak references say whether the objects were freed, with the memos left as they are.
"""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

import contextfold
from contextfold import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.api import Run
from contextfold.projections.state import RunState


def _serve(run: Run, n: int) -> None:
    """A short agent loop: an input, two tool calls with long outputs, a build per turn."""
    run.append(UserInput(f"look at job {n}"))
    for k in range(2):
        run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{k}", name="sh", arguments="{}"),)),
                   ToolResult(call_id=f"c{k}", content=f"job {n} line ok\n" * 2_000))
        run.build("openai-chat", window=8_000)
    run.build("anthropic", window=8_000, record=False)


def _states_of(prefix: str) -> list[RunState]:
    """The live run states of the runs named ``prefix...`` (a state takes no weak reference)."""
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, RunState) and o.run_id.startswith(prefix)]


def test_a_dropped_run_handle_frees_its_state(store_url: str) -> None:
    with contextfold.open_store(store_url) as store:
        refs = []
        for n in range(3):
            run = store.run(f"dropped-{n}")
            _serve(run, n)
            assert len(_states_of(f"dropped-{n}")) >= 1
            refs.append(weakref.ref(run))
            del run
        gc.collect()
        assert [r() for r in refs] == [None] * len(refs)
        assert _states_of("dropped-") == []


def test_a_closed_store_frees_its_connections_and_caches(store_url: str) -> None:
    threads = threading.active_count()
    store = contextfold.open_store(store_url)
    run = store.run("run-0")
    _serve(run, 0)
    assert store.event_text("run-0", 3).startswith("job 0")  # a text in the store's cache
    refs = [weakref.ref(o) for o in (store, store.events, store.events.backend, store._texts, run)]
    store.close()
    del store, run
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    assert threading.active_count() <= threads  # a pool's workers stopped with it


@pytest.mark.postgres
def test_closing_one_of_two_stores_leaves_the_other_working(sqlite_url: str, pg_url: str) -> None:
    """A process building for runs in SQLite and PostgreSQL closes the PostgreSQL store: what it
    held is freed, and the SQLite store's runs build on."""
    sqlite_store, pg_store = contextfold.open_store(sqlite_url), contextfold.open_store(pg_url)
    _serve(sqlite_store.run("a"), 0)
    _serve(pg_store.run("b"), 1)
    refs = [weakref.ref(o) for o in (pg_store, pg_store.events, pg_store.events.backend)]
    pg_store.close()
    del pg_store
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    run = sqlite_store.run("a")
    run.append(UserInput("and now?"))
    assert run.build("openai-chat", window=8_000).request["messages"][-1]["content"] == "and now?"
    sqlite_store.close()

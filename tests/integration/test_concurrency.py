"""Concurrent writers of one run: threads sharing a store, processes sharing a database."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from contextfold.api import open_store
from contextfold.domain.errors import ConcurrencyConflictError, InvalidInputError, StoreError
from contextfold.domain.events import ContextBuilt, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.rebuild_api import rebuild
from contextfold.store.event_store import EventStore
from tests.threads import errors_in_threads, switching_at_every_instruction


def test_threads_sharing_a_store_append_calls_and_results_to_one_run(store_url: str) -> None:
    """A run's cached head (version, hash, pairing) was updated in place by each write, unguarded:
    threads appending to one run through one store judged their batches against each other's
    half-staged pairing, so a fresh call id was refused as "call 'c5-0' already has a result"
    and results of calls just issued as unknown (37 of 180 appends on SQLite)."""
    store = EventStore(store_url)
    store.append("r", [UserInput("go")])
    workers, rounds = 6, 10
    start = threading.Barrier(workers)

    def work(w: int) -> None:
        start.wait()
        for i in range(rounds):
            store.append("r", [ModelResponse(tool_calls=[ToolCall(call_id=f"c{w}-{i}", name="t",
                                                                  arguments="{}")])])
            store.append("r", [ToolResult(call_id=f"c{w}-{i}", content=f"ok {w}-{i}")])
            store.append("r", [UserInput(f"w{w}-{i}")])

    errors = errors_in_threads(workers, work)
    try:
        assert errors == []
        events = store.read("r")
        assert [e.position for e in events] == list(range(1, 1 + 1 + workers * rounds * 3))
        assert store.verify("r").ok
        results = [e.event.call_id for e in events if isinstance(e.event, ToolResult)]
        assert sorted(results) == sorted(f"c{w}-{i}" for w in range(workers) for i in range(rounds))
    finally:
        store.close()


def test_threads_sharing_a_run_handle_build_and_append_without_false_errors(store_url: str) -> None:
    """Threads sharing one ``Run`` folded the same new events into its cached state twice (each
    caught up from the version it read), so a build or state() raised a false
    DuplicateToolResultError. What remains is the documented race: a build that cancels another
    thread's call in flight, or loses to another build, is a ConcurrencyConflictError."""
    store = open_store(store_url)
    run = store.run("r")
    run.append(UserInput("go"))
    workers, rounds = 4, 8
    start = threading.Barrier(workers)

    def work(w: int) -> None:
        start.wait()
        for i in range(rounds):
            with contextlib.suppress(ConcurrencyConflictError):  # the documented race
                call = ToolCall(call_id=f"c{w}-{i}", name="t", arguments="{}")
                run.append(ModelResponse(tool_calls=[call]))
                run.append(ToolResult(call_id=f"c{w}-{i}", content="ok"))
                run.build(window=50_000, reserve=1_000)

    errors = errors_in_threads(workers, work)
    try:
        assert errors == []
        assert run.verify().ok
        turns = {r.event.turn for r in run.events() if isinstance(r.event, ContextBuilt)}
        assert turns and all(run.replay(t).ok for t in turns)
        fresh = store.run("r").state()  # the shared handle's state is the log's
        assert run.state().version == fresh.version
        assert run.state().pairing.open == fresh.pairing.open
    finally:
        store.close()


def test_two_threads_catching_up_one_run_handle_fold_each_event_once(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interleaving forced: both threads have read the run's version and wait at a barrier
    before folding (bounded: with the fix, the second thread never reaches it while the first
    waits). Unguarded, both folded events 1-3 into the one state: a DuplicateToolCallError, or
    (interleaved otherwise, as on PostgreSQL where one thread folds all three while the other
    waits on the server) the same events folded twice without an error."""
    store = open_store(store_url)
    run = store.run("r")
    run.append(UserInput("go"), ModelResponse(tool_calls=[ToolCall(call_id="c1", name="t", arguments="{}")]))
    run.append(ToolResult(call_id="c1", content="ok"))
    both = threading.Barrier(2)
    reads = store.events.iter_events

    def iter_events(run_id: str, *, after: int = 0, after_hash: str | None = None,
                    keep: Any = None) -> Iterator[RecordedEvent]:
        with contextlib.suppress(threading.BrokenBarrierError):
            both.wait(timeout=3)
        return reads(run_id, after=after, after_hash=after_hash, keep=keep)

    monkeypatch.setattr(store.events, "iter_events", iter_events)
    errors = errors_in_threads(2, lambda _: run.state(), timeout=60)
    try:
        assert errors == []
        fresh = store.run("r").state()
        assert (run.state().version, run.state().turn) == (fresh.version, fresh.turn) == (3, 1)
    finally:
        store.close()


@pytest.mark.parametrize("operation", ["read", "version", "append"])
def test_a_store_closed_by_another_thread_mid_operation_is_a_store_error(
        store_url: str, operation: str) -> None:
    """Closing a Store while another thread uses it is misuse, and says so: on SQLite the pool
    refused the connection back with eventsourcing's ConnectionPoolClosedError (outside its
    PersistenceError tree, so untranslated), a bare traceback. The close is made to happen while
    the operation holds its connection."""
    store = open_store(store_url)
    run = store.run("r")
    run.append(UserInput("go"))
    datastore = store.events.backend.datastore
    get_connection = datastore.get_connection
    armed = [True]

    @contextlib.contextmanager
    def closed_midway(*args: Any, **kwargs: Any) -> Iterator[Any]:
        with get_connection(*args, **kwargs) as conn:
            yield conn
            if armed:
                armed.clear()
                store.close()

    datastore.get_connection = closed_midway  # type: ignore[method-assign]
    calls: dict[str, Callable[[], object]] = {
        "read": run.events, "version": lambda: run.version, "append": lambda: run.append(UserInput("x"))}
    try:
        calls[operation]()
    except StoreError as exc:
        assert "closed" in str(exc)
    finally:
        store.close()
    assert not armed
    with open_store(store_url) as again:
        assert again.run("r").verify().ok
        assert again.run("r").events()[0].event == UserInput("go")


def _child_appends(store: EventStore, conn: Any) -> None:
    """In a forked child: when the store's session began (on the server's clock), and an append."""
    try:
        began = store.backend.query("SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()")
        store.append("forked", [UserInput("from the child")])
        conn.send(began[0][0])
    except BaseException as exc:
        conn.send(repr(exc))


def test_a_postgresql_store_used_in_a_forked_child_connects_a_session_of_its_own(pg_url: str) -> None:
    """multiprocessing forks on Linux: a child using a store opened before the fork used the
    parent's pooled connections, whose sockets it shares, so the two processes' statements met
    on one session ("unexpected result status", "the last operation didn't produce a result")."""
    store = EventStore(pg_url)
    try:
        store.append("forked", [UserInput("from the parent")])
        forked_at = store.backend.query("SELECT clock_timestamp()")[0][0]
        receive, send = mp.get_context("fork").Pipe(duplex=False)
        child = mp.get_context("fork").Process(target=_child_appends, args=(store, send))
        child.start()
        began = receive.recv()
        child.join()
        assert not isinstance(began, str), began
        assert began > forked_at  # a session of its own, not one of the parent's pool
        store.append("forked", [UserInput("the parent again")])  # the parent's sessions live on
        assert [e.event.text for e in store.read("forked")] == [  # type: ignore[union-attr]
            "from the parent", "from the child", "the parent again"]
        assert store.verify("forked").ok
    finally:
        store.close()



def test_threads_sharing_a_store_read_compressed_rows_without_a_raw_runtime_error(store_url: str) -> None:
    """Each read of a compressed row remembers its keyframe for the deltas after it (the last few):
    a plain dict, evicted with ``pop(next(iter(d)))`` while another thread inserted, raised
    "dictionary changed size during iteration" out of ``read``."""
    text = "".join(f"line {i}: the suite ran, 3 failed\n" for i in range(1200))  # ~40 KB: a frame
    with EventStore(store_url) as store:
        for r in range(8):
            store.append(f"r{r}", [UserInput(f"{r} {text}")])
        with switching_at_every_instruction(("store/event_reads.py", "store/deltas.py")):
            errors = errors_in_threads(4, lambda w: [store.read(f"r{(w + i) % 8}") for i in range(40)])
    assert errors == []


def _two_past_turns(store: Any, run_id: str) -> Any:
    """Two handles (two workers) on a run whose turns 1 and 2 are answered and have no record."""
    run = store.run(run_id)
    run.append(UserInput("go"), ModelResponse(text="ok", tool_calls=[ToolCall(call_id="c1", name="sh",
                                                                              arguments="{}")]))
    run.append(ToolResult(call_id="c1", content="done"), ModelResponse(text="finished"))
    assert run.records(1) == []
    return run


def test_two_rebuilds_of_a_turn_without_a_record_record_it_once(store_url: str) -> None:
    """Two workers rebuilt a past turn with no record at once (``replay RUN --turn N``): both saw
    no record and both appended one marked ``rebuild``, so the turn held two, here of two
    providers, though a rebuild records one only when the turn has none and a rebuild with other
    settings than the record's is refused. The loser now reproduces the winner's record, or is
    refused for its differing settings. ``before_record`` runs between the check and the append."""
    with open_store(store_url) as store_a, open_store(store_url) as store_b:
        run_a = _two_past_turns(store_a, "r")
        run_b = store_b.run("r")

        def other_worker(provider: str, turn: int) -> Callable[[Any], None]:
            def record_first(_: Any) -> None:
                run_b.build(turn=turn, provider=provider, window=50_000)
            return record_first

        # settings that differ from the record the other worker made first: refused, not recorded
        with pytest.raises(InvalidInputError, match="provider 'openai-chat'"):
            run_a.build(turn=1, provider="anthropic", window=50_000,
                        before_record=other_worker("openai-chat", 1))
        assert [(r.rebuild, r.provider) for r in run_a.records(1)] == [(True, "openai-chat")]
        # the same settings: the request returned is the one recorded, and only that one
        result = run_a.build(turn=2, provider="gemini", window=50_000,
                             before_record=other_worker("gemini", 2))
        records = run_a.records(2)
        assert [(r.rebuild, r.provider) for r in records] == [(True, "gemini")]
        assert result.manifest.request_hash == records[0].request_hash
        assert run_a.replay(1).ok and run_a.replay(2).ok and run_a.verify().ok


def test_a_rebuild_that_loses_the_turns_record_to_another_worker_is_told_so(store_url: str) -> None:
    """``rebuild(superseded=...)`` hears of its own result when another worker recorded the turn
    between its check and its append (what ``replay --turn N`` then says names that worker's
    record); not when its own record went in."""
    with open_store(store_url) as store_a, open_store(store_url) as store_b:
        run_a = _two_past_turns(store_a, "r")
        run_b = store_b.run("r")
        cfg = BuildConfig(provider="anthropic", window=50_000)
        ours: list[Any] = []

        def other_records_first(_: Any) -> None:
            if not run_b.records(1):
                run_b.build(turn=1, provider="openai-chat", window=50_000)

        version, records = run_a.version, run_a.records(1)
        result = rebuild(run_a, 1, cfg, record=True, records=records, version=version,
                         before_record=other_records_first, superseded=ours.append)
        [theirs] = run_a.records(1)
        assert theirs.provider == "openai-chat" and result.manifest.request_hash == theirs.request_hash
        assert len(ours) == 1 and ours[0].manifest.provider == "anthropic"
        assert ours[0].manifest.request_hash != theirs.request_hash
        mine: list[Any] = []
        version = run_a.version  # before the records, as a rebuild reads them
        result = rebuild(run_a, 2, cfg, record=True, records=run_a.records(2), version=version,
                         superseded=mine.append)
        assert mine == [] and run_a.records(2)[0].request_hash == result.manifest.request_hash


def test_a_rebuild_records_past_other_writers_appends(store_url: str) -> None:
    """Events another writer appends while a past turn is rebuilt (the agent goes on) are no
    record of the turn: the rebuild is still recorded, once, and nothing is refused."""
    with open_store(store_url) as store_a, open_store(store_url) as store_b:
        run_a = _two_past_turns(store_a, "r")
        run_b = store_b.run("r")

        def append_first(_: Any) -> None:
            run_b.append(UserInput("more"))

        run_a.build(turn=1, provider="anthropic", window=50_000, before_record=append_first)
        assert [(r.rebuild, r.provider) for r in run_a.records(1)] == [(True, "anthropic")]
        assert [type(r.event).__name__ for r in run_a.events()][-2:] == ["UserInput", "ContextBuilt"]
        assert run_a.replay(1).ok


def test_a_rebuild_that_loses_to_appends_every_time_gives_up_with_a_conflict(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rebuild's record is tried again at each new version, a bounded number of times: a
    writer that appends before every attempt makes it a ConcurrencyConflictError, nothing recorded."""
    with open_store(store_url) as store_a, open_store(store_url) as store_b:
        run_a = _two_past_turns(store_a, "r")
        run_b = store_b.run("r")
        append = run_a.append

        def after_another(*events: Any, expected_version: int | None = None) -> Any:
            run_b.append(UserInput("more"))
            return append(*events, expected_version=expected_version)

        monkeypatch.setattr(run_a, "append", after_another)
        with pytest.raises(ConcurrencyConflictError):
            run_a.build(turn=1, provider="anthropic", window=50_000)
        assert run_a.records(1) == [] and run_a.version == 4 + 8

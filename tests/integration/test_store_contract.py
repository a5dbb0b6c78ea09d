"""The store contract, written once and run against every backend (SQLite and PostgreSQL)."""

from __future__ import annotations

import multiprocessing as mp
import re
import threading

import blake3
import psycopg
import pytest

from contextfold.domain.errors import (
    ArtifactNotFoundError,
    ConcurrencyConflictError,
    DuplicateToolCallError,
    DuplicateToolResultError,
    InputLimitError,
    IntegrityError,
    InvalidInputError,
    RunNotFoundError,
    StoreConfigError,
    StoreError,
    UnknownToolCallError,
)
from contextfold.domain.events import (
    AnyEvent,
    ArtifactRef,
    FileRead,
    ImageBlock,
    ModelResponse,
    RunStarted,
    ToolCall,
    ToolCallCancelled,
    ToolResult,
    UserInput,
    canonical_json,
)
from contextfold.domain.log import GENESIS_HASH, chain_hash
from contextfold.store.backends import ARTIFACTS_TABLE, EVENTS_TABLE, SQLiteBackend
from contextfold.store.event_store import EventStore
from tests.threads import errors_in_threads


def call(cid: str, name: str = "pytest") -> ModelResponse:
    return ModelResponse(tool_calls=(ToolCall(call_id=cid, name=name, arguments="{}"),))


def test_append_read_and_read_up_to_version(store: EventStore) -> None:
    recorded = store.append("run-1", [RunStarted(model="gpt-4o"), UserInput("fix the test"), call("c1"),
                                      ToolResult(call_id="c1", content="ok", exit_code=0)])
    assert [r.position for r in recorded] == [1, 2, 3, 4]
    events = store.read("run-1")
    assert [e.event for e in events] == [r.event for r in recorded]
    assert [e.hash for e in events] == [r.hash for r in recorded]
    assert [e.position for e in store.read("run-1", upto=2)] == [1, 2]
    assert [e.position for e in store.read("run-1", after=2)] == [3, 4]
    assert store.version("run-1") == 4
    with pytest.raises(RunNotFoundError):
        store.read("no-such-run")


def test_batch_is_atomic_and_protocol_errors_write_nothing(store: EventStore) -> None:
    store.append("r", [UserInput("go"), call("c1")])
    with pytest.raises(UnknownToolCallError):
        store.append("r", [ToolResult(call_id="c1", content="a"), ToolResult(call_id="zz", content="b")])
    assert store.version("r") == 2
    store.append("r", [ToolResult(call_id="c1", content="a")])
    with pytest.raises(DuplicateToolResultError):
        store.append("r", [ToolResult(call_id="c1", content="again")])
    # a call id may be re-used once its first call is answered (seen in real gpt-4o logs)
    store.append("r", [call("c1"), ToolResult(call_id="c1", content="second call")])
    with pytest.raises(DuplicateToolCallError):
        store.append("r", [call("c2"), call("c2")])
    assert store.version("r") == 5


def test_what_is_not_an_event_or_not_unicode_is_refused_and_nothing_written(store: EventStore) -> None:
    store.append("r", [UserInput("go")])
    not_unicode = "holds text that is not valid Unicode"
    batches: list[tuple[list[object], str]] = [
        ([UserInput("ok"), {"type": "user_input"}], "event 1: expected an event object"),
        ([None], "event 0: expected an event object"),
        ([UserInput("ok"), UserInput("bad \udcff byte")], f"event 1 (user_input) {not_unicode}: U+DCFF"),
        ([call("c9"), ToolResult(call_id="c9", content="x" * 70_000 + "\ud800")],  # offloaded size
         f"event 1 (tool_result) {not_unicode}: U+D800"),
    ]
    for batch, message in batches:
        with pytest.raises(InvalidInputError, match=re.escape(message)):
            store.append("r", batch)  # type: ignore[arg-type]
    assert store.version("r") == 1
    assert [r.position for r in store.read("r")] == [1]


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the list the last event holds
def test_an_event_that_does_not_validate_is_refused_and_nothing_written(store: EventStore) -> None:
    """``model_copy(update=...)`` and ``model_construct`` skip pydantic's checks: such an event was
    stored, and from then on every read of the run failed ("stored event does not parse"), for
    good, as the log is append-only. It is refused whole (one append, or an import's batch)."""
    store.append("r", [UserInput("go")])
    reply = ModelResponse(tool_calls=(ToolCall(call_id="a", name="sh"), ToolCall(call_id="b", name="sh")))
    twice = reply.model_copy(update={"tool_calls": (ToolCall(call_id="a", name="sh"),) * 2})
    nameless = ToolResult.model_construct(call_id="", content="x")
    batches: list[tuple[list[AnyEvent], str]] = [
        ([twice], "event 0 (model_response) does not validate: 1 error(s), the first "
         "at model_response.tool_calls: Value error, duplicate call_id"),
        ([call("c1"), nameless], "event 1 (tool_result) does not validate")]
    for batch, message in batches:
        with pytest.raises(InvalidInputError, match=re.escape(message)):
            store.append("r", batch)
        with pytest.raises(InvalidInputError, match=re.escape(message)):
            store.append_new_runs([("fresh", [UserInput("go")]), ("new", batch)])
    assert store.version("r") == 1
    assert [r.position for r in store.read("r")] == [1]
    assert [info.run_id for info in store.runs()] == ["r"]
    # what validates is recorded as a read gives it back: the tuple a list becomes
    listed = ModelResponse.model_construct(tool_calls=[ToolCall(call_id="c2", name="sh")])
    recorded = store.append("r", [listed])
    assert recorded[0].event.tool_calls == (ToolCall(call_id="c2", name="sh"),)  # type: ignore[union-attr]
    assert [r.event for r in recorded] == [r.event for r in store.read("r", after=1)]


def test_a_media_type_with_a_control_character_is_refused_alike_by_every_store(store: EventStore) -> None:
    """SQLite stored "text/plain\x00evil" as it was; PostgreSQL, whose text holds no NUL, raised a
    generic StoreError."""
    for media_type in ("text/plain\x00evil", "image/png\n"):
        with pytest.raises(InvalidInputError, match="holds a control character"):
            store.put_artifact(b"data", media_type)
    assert store.put_artifact(b"data", "text/plain; charset=utf-8").media_type.startswith("text/plain")
    # nor may an event cite one under such a type: its export made a file its import refused
    ref = store.put_artifact(b"png bytes", "image/png")
    odd = ref.model_copy(update={"media_type": "image/png\x00x"})
    cited = UserInput(content=(ImageBlock(artifact=odd, media_type="image/png"),))
    with pytest.raises(InvalidInputError, match="holds a control character"):
        store.append("r", [cited])
    assert store.version("r") == 0


@pytest.mark.parametrize("harm", ["delete", "damage"])
def test_verify_reads_back_the_artifacts_a_run_cites(store: EventStore, harm: str) -> None:
    """The chain holds an artifact's hash, not its bytes: verify said "intact" of a run whose
    replay then failed on a deleted or damaged artifact."""
    store.append("r", [call("c1"), ToolResult(call_id="c1", content="output line\n" * 20_000)])
    ref = next(r.event.artifact for r in store.read("r") if isinstance(r.event, ToolResult))
    assert ref is not None and store.verify("r").ok
    b = store.backend
    table, p = b.table(ARTIFACTS_TABLE), b.placeholder
    if harm == "delete":
        b.execute(f"DELETE FROM {table} WHERE hash = {p}", (ref.hash,))
    else:
        b.execute(f"UPDATE {table} SET data = {p} WHERE hash = {p}", (b"not what was stored", ref.hash))
    report = store.verify("r")
    assert not report.ok and report.first_bad_position == 2 and ref.hash in report.reason


def test_a_closed_store_says_so_on_every_use(store_url: str) -> None:
    closed = EventStore(store_url)
    closed.append("r", [UserInput("go")])
    closed.close()
    uses = (lambda: closed.append("r", [UserInput("again")]), lambda: closed.read("r"), closed.runs,
            lambda: closed.verify("r"), lambda: closed.put_artifact(b"x"))
    for use in uses:
        with pytest.raises(StoreError, match="is closed: open it again"):
            use()
    closed.close()  # closing twice is harmless
    with EventStore(store_url) as reopened:
        assert [r.position for r in reopened.read("r")] == [1]


def test_late_result_after_cancellation_is_recorded_once(store: EventStore) -> None:
    store.append("r", [call("c1"), ToolCallCancelled(call_id="c1", reason="timeout")])
    store.append("r", [ToolResult(call_id="c1", content="late")])
    with pytest.raises(DuplicateToolResultError):
        store.append("r", [ToolResult(call_id="c1", content="later still")])


def test_stale_version_conflicts_and_nothing_is_written(store_url: str) -> None:
    a, b = EventStore(store_url), EventStore(store_url)
    a.append("r", [UserInput("one")])
    seen = b.version("r")
    a.append("r", [UserInput("two")], expected_version=1)
    with pytest.raises(ConcurrencyConflictError):
        b.append("r", [UserInput("three")], expected_version=seen)
    assert [e.event for e in a.read("r")] == [UserInput("one"), UserInput("two")]
    b.append("r", [UserInput("three")], expected_version=2)  # retry after reload succeeds
    assert a.version("r") == 3
    a.close()
    b.close()


def test_an_expected_version_that_is_no_version_is_invalid_input(store: EventStore) -> None:
    """expected_version="2" (read from JSON) or -1 raised ConcurrencyConflictError ("another
    writer appended first; reload and retry"): a retry loop that could never succeed."""
    store.append("r", [UserInput("a"), UserInput("b")])
    for bad in ("2", -1, 2.0, True):
        with pytest.raises(InvalidInputError, match="expected_version must be a version"):
            store.append("r", [UserInput("c")], expected_version=bad)  # type: ignore[arg-type]
    assert store.version("r") == 2
    store.append("r", [UserInput("c")], expected_version=2)
    assert store.version("r") == 3


def test_an_expected_version_ahead_of_the_run_is_invalid_input_not_a_race(store: EventStore) -> None:
    """A version no reader of this store could have seen was reported as "another writer
    appended first; reload and retry", though nobody else wrote and no retry could succeed."""
    store.append("r", [UserInput("a")])
    with pytest.raises(InvalidInputError, match="expected_version 999 is ahead of run 'r', which is at ver"):
        store.append("r", [UserInput("b")], expected_version=999)
    assert store.version("r") == 1


def test_stale_cached_head_rejudges_pairing(store_url: str) -> None:
    a, b = EventStore(store_url), EventStore(store_url)
    a.append("r", [UserInput("go")])
    b.append("r", [call("c9")])  # a's cached head does not know c9
    a.append("r", [ToolResult(call_id="c9", content="ok")])
    assert a.version("r") == 3
    a.close()
    b.close()


def _writer(url: str, runs: list[str], worker: int, count: int) -> None:
    s = EventStore(url)
    for i in range(count):
        for run in runs:
            s.append(run, [UserInput(f"w{worker}-e{i}")])
    s.close()


@pytest.mark.parametrize("shared_run", [True, False])
def test_concurrent_writers_in_processes(store_url: str, shared_run: bool) -> None:
    EventStore(store_url).close()  # schema created once up front, as a deployment would
    workers, per_worker = 4, 25
    # spawn, not fork: the test process has threads (pytest-xdist's, a store's pool), and a fork
    # copies their locks held; each writer starts fresh, as a deployment's workers do
    ctx = mp.get_context("spawn")
    procs = []
    for w in range(workers):
        runs = ["shared"] if shared_run else [f"own-{w}"]
        procs.append(ctx.Process(target=_writer, args=(store_url, runs, w, per_worker)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    s = EventStore(store_url)
    run_ids = ["shared"] if shared_run else [f"own-{w}" for w in range(workers)]
    texts: list[str] = []
    for run in run_ids:
        events = s.read(run)
        assert [e.position for e in events] == list(range(1, len(events) + 1))
        assert s.verify(run).ok
        texts += [e.event.text for e in events if isinstance(e.event, UserInput)]
    expected = {f"w{w}-e{i}" for w in range(workers) for i in range(per_worker)}
    assert sorted(texts) == sorted(expected)  # every event exactly once
    # per-writer order is preserved inside the total order
    if shared_run:
        order = [e.event.text for e in s.read("shared") if isinstance(e.event, UserInput)]
        for w in range(workers):
            mine = [t for t in order if t.startswith(f"w{w}-")]
            assert mine == [f"w{w}-e{i}" for i in range(per_worker)]
    s.close()


def test_one_store_shared_by_threads_appends_every_event(store_url: str) -> None:
    """An agent server keeps one store and runs agents in threads. On PostgreSQL, threads taking
    connections at once hit psycopg_pool's bare AssertionError (the pool was waited on per use)."""
    store = EventStore(store_url)

    def work(worker: int) -> None:
        for i in range(15):
            store.append(f"thread-{worker}", [UserInput(f"t{worker}-e{i}")])

    errors = errors_in_threads(4, work)
    try:
        assert errors == []
        for w in range(4):
            texts = [e.event.text for e in store.read(f"thread-{w}") if isinstance(e.event, UserInput)]
            assert texts == [f"t{w}-e{i}" for i in range(15)]
        assert store._run_locks == {}  # a lock per run only while it is written: none grows per run
    finally:
        store.close()


def test_a_store_keeps_a_bounded_number_of_run_heads_and_reads_a_dropped_one_again(
        store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server writing many runs through one store kept every run's head (its pairing state
    grows with the run's calls) for the store's life. Past ``HEADS_KEPT`` the least recently
    written is dropped; the next append to that run reads it from the log again, pairing
    included, so nothing it refuses or accepts changes."""
    monkeypatch.setattr("contextfold.store.run_heads.HEADS_KEPT", 2)
    store.append("a", [UserInput("go"), call("c1"), call("c2")])
    store.append("a", [ToolResult(call_id="c1", content="one")])
    store.append("b", [UserInput("b")])
    store.append("c", [UserInput("c")])
    assert list(store._heads) == ["b", "c"]  # "a" dropped: the least recently written
    with pytest.raises(DuplicateToolResultError):  # c1's result is known after the re-read
        store.append("a", [ToolResult(call_id="c1", content="again")])
    assert [r.position for r in store.append("a", [ToolResult(call_id="c2", content="two")])] == [5]
    with pytest.raises(UnknownToolCallError):
        store.append("a", [ToolResult(call_id="c9", content="?")])
    assert store.version("a") == 5 and len(store._heads) == 2


def test_a_whole_read_of_a_run_makes_the_head_its_next_append_needs(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process folds the run (one read of its whole log), then appends: the append read
    the whole log again to learn which calls are open. The read now makes that head, the same
    one the log gives, and a partial read or a read after it changes nothing."""
    with EventStore(store_url) as writer:
        writer.append("h", [UserInput("go"), call("c1"), call("c2"), ToolResult(call_id="c1", content="one"),
                            ToolCallCancelled(call_id="c2", reason="timeout"), call("c3")])
    with EventStore(store_url) as store:
        events = store.iter_events("h")
        next(events)
        del events  # a partial read makes no head
        assert "h" not in store._heads
        assert [r.position for r in store.iter_events("h")] == [1, 2, 3, 4, 5, 6]
        made = store._heads["h"]
        store._heads.pop("h")
        read = store._catch_up("h")
        assert (made.version, made.last_hash, made.pairing) == (read.version, read.last_hash, read.pairing)
    with EventStore(store_url) as store:
        list(store.iter_events("h"))

        def no_reread(*_: object) -> None:
            raise AssertionError("the log was read again")

        with monkeypatch.context() as m:
            m.setattr(store, "_catch_up", no_reread)
            assert store.append("h", [ToolResult(call_id="c2", content="late")])[0].position == 7
            assert store.append("h", [ToolResult(call_id="c3", content="three")])[0].position == 8
        with pytest.raises(DuplicateToolResultError):  # a refusal is judged against the log again
            store.append("h", [ToolResult(call_id="c1", content="again")])


@pytest.mark.postgres
@pytest.mark.parametrize("schema", ["MixedCase", "user", "select"])
def test_a_schema_postgresql_cannot_take_unquoted_is_refused_before_anything_is_made(
        pg_url: str, schema: str) -> None:
    """eventsourcing names the schema unquoted when it looks up its row type: ``MixedCase`` was
    created (quoted), then not found on the first append (the store unusable); a reserved word
    raised eventsourcing's bare ProgrammingError. Both are StoreConfigError, nothing created."""
    url = pg_url.split("?")[0] + f"?schema={schema}"
    with pytest.raises(StoreConfigError, match=f"invalid schema '{schema}'"):
        EventStore(url)
    with psycopg.connect(pg_url.split("?")[0]) as conn:
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None


def test_artifacts_are_content_addressed_and_stored_once(store: EventStore) -> None:
    big = "line of build output\n" * 10_000  # ~210 KB > 64 KiB threshold
    store.append("r", [call("c1"), ToolResult(call_id="c1", content=big, is_error=True, exit_code=2)])
    store.append("r2", [call("c1"), ToolResult(call_id="c1", content=big)])
    assert store.artifact_count() == 1
    rec = store.read("r")[1].event
    assert isinstance(rec, ToolResult)
    assert rec.artifact is not None
    assert rec.artifact.size == len(big.encode())
    assert rec.artifact.hash == blake3.blake3(big.encode()).hexdigest()
    assert len(rec.content) < 5000 and big.startswith(rec.content)
    assert store.artifact(rec.artifact).decode() == big


def test_hash_chain_detects_an_edited_stored_payload(store: EventStore) -> None:
    store.append("r", [UserInput("a"), UserInput("b"), UserInput("c")])
    assert store.verify("r").ok
    b = store.backend
    p = b.placeholder
    rows = b.query(f"SELECT state FROM {b.table(EVENTS_TABLE)} WHERE originator_id = {p} "
                   f"AND originator_version = 2", ("r",))
    tampered = bytes(rows[0][0]).replace(b'"b"', b'"B"')
    b.execute(f"UPDATE {b.table(EVENTS_TABLE)} SET state = {p} WHERE originator_id = {p} "
              f"AND originator_version = 2", (tampered, "r"))
    report = store.verify("r")
    assert not report.ok
    assert report.first_bad_position == 2


def test_a_batch_is_stored_as_its_chain_hashes_and_json_in_position_order(store: EventStore) -> None:
    """The rows an append writes, as a store of any earlier version wrote them and reads them:
    ``topic`` the event's type and version, ``state`` the chain hash (64 hex) then the canonical
    JSON; across the batch, the order of commit (notification id or rowid) is that of position."""
    batch: list[AnyEvent] = [UserInput("a"), call("c1"), ToolResult(call_id="c1", content="ok"),
                             UserInput("é")]
    store.append("r", [UserInput("first")])
    recorded = store.append("r", batch)
    b = store.backend
    order = "rowid" if isinstance(b, SQLiteBackend) else "notification_id"
    rows = b.query(f"SELECT originator_version, topic, state FROM {b.table(EVENTS_TABLE)} "
                   f"WHERE originator_id = {b.placeholder} ORDER BY {order}", ("r",))
    assert [(v, t, bytes(s)) for v, t, s in rows[1:]] == [
        (rec.position, f"{event.type}@{event.v}", rec.hash.encode("ascii") + canonical_json(event))
        for rec, event in zip(recorded, batch, strict=True)]
    assert [r.position for r in recorded] == [2, 3, 4, 5]
    first_hash = bytes(rows[0][2])[:64].decode("ascii")
    assert recorded[0].hash == chain_hash("r", 2, first_hash, canonical_json(batch[0]))


def test_verify_detects_a_topic_that_is_not_its_event_s(store: EventStore) -> None:
    """Counts by type (a turn's number: the run's model responses) read the topic column alone: a
    row whose topic was changed kept its chain, verify said ok, and usage and replay lost a turn."""
    from eventsourcing.persistence import StoredEvent

    store.append("r", [UserInput("a"), call("c1"), ToolResult(call_id="c1", content="ok")])
    b = store.backend
    p = b.placeholder
    b.execute(f"UPDATE {b.table(EVENTS_TABLE)} SET topic = {p} WHERE originator_id = {p} "
              "AND originator_version = 2", ("user_input@1", "r"))
    report = store.verify("r")
    assert (report.ok, report.first_bad_position) == (False, 2) and "model_response@1" in report.reason
    body = canonical_json(RunStarted(model="m"))  # a current event under an old version's topic
    digest = chain_hash("old", 1, GENESIS_HASH, body)
    b.recorder.insert_events([StoredEvent("old", 1, "run_started@1", digest.encode() + body)])
    report = store.verify("old")
    assert (report.ok, report.first_bad_position) == (False, 1) and "run_started@2" in report.reason


def test_upcasts_a_v1_event(store: EventStore) -> None:
    body = b'{"agent":"a","model":"gpt-4o","tokenizer":"cl100k_base","type":"run_started","v":1}'
    digest = chain_hash("old", 1, GENESIS_HASH, body)
    from eventsourcing.persistence import StoredEvent

    store.backend.recorder.insert_events([StoredEvent("old", 1, "run_started@1", digest.encode() + body)])
    event = store.read("old")[0].event
    assert event == RunStarted(agent="a", model="gpt-4o", encoding="cl100k_base")
    assert store.verify("old").ok  # the chain covers the stored (v1) bytes


def test_events_are_counted_by_type_old_versions_included_and_names_compared_exactly(
        store: EventStore) -> None:
    """``count_events`` reads topics, not states: a v1 event counts under its type, and a
    type name is matched whole (``_`` is a wildcard in SQL's LIKE)."""
    from eventsourcing.persistence import StoredEvent

    body = b'{"agent":"a","model":"gpt-4o","tokenizer":"cl100k_base","type":"run_started","v":1}'
    digest = chain_hash("counted", 1, GENESIS_HASH, body)
    store.backend.recorder.insert_events([StoredEvent("counted", 1, "run_started@1", digest.encode() + body)])
    store.append("counted", [RunStarted(model="gpt-4o"), UserInput("go"), call("c1"),
                             ToolResult(call_id="c1", content="ok"), call("c2")])
    assert store.count_events("counted", "run_started") == 2
    assert store.count_events("counted", "model_response") == 2
    assert store.count_events("counted", "model_responses") == 0
    assert store.count_events("counted", "model%response") == 0
    assert store.count_events("counted", "context_built") == 0
    with pytest.raises(RunNotFoundError):
        store.count_events("no-such-run", "user_input")


def test_runs_and_commit_order_across_runs(store: EventStore) -> None:
    store.append("b", [UserInput("1")])
    store.append("a", [UserInput("2")])
    store.append("b", [UserInput("3")])
    assert [(r.run_id, r.events) for r in store.runs()] == [("b", 2), ("a", 1)]
    across = store.read_all()
    assert [(rec.run_id, rec.event.text) for _, rec in across  # type: ignore[union-attr]
            ] == [("b", "1"), ("a", "2"), ("b", "3")]
    ids = [n for n, _ in across]
    assert ids == sorted(ids)
    assert [rec.position for _, rec in store.read_all(after=ids[0])] == [1, 2]


@pytest.mark.parametrize("bad", ["", "a" * 201, 'quo"te', "semi;colon", "ctrl\x00", "sp ace", "-lead"])
def test_run_id_limits(store: EventStore, bad: str) -> None:
    with pytest.raises(InputLimitError):
        store.append(bad, [UserInput("x")])


def test_sqlite_is_the_default(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONTEXTFOLD_STORE", raising=False)
    s = EventStore()
    assert isinstance(s.backend, SQLiteBackend)
    s.append("r", [UserInput("x")])
    assert (tmp_path / "contextfold.db").exists()
    s.close()


def _create(url: str) -> None:
    EventStore(url).close()


def test_schema_creation_is_safe_when_many_workers_start_at_once(store_url: str) -> None:
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_create, args=(store_url,)) for _ in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with EventStore(store_url, create_schema=False) as s:
        s.append("after", [UserInput("tables exist once")])
        assert s.version("after") == 1


def test_reads_page_by_bytes_and_miss_nothing(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages shrink when events are big (a page of 5,000 20 KB events held 100 MB) and grow
    again when they are small; every event comes back once, in order."""
    import contextfold.store.event_reads as es

    monkeypatch.setattr(es, "_FIRST_PAGE_ROWS", 7)
    monkeypatch.setattr(es, "_PAGE_BYTES", 20_000)
    events: list[UserInput] = []
    for i in range(150):
        size = 3_000 if (i // 40) % 2 == 0 else 10  # runs of big and of small events
        events.append(UserInput(f"{i}:" + "x" * size))
    store.append("paged", events)
    read = store.read("paged")
    assert [r.position for r in read] == list(range(1, 151))
    assert [r.event for r in read] == events
    assert [r.position for r in store.read("paged", after=33, upto=121)] == list(range(34, 122))
    assert [r.position for r in store.iter_events("paged", after=140)] == list(range(141, 151))
    for after in (7, 8, 100):  # the row checked first: at, just before and past a page's end
        checked = store.iter_events("paged", after=after, after_hash=read[after - 1].hash)
        assert [r.position for r in checked] == list(range(after + 1, 151))


def test_event_text_reads_back_one_events_content(store: EventStore) -> None:
    store.append("texts", [UserInput("hi"), call("c1"), ToolResult(call_id="c1", content="out put")])
    assert store.event_text("texts", 3) == "out put"
    with pytest.raises(IntegrityError):
        store.event_text("texts", 1)  # a user input has blocks, not a text content
    with pytest.raises(IntegrityError):
        store.event_text("texts", 9)


def test_sqlite_schema_creation_retries_a_lost_wal_switch(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Seen under load: six processes opening one new file, a loser of the switch to WAL got
    "database is locked" at once (no busy wait). Creation retries that; other errors surface."""
    import sqlite3

    store = EventStore(f"sqlite:///{tmp_path}/s.db", create_schema=False)
    backend = store.backend
    assert isinstance(backend, SQLiteBackend)
    real = backend.recorder.create_table
    failures = [sqlite3.OperationalError("database is locked")] * 2

    def flaky() -> None:
        if failures:
            raise failures.pop()
        real()

    monkeypatch.setattr(backend.recorder, "create_table", flaky)
    backend.create_schema()
    assert not failures
    store.append("r", [UserInput("tables exist")])
    assert store.version("r") == 1

    def broken() -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(backend.recorder, "create_table", broken)
    with pytest.raises(StoreError):
        backend.create_schema()
    store.close()


def _noise(i: int, size: int) -> str:
    """Text that compresses poorly (a large batch stays large as stored)."""
    return blake3.blake3(str(i).encode()).hexdigest(length=size // 2)


def test_a_batch_of_many_megabytes_is_written_and_read_back(store_url: str) -> None:
    """12 MB in one append: psycopg's pipeline mode hung for good on such an insert
    (``store.pg_recorder.recorder_class``), so the append runs in a thread that must finish."""

    batch = [UserInput(_noise(i, 4000)) for i in range(3000)]
    a, b = EventStore(store_url), EventStore(store_url)
    a.append("r", [UserInput("first")])
    b.append("r", [UserInput("second")])  # a's cached head is now stale: its insert conflicts once
    done: list[int] = []
    writer = threading.Thread(target=lambda: done.append(len(a.append("r", batch))), daemon=True)
    writer.start()
    writer.join(timeout=120)
    assert not writer.is_alive(), "a large append did not return"
    assert done == [3000]
    events = b.read("r")
    assert [e.position for e in events] == list(range(1, 3003))
    assert [e.event for e in events[2:]] == batch
    a.close()
    b.close()


def test_stores_of_one_process_share_their_recorder_class(store_url: str) -> None:
    """A service opening a store per request must not make a class per open (a PostgreSQL
    store's recorder is a subclass made on first use, ``store.pg_recorder.recorder_class``)."""
    a, b = EventStore(store_url), EventStore(store_url)
    assert type(a.backend.recorder) is type(b.backend.recorder)
    a.close()
    b.close()


def test_an_event_citing_an_artifact_the_store_does_not_hold_is_refused(store: EventStore) -> None:
    """A run copied event by event from another store (a payload held there as an artifact) or a
    ref made by hand was accepted, and no fold of the run could read it back again, for good."""
    data = b"x" * 100_000
    ref = ArtifactRef(hash=blake3.blake3(data).hexdigest(), size=len(data), media_type="text/plain")
    store.append("cite", [UserInput("read it")])
    for event in (FileRead(path="big.txt", artifact=ref),
                  ToolResult(call_id="c1", artifact=ref)):
        with pytest.raises(ArtifactNotFoundError, match=ref.hash):
            store.append("cite", [call("c1"), event] if isinstance(event, ToolResult) else [event])
        assert store.version("cite") == 1
    assert store.put_artifact(data, "text/plain").hash == ref.hash
    store.append("cite", [FileRead(path="big.txt", artifact=ref)])
    assert store.version("cite") == 2 and store.verify("cite").ok


def test_a_media_block_without_bytes_or_url_or_with_no_pages_is_refused(store: EventStore) -> None:
    """Accepted before: a medium with no source was priced and listed as sent while the request
    dropped it, and a document of -3 pages made every later build fail with a ValidationError."""
    from contextfold.domain.errors import UnsupportedMediaError
    from contextfold.domain.events import DocumentBlock, TextBlock

    store.append("media", [UserInput("hi")])
    for blocks, error in (((TextBlock(text="what is this?"), ImageBlock(media_type="image/png")),
                           UnsupportedMediaError),
                          ((DocumentBlock(),), UnsupportedMediaError),
                          ((DocumentBlock(url="https://example.com/a.pdf", pages=-3),), InvalidInputError)):
        with pytest.raises(error, match="event 0 \\(user_input\\)"):
            store.append("media", [UserInput(content=blocks)])
    assert store.version("media") == 1
    store.append("media", [UserInput(content=(DocumentBlock(url="https://example.com/a.pdf", pages=2),))])
    assert store.version("media") == 2

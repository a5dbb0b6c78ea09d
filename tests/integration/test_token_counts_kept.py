"""Token counts kept by the store: the next process folds a run without tokenizing its long texts
again, and gets the same state and the same requests (every backend).

A "next process" is the same process with its counters emptied (``TokenCounter.clear``) and a new
``Store``: the counters are process-wide, the kept rows are the store's.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from contextfold.api import Store, open_store
from contextfold.audit.data import audit_run
from contextfold.domain.events import AnyEvent, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.kept_counts import KEEP_AFTER
from contextfold.projections.tokens import TokenCounter, counted_texts, get_counter
from contextfold.store import backends
from contextfold.store.store_url import parse_store_url
from contextfold.store.token_counts import TOKEN_COUNTS_TABLE
from tests.conftest import PG_URL
from tests.storage import pg_role, read_only

LONG_RUN = 40  # tool results, over KEEP_AFTER


def _log(i: int) -> str:
    """A long multi-line output (counted in line blocks, which truncation reads back)."""
    return "\n".join(f"[{i:03d}:{n:04d}] cargo test: module_{n} compiled, 3 warnings" for n in range(300))


def _events(first: int, count: int) -> list[AnyEvent]:
    events: list[AnyEvent] = []
    for i in range(first, first + count):
        events += [UserInput(f"step {i}: run the tests again and tell me what failed this time"),
                   ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="cargo"),)),
                   ToolResult(call_id=f"c{i}", content=_log(i), exit_code=1)]
    return events


@pytest.fixture
def counter() -> Iterator[TokenCounter]:
    counter = get_counter("cl100k_base")
    counter.clear()
    yield counter
    counter.clear()


def _next_process(store_url: str, counter: TokenCounter) -> Store:
    counter.clear()
    return open_store(store_url)


def test_a_run_folded_again_elsewhere_tokenizes_no_long_text_and_builds_the_same(
        store_url: str, counter: TokenCounter) -> None:
    with open_store(store_url) as store:
        run = store.run("kept")
        run.append(*_events(0, LONG_RUN))
        run.state()
        assert counter.calls >= LONG_RUN
        built = run.build("openai-chat", window=8_000, reserve=1_000)  # cuts logs by line blocks
        assert built.manifest.truncations
        first = run.state().fingerprint()  # with the build's record
    with _next_process(store_url, counter) as store:
        run = store.run("kept")
        with counted_texts() as tokenized:
            again = run.state()
        assert tokenized == []  # every long text's count was read back
        assert again.fingerprint() == first
        rebuilt = run.build("openai-chat", window=8_000, reserve=1_000)
        assert rebuilt.manifest.request_hash == built.manifest.request_hash
        assert rebuilt.manifest.truncations == built.manifest.truncations
        assert run.replay(built.manifest.turn).ok


def test_a_per_turn_fold_keeps_nothing_and_a_cold_fold_keeps_its_counts(
        store_url: str, counter: TokenCounter) -> None:
    """An agent loop's fold of a few new events writes no rows (a write per turn to save
    microseconds); the next cold fold keeps what it had to tokenize."""
    table = TOKEN_COUNTS_TABLE
    with open_store(store_url) as store:
        run = store.run("loop")
        for i in range(KEEP_AFTER + 4):
            run.append(*_events(i, 1))
            run.state()  # one new tool result per fold
        backend = store.events.backend
        rows = backend.query(f"SELECT COUNT(*) FROM {backend.table(table)} WHERE run_id = "
                             f"{backend.placeholder}", ("loop",))
        assert rows[0][0] == 0
    with _next_process(store_url, counter) as store:
        store.run("loop").state()
        backend = store.events.backend
        rows = backend.query(f"SELECT COUNT(*) FROM {backend.table(table)} WHERE run_id = "
                             f"{backend.placeholder}", ("loop",))
        assert rows[0][0] >= KEEP_AFTER
    with _next_process(store_url, counter) as store, counted_texts() as tokenized:
        store.run("loop").state()
        assert tokenized == []


def test_rows_that_are_not_counts_are_not_read_back(store_url: str, counter: TokenCounter) -> None:
    """The rows are a cache, never the truth: damaged line blocks or a negative count make the
    fold tokenize that text again, and the state is the one the log gives."""
    with open_store(store_url) as store:
        run = store.run("damaged")
        run.append(*_events(0, LONG_RUN))
        expected = run.state().fingerprint()
        backend = store.events.backend
        p = backend.placeholder
        table = backend.table(TOKEN_COUNTS_TABLE)
        digests = [bytes(r[0]) for r in backend.query(
            f"SELECT digest FROM {table} WHERE run_id = {p} AND blocks IS NOT NULL ORDER BY digest",
            ("damaged",))]
        assert len(digests) >= 3
        backend.execute(f"UPDATE {table} SET blocks = {p} WHERE digest = {p}", (b"\x01" * 32, digests[0]))
        backend.execute(f"UPDATE {table} SET blocks = {p} WHERE digest = {p}", (b"\x00" * 7, digests[1]))
        backend.execute(f"UPDATE {table} SET tokens = -5 WHERE digest = {p}", (digests[2],))
        backend.execute(f"UPDATE {table} SET encoding = {p} WHERE run_id = {p} AND digest <> {p} AND "
                        f"digest <> {p} AND digest <> {p}",
                        ("cl100k_base/0", "damaged", *digests[:3]))  # an older scheme: not read
    with _next_process(store_url, counter) as store, counted_texts() as tokenized:
        assert store.run("damaged").state().fingerprint() == expected
        assert len(tokenized) == LONG_RUN  # all of them again: three damaged, the rest of another scheme


def test_a_store_without_the_table_folds_as_before(store_url: str, counter: TokenCounter) -> None:
    """A store made by an older contextfold and opened without creating its schema has no table:
    nothing is kept, nothing fails."""
    with open_store(store_url) as store:
        backend = store.events.backend
        backend.execute(f"DROP TABLE {backend.table(TOKEN_COUNTS_TABLE)}")
    with open_store(store_url, create_schema=False) as store:
        run = store.run("old")
        run.append(*_events(0, LONG_RUN))
        expected = run.state().fingerprint()
    with _next_process(store_url, counter) as store:
        pass  # create_schema (the default) makes the table again for later folds
    counter.clear()
    with open_store(store_url, create_schema=False) as store, counted_texts() as tokenized:
        assert store.run("old").state().fingerprint() == expected
        assert len(tokenized) == LONG_RUN


def test_a_read_only_store_folds_and_keeps_nothing(tmp_path: Path, counter: TokenCounter) -> None:
    """Keeping the counts is best-effort: auditing a read-only store file works as before."""
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    with open_store(url) as store:
        store.run("ro").append(*_events(0, LONG_RUN))
    with read_only(path), open_store(url) as store:
        run = store.run("ro")
        with counted_texts() as tokenized:
            expected = run.state().fingerprint()
        assert len(tokenized) == LONG_RUN
        backend = store.events.backend
        assert backend.query(f"SELECT COUNT(*) FROM {TOKEN_COUNTS_TABLE}")[0][0] == 0
    with _next_process(url, counter) as store, counted_texts() as tokenized:
        assert store.run("ro").state().fingerprint() == expected
        assert len(tokenized) == LONG_RUN  # nothing was kept: counted again, and kept now
    with _next_process(url, counter) as store, counted_texts() as tokenized:
        store.run("ro").state()
        assert tokenized == []


def test_an_audit_in_a_new_process_reads_the_kept_counts(store_url: str, counter: TokenCounter) -> None:
    with open_store(store_url) as store:
        run = store.run("audited")
        run.append(*_events(0, LONG_RUN))
        expected = audit_run(run)  # rebuilds every turn: the turns have no records
    with _next_process(store_url, counter) as store, counted_texts() as tokenized:
        audit = audit_run(store.run("audited"))
        assert tokenized == []
        assert audit == expected


def test_a_read_only_store_made_before_the_table_opens_and_folds(
        tmp_path: Path, counter: TokenCounter) -> None:
    """Opening a store creates what is missing; a read-only store file made by an older
    contextfold has no token-count table and cannot take one: it opens without it."""
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    with open_store(url) as store:
        store.run("old").append(*_events(0, 3))
        store.events.backend.execute(f"DROP TABLE {TOKEN_COUNTS_TABLE}")
    with read_only(path), open_store(url) as store:
        assert store.run("old").state().version == 9


@pytest.mark.postgres
def test_a_read_only_postgresql_session_opens_a_store_with_or_without_the_table(
        pg_url: str, counter: TokenCounter) -> None:
    """A standby or a read-only role refuses even CREATE TABLE IF NOT EXISTS: opening a complete
    store there only reads its catalogue, and one made before the token-count table opens
    without it (and keeps no counts)."""
    with open_store(pg_url) as store:
        store.run("r").append(*_events(0, LONG_RUN))
    with pg_role(pg_url, "GRANT USAGE ON SCHEMA {s} TO {r}",
                 "GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO {r}") as role:
        role.read_only()
        with open_store(role.url) as store:
            expected = store.run("r").state().fingerprint()
        role.admin.execute(sql.SQL("DROP TABLE {}.{}").format(sql.Identifier(role.schema),
                                                              sql.Identifier(TOKEN_COUNTS_TABLE)))
        counter.clear()
        with open_store(role.url) as store, counted_texts() as tokenized:
            assert store.run("r").state().fingerprint() == expected
            assert len(tokenized) == LONG_RUN


@contextlib.contextmanager
def _counts_table_held(store_url: str) -> Iterator[None]:
    """Another process holding what the counts' insert needs, in an open transaction (an import
    inserting): SQLite's write lock, PostgreSQL's lock on the counts table."""
    parsed = parse_store_url(store_url)
    if parsed.scheme == "sqlite":
        other = sqlite3.connect(parsed.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            other.execute("ROLLBACK")
            other.close()
        return
    with psycopg.connect(PG_URL.split("?")[0]) as pg:
        table = sql.Identifier(parsed.schema, TOKEN_COUNTS_TABLE)
        pg.execute(sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(table))
        yield
        pg.rollback()


def test_a_fold_behind_another_writer_keeps_no_counts_rather_than_wait(
        store_url: str, counter: TokenCounter, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read (a fold in a new process: ``manifest``, ``replay``, a resumed worker) waited the
    whole lock timeout (SQLite's 30 s) to keep its counts while another process wrote, then
    dropped them anyway. It keeps none now, at once; the next fold keeps them."""
    lock_timeout = 5.0
    monkeypatch.setattr(backends, "SQLITE_LOCK_TIMEOUT", lock_timeout)
    url = store_url if store_url.startswith("sqlite") else f"{store_url}&lock_timeout={lock_timeout}"
    with open_store(url) as store:
        store.run("busy").append(*_events(0, LONG_RUN))
    counter.clear()
    with open_store(url) as store:
        with _counts_table_held(store_url):
            started = time.monotonic()
            assert store.run("busy").state().version == 3 * LONG_RUN
            took = time.monotonic() - started
        assert took < lock_timeout - 1, took
        backend = store.events.backend
        count = f"SELECT COUNT(*) FROM {backend.table(TOKEN_COUNTS_TABLE)}"
        assert backend.query(count)[0][0] == 0  # given up, not written late
    with _next_process(url, counter) as store:
        store.run("busy").state()
        backend = store.events.backend
        assert backend.query(count)[0][0] >= KEEP_AFTER

"""How many times a PostgreSQL append waits for the server: once, for an append to a run the store
knows, its head check, insert and COMMIT sent together.

Why it matters: each round trip is a wait of the agent on its critical path, and, inside the
transaction, a wait of the server on the client with the insert's locks held (``ClientRead`` in
``scripts/bench_concurrent.py``'s samples: on a loaded machine each one is a wake-up of two
processes). eventsourcing's insert, with the head check read before it, waited four times: the
head row fetched, the insert synced, the pipeline's end, the COMMIT. Counted through a TCP proxy
(:attr:`tests.tcp_proxy.TcpProxy.round_trips`), not timed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from urllib.parse import urlparse

import pytest

from contextfold.api import open_store
from contextfold.domain.events import AnyEvent, ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.store.backends import PostgresBackend
from contextfold.store.event_store import EventStore
from tests.tcp_proxy import TcpProxy


@pytest.fixture
def proxied(pg_url: str) -> Iterator[tuple[TcpProxy, str]]:
    """A proxy in front of the test server, and the test store's URL through it."""
    parsed = urlparse(pg_url)
    with TcpProxy((parsed.hostname or "127.0.0.1", parsed.port or 5432)) as proxy:
        yield proxy, parsed._replace(netloc=f"{parsed.username}@127.0.0.1:{proxy.port}").geturl()


def _warm(store: EventStore) -> None:
    """The pool's connections made, and each one's statements prepared (a statement's first use on
    a connection is a round trip of its own, once): new runs' first appends, one per connection
    and more, and the store's own first read done."""
    backend = store.backend
    assert isinstance(backend, PostgresBackend)
    backend.datastore.pool.wait(30)
    for i in range(2 * backend.datastore.pool.max_size):
        store.append(f"warm-{i}", [UserInput("warming up")])
        store.append(f"warm-{i}", [UserInput("warming up")])


def _round_trips(proxy: TcpProxy, store: EventStore, run_id: str, events: Sequence[AnyEvent]) -> int:
    """The round trips of ``store.append(run_id, events)``."""
    before = proxy.round_trips
    store.append(run_id, events)
    return proxy.round_trips - before


def _turn(i: int) -> tuple[list[ModelResponse], list[ToolResult]]:
    call = ToolCall(call_id=f"c{i}", name="search", arguments='{"q": "refund policy"}')
    return ([ModelResponse(text=f"Looking it up ({i}).", tool_calls=[call])],
            [ToolResult(call_id=f"c{i}", content="Refunds within 24 hours of booking.\n" * 40)])


@pytest.mark.postgres
def test_an_append_to_a_run_the_store_knows_is_one_round_trip(proxied: tuple[TcpProxy, str]) -> None:
    proxy, url = proxied
    with EventStore(url) as store:
        _warm(store)
        store.append("r", [RunStarted(agent="a", model="gpt-4o"), UserInput("Refund my flight.")])
        for i in range(3):
            response, result = _turn(i)
            assert _round_trips(proxy, store, "r", response) == 1
            assert _round_trips(proxy, store, "r", result) == 1
        assert [r.event.type for r in store.read("r")][-2:] == ["model_response", "tool_result"]
        assert store.verify("r").ok


@pytest.mark.postgres
def test_a_run_s_first_append_in_a_store_reads_its_head_then_writes_in_one_round_trip(
        proxied: tuple[TcpProxy, str]) -> None:
    proxy, url = proxied
    with EventStore(url) as store:
        _warm(store)
        assert _round_trips(proxy, store, "new", [UserInput("hi")]) == 2


@pytest.mark.postgres
def test_a_build_s_record_is_written_in_one_round_trip(proxied: tuple[TcpProxy, str]) -> None:
    """The record of each build, a keyframe then deltas of it (the head and the keyframe both
    checked by the insert)."""
    proxy, url = proxied
    with open_store(url) as store:
        _warm(store.events)
        run = store.run("r")
        run.append(RunStarted(agent="a", model="gpt-4o", encoding="cl100k_base"),
                   UserInput("Refund my flight."))
        for i in range(3):
            response, result = _turn(i)
            run.append(*response, *result)
            built = run.build(provider="openai-chat", window=16_000, reserve=1_000, record=False)
            record = built.record()
            assert _round_trips(proxy, store.events, "r", [record]) == 1
        assert run.verify().ok

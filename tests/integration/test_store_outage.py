"""A PostgreSQL server that goes away: an operation fails within the URL's connect timeout, typed,
with nothing half-written, and the same append goes through as soon as the server is back.

The outage is staged with a TCP proxy in front of the shared test server (which is never stopped):
taking the proxy down refuses new connections and cuts the pooled ones, as a stopped server does."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from urllib.parse import urlparse

import pytest

from contextfold.api import Store, open_store
from contextfold.domain.errors import StoreUnavailableError
from contextfold.domain.events import UserInput
from contextfold.store.backends import PostgresBackend
from tests.tcp_proxy import TcpProxy

CONNECT_TIMEOUT = 2.0
OUTAGE = 10.0
"""Seconds the server stays away: psycopg_pool's reconnection attempts, 1, 3, 7 and 15 s after the
first failure, then leave it alone from 8 to 13.5 s, longer than the append after the outage waits
for a connection (``CONNECT_TIMEOUT``)."""


@pytest.fixture
def proxied(pg_url: str) -> Iterator[tuple[TcpProxy, str]]:
    """The test store's URL through a proxy, with ``connect_timeout`` set."""
    parsed = urlparse(pg_url)
    with TcpProxy((parsed.hostname or "127.0.0.1", parsed.port or 5432)) as proxy:
        netloc = f"{parsed.username}@127.0.0.1:{proxy.port}"
        query = f"{parsed.query}&connect_timeout={CONNECT_TIMEOUT:g}"
        yield proxy, parsed._replace(netloc=netloc, query=query).geturl()


def _pool_stats(store: Store) -> tuple[int, int]:
    """Connections asked of the store's pool so far, and the connections it holds now."""
    backend = store.events.backend
    assert isinstance(backend, PostgresBackend)
    stats = backend.datastore.pool.get_stats()
    return stats.get("requests_num", 0), stats["pool_size"]


@pytest.mark.postgres
def test_an_append_during_an_outage_fails_within_the_connect_timeout_and_goes_through_once_back(
        proxied: tuple[TcpProxy, str]) -> None:
    """eventsourcing retried an insert (and a read) 10 times, each waiting the pool's timeout for a
    connection the pool could not make: an append blocked 37 s (a run's first append, which reads
    first, 52 s) before StoreUnavailableError. Now a connection that cannot be had is not asked
    for again; the dead pooled ones are retried at once. And the pool, which backed off its
    reconnection for up to minutes, tried again only after the server had long been back: the
    first append after the outage waited 28 s. Now it goes through at once."""
    proxy, url = proxied
    store = open_store(url)
    try:
        run = store.run("r")
        run.append(UserInput("go"))
        proxy.down()
        down_at = time.monotonic()
        appends: list[tuple[str, Callable[[], object]]] = [
            ("append", lambda: run.append(UserInput("during"))),
            ("a new run's first append", lambda: store.run("new").append(UserInput("x")))]
        for label, append in appends:
            asked, held = _pool_stats(store)
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError, match=r"did not answer.*\?connect_timeout="):
                append()
            elapsed = time.monotonic() - started
            # the pool is asked once per dead connection it held, then once more (the wait), not
            # the 10 times eventsourcing asked; the time: one wait, not 10 (20 s)
            assert _pool_stats(store)[0] - asked <= held + 1 < 10, (label, held)
            assert elapsed < 5 * CONNECT_TIMEOUT, (label, elapsed)
        time.sleep(max(0.0, down_at + OUTAGE - time.monotonic()))  # the agent waits, then retries
        proxy.up()
        recorded = run.append(UserInput("during"))  # the caller's retry, once, right away
        assert [r.position for r in recorded] == [2]
        assert [e.event.text for e in run.events()] == ["go", "during"]  # type: ignore[union-attr]
        assert run.verify().ok
        assert [r.run_id for r in store.runs()] == ["r"]  # the failed new run left nothing
    finally:
        store.close()

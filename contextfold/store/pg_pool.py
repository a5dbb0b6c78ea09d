"""The PostgreSQL store's connection pool: eventsourcing's datastore with bounded reconnection,
libpq's timeouts, and a tenant's role set on each connection.

Split from :mod:`contextfold.store.backends` (which re-exports :func:`libpq_dead_peer`), whose
PostgreSQL backend makes its datastore with :func:`datastore_class`.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from typing import Any

from contextfold.store.driver_errors import PoolExhausted

__all__ = ["datastore_class", "libpq_dead_peer", "libpq_timeout"]


def libpq_timeout(seconds: float) -> int:
    """libpq's ``connect_timeout``: whole seconds, at least 2 (libpq's own minimum)."""
    return max(2, math.ceil(seconds))


def libpq_dead_peer(seconds: float) -> dict[str, Any]:
    """libpq's parameters that drop a connection whose server stopped answering after about
    ``seconds`` (``?network_timeout=``): keepalives from a third of it on, four unanswered ones
    (a statement waiting for its answer), and ``tcp_user_timeout`` (data sent and never
    acknowledged). Through a partition staged in ``tests/integration/test_store_outage.py``, an
    append with ``?network_timeout=3`` fails typed in ~7 s; without these it was still waiting
    after 60 s, for the system's TCP retransmissions (``tcp_retries2`` 15: ~15 minutes)."""
    idle = max(1, math.ceil(seconds / 3))
    return {"keepalives": 1, "keepalives_idle": idle, "keepalives_count": 4,
            "keepalives_interval": max(1, math.ceil((seconds - idle) / 4)),
            "tcp_user_timeout": max(1000, math.ceil(seconds * 1000))}


def _reconnect_for_waiting_clients(pool: Any) -> None:
    """Start another reconnection when one gave up while operations still wait for a connection.

    Why: psycopg_pool grows for a waiting operation only when no reconnection attempt of its own
    is pending; an operation that came while one was waited on it, and when it gave up nothing
    tried again for it. The server came back within the operation's wait (the caller's retry
    right after a network heals) and the operation failed anyway. The wait bounds this: once no
    operation waits, a reconnection that gives up is not followed by another (psycopg_pool leaves
    the clients that timed out in its queue; they are not counted). psycopg_pool has no public
    hook for this: if its internals change, the pool behaves as it did before (no error in its
    worker), and ``test_store_outage.py`` fails."""
    try:
        with pool._lock:
            if any(client.conn is None and client.error is None for client in pool._waiting):
                pool._maybe_grow_pool()
    except AttributeError:
        return


@functools.cache
def _exhausted_class() -> type[Exception]:
    """psycopg_pool's ``PoolTimeout`` marked :class:`PoolExhausted` (made on first use: the pool
    module is imported by a PostgreSQL store only)."""
    import psycopg_pool

    class PoolTimeoutExhausted(PoolExhausted, psycopg_pool.PoolTimeout):
        pass

    return PoolTimeoutExhausted


class _InUse:
    """How many of a pool's connections this process's operations hold: taken with ``getconn``
    and not yet given back with ``putconn``.

    Why counted here and not read from the pool: psycopg_pool's ``pool_size`` counts a connection
    from the moment it starts to make it, so a pool whose one connection was still being made
    (the server slow to answer, a loaded machine: 1.7 s against a 1 s ``connect_timeout``) read
    as "all 1 connections in use", and the wait for the server was reported as this process's
    own pool being busy ("raise ?pool_size="), the advice wrong and the outage hidden."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()  # a forked child makes a new pool (pg_backend), and a new count

    def add(self, n: int) -> None:
        with self._lock:
            self.count += n


def _full(pool: Any, in_use: _InUse) -> bool:
    """Whether this process's operations hold every connection the pool may have (a pool that
    could not connect, or is still connecting, holds fewer in their hands)."""
    return bool(in_use.count >= pool.max_size)


def _putconn_counted(putconn: Any, in_use: _InUse, conn: Any) -> None:
    in_use.add(-1)
    putconn(conn)


def _getconn_counted(pool: Any, getconn: Any, pool_timeout: float, in_use: _InUse,
                     timeout: float | None = None) -> Any:
    conn = _getconn_waiting(pool, getconn, pool_timeout, in_use, timeout)
    in_use.add(1)
    return conn


def _getconn_waiting(pool: Any, getconn: Any, pool_timeout: float, in_use: _InUse,
                     timeout: float | None = None) -> Any:
    """A connection of ``pool``, waited for up to ``pool_timeout`` while every one is in use.

    Why: psycopg_pool has one timeout for both waits, the pool's ``connect_timeout``, so a
    twelfth thread's append, waiting for one of ten connections each held by a statement that
    waited for a lock, failed after 5 s as an outage ("the server did not answer") with the
    server up. A wait that times out while the pool could not connect is still the outage,
    reported after ``connect_timeout``; one that times out while this process's operations hold
    every connection the pool may have (:class:`_InUse`) waits on, and after ``pool_timeout`` is
    :class:`PoolExhausted` (a StoreBusyError)."""
    import psycopg_pool

    if timeout is not None:
        return getconn(timeout)
    started = time.monotonic()
    deadline = started + pool_timeout
    while True:
        try:
            return getconn(max(0.0, min(pool.timeout, deadline - time.monotonic())))
        except psycopg_pool.PoolTimeout as exc:
            if not _full(pool, in_use):
                raise
            if time.monotonic() >= deadline:
                raise _exhausted_class()(
                    f"all {pool.max_size} connections in use for {time.monotonic() - started:.1f} s") from exc


def datastore_class(role: str | None, network_timeout: float, lock_timeout: float,
                    pool_timeout: float) -> type[Any]:
    """eventsourcing's PostgresDatastore, with a pool that stops reconnecting after the connect
    timeout, and ``SET ROLE`` on every new pooled connection when ``role`` is given.

    Why the reconnection is bounded: psycopg_pool retries a failed connection in the background
    with a doubling delay for up to 5 minutes, so after an outage of a minute the server was back
    for up to another minute before the pool tried again, and every operation meanwhile waited out
    the connect timeout and failed. Given up after ``connect_timeout``, a connection is made again
    when an operation asks for one (the pool grows on demand), at once, or, for an operation that
    was already waiting, when the attempt gives up (:func:`_reconnect_for_waiting_clients`). libpq's own
    ``connect_timeout`` bounds each attempt (the pool's connections had none: a server that drops
    packets held a pool worker for the system's TCP timeout), and :func:`libpq_dead_peer` bounds
    the wait on a connection whose server stopped answering.

    Every connection's statements wait at most ``lock_timeout`` for a lock (the session's
    ``lock_timeout``; eventsourcing's ``idle_in_transaction_session_timeout`` is given as long by
    the backend), and an operation waits up to ``pool_timeout`` for a connection while every one
    is in use (:func:`_getconn_waiting`).

    The role is a tenant's (see :mod:`contextfold.store.tenants`): from the first
    statement on, the connection has that role's privileges and no others.
    """
    from eventsourcing.postgres import PostgresDatastore
    from psycopg import sql

    set_role = None if role is None else sql.SQL("SET ROLE {}").format(sql.Identifier(role))
    milliseconds = f"{math.ceil(lock_timeout * 1000)}ms"
    set_lock_timeout = sql.SQL("SET lock_timeout = {}").format(sql.Literal(milliseconds))

    class Datastore(PostgresDatastore):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            pool = self.pool  # not opened yet: opened by the first get_connection
            pool.reconnect_timeout = pool.timeout
            pool._reconnect_failed = _reconnect_for_waiting_clients  # its reconnect_failed= callback
            assert isinstance(pool.kwargs, dict)
            pool.kwargs["connect_timeout"] = libpq_timeout(pool.timeout)
            pool.kwargs.update(libpq_dead_peer(network_timeout))
            in_use = _InUse()
            pool.getconn = functools.partial(  # type: ignore[method-assign]
                _getconn_counted, pool, pool.getconn, pool_timeout, in_use)
            pool.putconn = functools.partial(  # type: ignore[method-assign]
                _putconn_counted, pool.putconn, in_use)

        def after_connect_func(self) -> Any:
            base = super().after_connect_func()

            def after_connect(conn: Any) -> None:
                base(conn)
                conn.execute(set_lock_timeout)
                if set_role is not None:
                    conn.execute(set_role)

            return after_connect

    return Datastore

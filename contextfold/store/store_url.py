"""Store URLs: ``sqlite:///path.db`` and ``postgresql://user@host:port/db?schema=...``, parsed
and checked before anything is opened, and shown with the password masked.

Split from :mod:`contextfold.store.backends` (which re-exports these names) so that the error
translation (:mod:`contextfold.store.driver_errors`) can name a SQLite store's file.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from urllib.parse import ParseResult, parse_qs, unquote, urlparse

from contextfold.domain.errors import StoreConfigError

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_NETWORK_TIMEOUT",
    "DEFAULT_POOL_SIZE",
    "DEFAULT_POOL_TIMEOUT",
    "DEFAULT_STORE_URL",
    "MAX_CONNECT_TIMEOUT",
    "StoreURL",
    "display_url",
    "parse_store_url",
    "store_url_from_env",
    "worker_reopen_advice",
]

DEFAULT_CONNECT_TIMEOUT = 5.0
"""Seconds a PostgreSQL operation waits for a connection (``?connect_timeout=``): to connect, or
for a pooled one. During an outage an operation fails with :class:`StoreUnavailableError` after
about this long (a lost connection is retried at once first; waiting is not retried)."""
MAX_CONNECT_TIMEOUT = 3600.0
DEFAULT_NETWORK_TIMEOUT = 30.0
"""Seconds a PostgreSQL connection whose server stopped answering (a network partition, a host
that died without closing its connections) is kept before the operation on it fails with
:class:`StoreUnavailableError` (``?network_timeout=``). Without it, a statement sent into a
partition waited for the system's TCP retransmissions to give up: ~15 minutes on Linux. Applied
as TCP keepalives and ``TCP_USER_TIMEOUT``: a live server's host answers both at once, however
long its statement runs, so a slow query is not cut."""
DEFAULT_LOCK_TIMEOUT = 30.0
"""Seconds a statement waits for a lock another session holds (``?lock_timeout=``) before it
fails with :class:`StoreBusyError`: on SQLite the busy timeout, on PostgreSQL ``lock_timeout``
(every append takes the events table's lock). On PostgreSQL a session of the store left idle
inside a transaction for a third of it (at least 1 s: ``idle_in_transaction_session_timeout``)
is ended by the server, so a stopped or frozen process's lock is released before the others'
waits run out, and their appends go through. Without them one stalled writer blocked appends
to every run of a PostgreSQL store for as long as it was stopped."""
DEFAULT_POOL_SIZE = 10
"""Connections a PostgreSQL store object keeps at most (``?pool_size=``), shared by its threads."""
DEFAULT_POOL_TIMEOUT = 60.0
"""Seconds an operation waits for a pooled PostgreSQL connection while every one is in use
(``?pool_timeout=``) before it fails with :class:`StoreBusyError`: longer than a statement's
wait for a lock (:data:`DEFAULT_LOCK_TIMEOUT`), which is what holds a connection longest.
Waiting for the server to accept a new connection is ``connect_timeout``: an outage is still
reported after that."""

DEFAULT_STORE_URL = "sqlite:///contextfold.db"


def store_url_from_env(url: str | None = None) -> str:
    """``url`` if given, else ``$CONTEXTFOLD_STORE``, else ``sqlite:///contextfold.db``. An empty
    ``url`` is given (and refused by :func:`parse_store_url`), never the default store."""
    if url is not None:
        return url
    return os.environ.get("CONTEXTFOLD_STORE") or DEFAULT_STORE_URL


@dataclass(frozen=True)
class StoreURL:
    scheme: str
    path: str = ""
    host: str = ""
    port: int = 5432
    user: str = ""
    password: str = ""
    dbname: str = ""
    schema: str = "public"
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    network_timeout: float = DEFAULT_NETWORK_TIMEOUT
    lock_timeout: float | None = None
    """``?lock_timeout=``; None: the default (:data:`DEFAULT_LOCK_TIMEOUT`)."""
    pool_size: int = DEFAULT_POOL_SIZE
    pool_timeout: float = DEFAULT_POOL_TIMEOUT


_SQLITE_OPTIONS = frozenset({"lock_timeout"})
_PG_OPTIONS = frozenset({"schema", "connect_timeout", "network_timeout", "host", "lock_timeout", "pool_size",
                         "pool_timeout"})
_MAX_POOL_SIZE = 1000
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""Lower case only: eventsourcing names the schema unquoted in one query (its row type's lookup),
where PostgreSQL folds it to lower case, so a schema ``MixedCase`` was created (quoted) and then
not found on the first append. Reserved words (``user``) are refused by the server's list in
``PostgresBackend._probe``, for the same reason."""


def display_url(url: str) -> str:
    """``url`` with its password, if any, shown as ``***`` (for messages and listings)."""
    try:
        parsed = urlparse(url)
    except ValueError:  # a URL urlparse refuses: mask what sits where a password would
        return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)
    if parsed.query and "password=" in parsed.query:  # libpq's ?password=, which no URL should hold
        url = re.sub(r"(?<=[?&]password=)[^&#]*", "***", url)
        parsed = urlparse(url)
    if parsed.password is None:  # none, or one urlparse did not see: u:pa#ss@host cut at the '#'
        return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)
    return parsed._replace(netloc=parsed.netloc.replace(f":{parsed.password}@", ":***@", 1)).geturl()


def worker_reopen_advice(url: str, reopen: str) -> str:
    """How a worker gets the store a pickled handle was refused for: ``reopen`` (the call that opens
    it from its URL), unless the store is an in-memory SQLite one (``sqlite:///:memory:``), which
    lives in this process only: a worker that opened that URL would get a new, empty store, so the
    advice is a file or PostgreSQL instead."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite" and unquote(parsed.path[1:]) == ":memory:":
        return ("an in-memory SQLite store (sqlite:///:memory:) lives in this process only, and a worker "
                "that opened that URL would get a new, empty store: give the workers a store they can "
                "share, a file (sqlite:///runs.db) or PostgreSQL, and send run ids, not handles")
    return reopen


def _host(parsed: ParseResult) -> str:
    """The URL's host as written (``hostname`` lower-cases it), percent-decoded: a Unix socket's
    directory is given as ``%2Fvar%2Frun%2Fpostgresql``, as libpq takes it."""
    hostport = parsed.netloc.rpartition("@")[2]
    if hostport.startswith("["):  # an IPv6 address (its zone, %25lo, decoded as libpq does)
        return unquote(hostport[1:hostport.find("]")])
    return unquote(hostport.rpartition(":")[0] if ":" in hostport else hostport)


def _given_host(options: dict[str, list[str]], url: str) -> str:
    """``?host=``, refused empty as ``?schema=`` is: someone meant a socket directory and lost it."""
    if "host" not in options:
        return ""
    if not options["host"][0]:
        raise StoreConfigError(f"empty host in the store URL {display_url(url)!r}: give ?host=/socket/dir, "
                               "or leave the option out")
    return options["host"][0]


def parse_store_url(url: str) -> StoreURL:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite:///:memory:``,
    ``postgresql://user[:pw]@host[:port]/dbname[?schema=name][&connect_timeout=seconds]
    [&network_timeout=seconds][&lock_timeout=seconds][&pool_size=n][&pool_timeout=seconds]``;
    a sqlite URL takes ``?lock_timeout=seconds``."""
    if not url.strip():
        raise StoreConfigError(f"an empty store URL ({url!r}): use sqlite:///path.db or "
                               "postgresql://user@host:port/db")
    try:
        parsed = urlparse(url)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket: postgresql://u@[::1/db
        raise StoreConfigError(f"invalid store URL {display_url(url)!r}: {exc}") from exc
    # an option we would not apply (?mode=ro, ?sslmode=require) must not be dropped in silence
    options = parse_qs(parsed.query, keep_blank_values=True)
    known = _PG_OPTIONS if parsed.scheme in ("postgresql", "postgres") else _SQLITE_OPTIONS
    unknown = sorted(set(options) - known)
    if unknown and parsed.scheme in ("sqlite", "postgresql", "postgres"):
        raise StoreConfigError(
            f"unsupported option {', '.join(map(repr, unknown))} in the store URL {display_url(url)!r}: "
            "a postgresql URL takes ?schema=name, ?host=socket-directory, ?connect_timeout=seconds, "
            "?network_timeout=seconds, ?lock_timeout=seconds, ?pool_size=connections and "
            "?pool_timeout=seconds only (TLS and the "
            "like: libpq's environment, e.g. PGSSLMODE), a sqlite URL ?lock_timeout=seconds only")
    if parsed.scheme in ("sqlite", "postgresql", "postgres"):
        _refuse_ignored_parts(parsed, url, options)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path[1:] if parsed.path.startswith("/") else parsed.path)
        if not path:
            raise StoreConfigError(f"sqlite URL needs a file path: {display_url(url)!r}")
        return StoreURL(scheme="sqlite", path=path, lock_timeout=_lock_timeout(options, url))
    if parsed.scheme in ("postgresql", "postgres"):
        dbname = unquote(parsed.path.lstrip("/"))  # as libpq reads it: "my%20db" names "my db"
        if not dbname:
            raise StoreConfigError(f"postgresql URL needs a database name: {display_url(url)!r}")
        schema = options.get("schema", ["public"])[0]
        if not schema:  # ?schema= is not ?schema=public: someone meant a name and lost it
            raise StoreConfigError(
                f"empty schema in the store URL {display_url(url)!r}: give ?schema=name, or leave "
                "the option out for 'public'")
        if not _SCHEMA_NAME.fullmatch(schema):  # it is spliced into DDL as a quoted identifier
            raise StoreConfigError(
                f"invalid schema {schema!r} in the store URL: 1-63 characters a-z, 0-9 and _, "
                "not starting with a digit")
        try:
            port = parsed.port or 5432
        except ValueError as exc:
            raise StoreConfigError(
                f"invalid port in the store URL {display_url(url)!r}: {exc}") from exc
        return StoreURL(
            scheme="postgresql",
            host=_given_host(options, url) or _host(parsed) or "127.0.0.1",
            port=port,
            # no user in the URL: libpq's $PGUSER, as psql takes it, else postgres
            user=unquote(parsed.username) if parsed.username else os.environ.get("PGUSER") or "postgres",
            password=unquote(parsed.password or ""),
            dbname=dbname,
            schema=schema,
            connect_timeout=_seconds(options, url, "connect_timeout", DEFAULT_CONNECT_TIMEOUT),
            network_timeout=_seconds(options, url, "network_timeout", DEFAULT_NETWORK_TIMEOUT),
            lock_timeout=_lock_timeout(options, url),
            pool_size=_pool_size(options, url),
            pool_timeout=_seconds(options, url, "pool_timeout", DEFAULT_POOL_TIMEOUT),
        )
    raise StoreConfigError(
        f"unsupported store URL {display_url(url)!r}: use sqlite:///path.db or "
        "postgresql://user@host:port/db"
    )


def _seconds(options: dict[str, list[str]], url: str, name: str, default: float) -> float:
    """The option ``name`` in seconds (``default`` when absent): ``connect_timeout``, how long an
    operation waits for a connection before it reports the server unavailable;
    ``network_timeout``, how long a connection is given once its server stops answering;
    ``lock_timeout`` and ``pool_timeout``, how long it waits for a lock or a pooled connection
    before it reports the store busy."""
    if name not in options:
        return default
    text = options[name][0]
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_CONNECT_TIMEOUT:  # also refuses nan and inf
        raise StoreConfigError(
            f"invalid {name} {text!r} in the store URL {display_url(url)!r}: a number of "
            f"seconds above 0 and at most {MAX_CONNECT_TIMEOUT:g}")
    return value


def _lock_timeout(options: dict[str, list[str]], url: str) -> float | None:
    return _seconds(options, url, "lock_timeout", 0.0) if "lock_timeout" in options else None


def _pool_size(options: dict[str, list[str]], url: str) -> int:
    """``?pool_size=``: the most connections the store's pool holds (1 to 1000)."""
    text = options.get("pool_size", [str(DEFAULT_POOL_SIZE)])[0]
    if not (text.isdigit() and 1 <= int(text) <= _MAX_POOL_SIZE):
        raise StoreConfigError(f"invalid pool_size {text!r} in the store URL {display_url(url)!r}: "
                               f"a whole number of connections from 1 to {_MAX_POOL_SIZE}")
    return int(text)


def _refuse_ignored_parts(parsed: ParseResult, url: str, options: dict[str, list[str]]) -> None:
    """Refuse what a store URL holds that would be ignored: an option given twice (which one
    wins?), a ``#fragment`` (``sqlite:///runs#2.db`` opened ``runs``), a host in a sqlite URL."""
    repeated = sorted(name for name, values in options.items() if len(values) > 1)
    if repeated:
        raise StoreConfigError(
            f"option {', '.join(map(repr, repeated))} given more than once in the store URL "
            f"{display_url(url)!r}: give it once")
    if parsed.fragment or url.endswith("#"):
        raise StoreConfigError(
            f"a '#' fragment in the store URL {display_url(url)!r} would be ignored: write a '#' "
            "in a name as %23")
    if parsed.scheme == "sqlite" and parsed.netloc:
        raise StoreConfigError(
            f"a sqlite URL takes no host ({parsed.netloc!r} in {display_url(url)!r}): "
            "sqlite:///relative/path.db or sqlite:////absolute/path.db")

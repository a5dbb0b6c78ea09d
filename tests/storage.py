"""Real storage refusals for the SQLite store tests: a read-only file or directory, a full database.

Read-only: file modes do not stop root (these tests run as root in CI), so when ``chmod`` leaves the
path writable the immutable attribute is set (``chattr +i``, which stops root too). Full: SQLite's
``max_page_count``, set on every connection the store's pool makes, gives SQLite's own
"database or disk is full" (SQLITE_FULL, as a full file system does) on the store's connections."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import psycopg
import pytest
from eventsourcing.sqlite import SQLiteConnectionPool
from psycopg import sql

from contextfold.store.store_url import parse_store_url

__all__ = ["PgRole", "page_limit", "pg_role", "read_only"]


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` (a file or a directory) read-only for this process, writable again on exit."""
    mode = path.stat().st_mode
    path.chmod(0o555 if path.is_dir() else 0o444)
    immutable = os.access(path, os.W_OK)  # root: modes do not apply
    if immutable:
        subprocess.run(["chattr", "+i", str(path)], check=True, capture_output=True)
    try:
        assert not os.access(path, os.W_OK), f"could not make {path} read-only"
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True, capture_output=True)
        path.chmod(mode)


@contextlib.contextmanager
def page_limit(monkeypatch: pytest.MonkeyPatch, pages: int) -> Iterator[None]:
    """Connections made meanwhile by any SQLite store's pool are limited to ``pages`` pages
    (``PRAGMA max_page_count``; a limit below the file's size is the size: nothing more fits).
    A store opened meanwhile keeps the limit until it is closed."""
    create = SQLiteConnectionPool._create_connection

    def limited(self: SQLiteConnectionPool) -> Any:
        conn = create(self)
        raw: sqlite3.Connection = conn._sqlite_conn  # eventsourcing's wrapper
        raw.execute(f"PRAGMA max_page_count = {int(pages)}")
        return conn

    with monkeypatch.context() as m:
        m.setattr(SQLiteConnectionPool, "_create_connection", limited)
        yield


@dataclass(frozen=True)
class PgRole:
    """A login role made for a test: its name, a store URL that connects as it, the schema of the
    store it was granted on, and an admin connection (autocommit) to change it with."""

    name: str
    url: str
    schema: str
    admin: psycopg.Connection[Any]

    def read_only(self) -> None:
        """Every later session of the role is read-only (``default_transaction_read_only``), as
        on a standby."""
        self.admin.execute(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(
            sql.Identifier(self.name)))


@contextlib.contextmanager
def pg_role(pg_url: str, *grants: str) -> Iterator[PgRole]:
    """A new login role on the store ``pg_url`` names, given ``grants`` (SQL with ``{s}`` for the
    schema and ``{r}`` for the role), dropped with what it owns on exit."""
    parsed = urlparse(pg_url)
    schema = parse_store_url(pg_url).schema
    name = f"cf_ro_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(parsed._replace(query="").geturl(), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        try:
            for grant in grants:
                admin.execute(sql.SQL(grant).format(s=sql.Identifier(schema), r=sql.Identifier(name)))
            url = parsed._replace(netloc=f"{name}@{parsed.hostname}:{parsed.port or 5432}").geturl()
            yield PgRole(name, url, schema, admin)
        finally:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))

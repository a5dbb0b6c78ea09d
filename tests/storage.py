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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.sqlite import SQLiteConnectionPool

__all__ = ["page_limit", "read_only"]


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

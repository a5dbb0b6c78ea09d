"""What a SQLite store URL's path points at, checked before SQLite opens (or creates) anything.

SQLite's own answers name neither the path nor the problem: a directory is "unable to open
database file" (a :class:`StoreUnavailableError`, as if a retry could help), a text file is
"file is not a database", a FIFO blocks or is a "disk I/O error". Each is a
:class:`StoreConfigError` here: the URL names something that cannot be a store.
"""

from __future__ import annotations

import stat
from pathlib import Path

from contextfold.domain.errors import StoreConfigError

__all__ = ["SQLITE_HEADER", "check_sqlite_path"]

SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file (an empty file is an empty database)."""


def check_sqlite_path(path: str, url: str) -> None:
    """Raise :class:`StoreConfigError` if ``path`` (of the store URL ``url``) cannot be a store:
    its directory is missing or not a directory, or it is a directory, not a regular file, or a
    file that is not a SQLite database. A path that does not exist yet is a new store."""
    if path == ":memory:":
        return
    target = Path(path)
    parent = target.resolve().parent
    if not parent.is_dir():
        if parent.exists():
            raise StoreConfigError(f"{parent} is not a directory, so it cannot hold the store {url!r}")
        raise StoreConfigError(f"directory {parent} does not exist for {url!r}")
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreConfigError(f"cannot use {path} as the store {url!r}: {exc.strerror}") from exc
    if stat.S_ISDIR(mode):
        raise StoreConfigError(f"{path} is a directory, not a contextfold SQLite store file ({url!r})")
    if not stat.S_ISREG(mode):
        raise StoreConfigError(f"{path} is not a regular file, so not a contextfold SQLite store ({url!r})")
    try:
        with target.open("rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreConfigError(f"cannot read {path}, the store {url!r}: {exc.strerror}") from exc
    if header and header != SQLITE_HEADER:
        raise StoreConfigError(f"{path} is not a contextfold SQLite store (not a database): {url!r}")

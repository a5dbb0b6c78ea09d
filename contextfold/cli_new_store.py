"""The store a command that starts runs (``import``, ``demo``) creates, removed again when the
command recorded nothing: a SQLite file, or a PostgreSQL schema.

Why: a Ctrl-C during an import into a new file, or an import the store refused, left the file
behind made into an empty store, and every later command took it for one that had been
recorded into ("no runs in ...") instead of saying there is no store there. Only a file the
command itself created is removed, and only while it holds no run: a file that was there before
(even an empty one), or that another process recorded into meanwhile, is left alone. The same
holds for a PostgreSQL ``?schema=`` (:mod:`contextfold.store.pg_new_schema`): one that did not
exist when the command started, and holds no event when it fails, is dropped; one that existed
before is never touched.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contextfold.domain.errors import ContextfoldError
from contextfold.store.backends import parse_store_url
from contextfold.store.event_store import store_url_from_env
from contextfold.store.pg_new_schema import drop_if_unrecorded, schema_absent
from contextfold.store.store_url import StoreURL
from contextfold.store_api import open_store

__all__ = ["removed_if_unrecorded"]

_SIDECARS = ("", "-wal", "-shm", "-journal")
"""The database file and what SQLite keeps beside it while it is open or after a crash."""


def _new_file(url: str) -> Path | None:
    """The SQLite file ``url`` names when there is none yet (None for PostgreSQL, or a file)."""
    parsed = parse_store_url(url)
    if parsed.scheme != "sqlite" or parsed.path == ":memory:":
        return None
    path = Path(parsed.path)
    return None if path.exists() else path


def _new_schema(url: str) -> StoreURL | None:
    """The PostgreSQL schema ``url`` names when the server has none yet (None for SQLite, or a
    schema that exists, or a server that could not be asked)."""
    parsed = parse_store_url(url)
    if parsed.scheme == "sqlite":
        return None
    return parsed if schema_absent(parsed) else None


@contextmanager
def removed_if_unrecorded(args: argparse.Namespace) -> Iterator[None]:
    """Run the body; if it fails (Ctrl-C included) after creating the store file or schema and
    no run is in it, remove it, so the store is as absent as before the command."""
    url = store_url_from_env(args.store)
    created = _new_file(url)
    schema = _new_schema(url) if created is None else None
    try:
        yield
    except BaseException:
        if created is not None and created.exists():
            _remove_if_empty(url, created)
        if schema is not None:
            drop_if_unrecorded(schema)
        raise


def _remove_if_empty(url: str, path: Path) -> None:
    try:
        with open_store(url, must_exist=True) as store:
            if store.events.runs():
                return
    except ContextfoldError:  # not readable as a store: not knowingly empty, so left as it is
        return
    for suffix in _SIDECARS:
        Path(f"{path}{suffix}").unlink(missing_ok=True)

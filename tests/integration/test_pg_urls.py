"""PostgreSQL store URLs as libpq reads them, against the real server: a Unix socket directory as
host and a percent-encoded database name."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import psycopg

from contextfold.api import open_store
from contextfold.domain.events import UserInput
from contextfold.store.backends import parse_store_url


def test_a_store_over_the_unix_socket_and_in_a_database_named_with_a_space(pg_url: str) -> None:
    url = parse_store_url(pg_url)
    admin = f"postgresql://{url.user}@{url.host}:{url.port}/{url.dbname}"
    with psycopg.connect(admin, autocommit=True) as c:
        row = c.execute("SHOW unix_socket_directories").fetchone()
        assert row is not None
        socket_dir = str(row[0]).split(",")[0].strip()
        name = f"cf test {uuid.uuid4().hex[:8]}"
        c.execute(f'CREATE DATABASE "{name}"')
    try:
        over_socket = f"postgresql://{url.user}@{quote(socket_dir, safe='')}/{url.dbname}?schema={url.schema}"
        for store_url in (over_socket, f"postgresql://{url.user}@{url.host}:{url.port}/{quote(name)}"):
            store = open_store(store_url)
            try:
                run = store.run("r")
                run.append(UserInput("hello"))
                assert [r.position for r in run.events()] == [1]
            finally:
                store.close()
    finally:
        with psycopg.connect(admin, autocommit=True) as c:
            c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
            c.execute(f'DROP DATABASE "{name}"')

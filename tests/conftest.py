"""Shared fixtures: one store per test, on every backend the contract suite runs against.

PostgreSQL: set ``CONTEXTFOLD_TEST_PG`` (e.g. ``postgresql://postgres@127.0.0.1:5432/test``).
Unset, the PostgreSQL cases skip with that reason; set but unreachable, they FAIL
(``.ci/run`` always sets it). Each test gets its own schema, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from contextfold.domain import trusted
from contextfold.store.event_store import EventStore

trusted.CHECKED = True  # every model the builder makes unvalidated is checked against validation

# No per-example time limit (hypothesis's default is 200 ms): a property test asserts behaviour,
# never speed, and a loaded CI machine (two xdist workers on two cores) must not fail one.
settings.register_profile("contextfold", deadline=None)
settings.load_profile("contextfold")

PG_URL = os.environ.get("CONTEXTFOLD_TEST_PG", "")
REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", REPO.parent / "shared" / "traces"))


def _pg_admin_exec(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL.split("?")[0], autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql)


def pytest_sessionstart(session: pytest.Session) -> None:
    """In CI (CONTEXTFOLD_REQUIRE_PG=1) PostgreSQL is required: fail the run, never skip."""
    if os.environ.get("CONTEXTFOLD_REQUIRE_PG") != "1":
        return
    if not PG_URL:
        raise pytest.UsageError("CONTEXTFOLD_REQUIRE_PG=1 but CONTEXTFOLD_TEST_PG is not set")
    try:
        _pg_admin_exec("SELECT 1")
    except Exception as exc:
        raise pytest.UsageError(f"PostgreSQL required but unreachable at {PG_URL}: {exc}") from exc


@pytest.fixture
def pg_url() -> Iterator[str]:
    if not PG_URL:
        if os.environ.get("CONTEXTFOLD_REQUIRE_PG") == "1":
            pytest.fail("PostgreSQL is required (CONTEXTFOLD_REQUIRE_PG=1) but CONTEXTFOLD_TEST_PG is unset")
        pytest.skip("PostgreSQL tests need CONTEXTFOLD_TEST_PG (e.g. postgresql://postgres@127.0.0.1:5432/test)")
    schema = f"cf_test_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}schema={schema}"
    _pg_admin_exec(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def store(store_url: str) -> Iterator[EventStore]:
    s = EventStore(store_url)
    yield s
    s.close()

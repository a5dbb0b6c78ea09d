"""Tenants: reads and builds scoped to one tenant; on PostgreSQL the database enforces it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from contextfold.api import open_store
from contextfold.domain.errors import RunNotFoundError, StoreConfigError, StoreError, TenantMismatchError
from contextfold.domain.events import UserInput
from contextfold.store.backends import EVENTS_TABLE, parse_store_url
from contextfold.store.tenants import drop_postgres_tenant, tenant_schema

SECRET_A = "acme-only: merger plan PLAINTEXT-A"


@pytest.fixture
def tenants_url(pg_url: str) -> Iterator[str]:
    yield pg_url
    parsed = parse_store_url(pg_url)
    for tenant in ("acme", "beta"):
        drop_postgres_tenant(parsed, tenant)


def _conn(url: str, **kw: str) -> psycopg.Connection:
    p = parse_store_url(url)
    return psycopg.connect(host=p.host, port=p.port, user=kw.get("user", p.user), dbname=p.dbname,
                           password=kw.get("password", p.password), autocommit=True)


@pytest.mark.postgres
def test_tenant_b_cannot_see_tenant_a_runs(tenants_url: str) -> None:
    with open_store(tenants_url, tenant="acme") as a:
        a.run("shared-name").append(UserInput(SECRET_A))
        a.run("only-acme").append(UserInput(SECRET_A))
    with open_store(tenants_url, tenant="beta") as b:
        with pytest.raises(RunNotFoundError):
            b.run("only-acme").events()
        with pytest.raises(RunNotFoundError):
            b.run("only-acme").verify()
        assert b.runs() == []
        assert b.run("only-acme").version == 0
        # the same run id in another tenant is a different run, not a collision
        b.run("shared-name").append(UserInput("beta's own"))
        assert [e.event.text for e in b.run("shared-name").events()] == ["beta's own"]  # type: ignore[union-attr]
        built = b.run("shared-name").build(provider="openai-chat", window=10_000, reserve=1_000)
        assert "PLAINTEXT-A" not in str(built.request)
    with open_store(tenants_url, tenant="acme") as a:
        assert {r.run_id for r in a.runs()} == {"shared-name", "only-acme"}


@pytest.mark.postgres
def test_raw_sql_as_tenant_b_is_refused_by_the_database(tenants_url: str) -> None:
    base = parse_store_url(tenants_url).schema
    with open_store(tenants_url, tenant="acme") as a:
        a.run("r1").append(UserInput(SECRET_A))
    open_store(tenants_url, tenant="beta").close()
    schema_a, role_b = tenant_schema("acme", base), tenant_schema("beta", base)
    table_a = sql.SQL("{}.{}").format(sql.Identifier(schema_a), sql.Identifier(EVENTS_TABLE))

    # 1. the store's own connections run as the tenant role: raw SQL through them is refused
    with open_store(tenants_url, tenant="beta") as b:
        backend = b.events.backend
        assert backend.query("SELECT current_user")[0][0] == role_b
        with pytest.raises(StoreError, match="permission denied"):
            backend.query(f'SELECT state FROM "{schema_a}".{EVENTS_TABLE}')

    # 2. a login role that is only a member of tenant B's role (what a tenant-B worker uses)
    worker = f"cf_worker_{uuid.uuid4().hex[:8]}"
    pw = uuid.uuid4().hex
    with _conn(tenants_url) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(worker), sql.Literal(pw)))
        admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role_b), sql.Identifier(worker)))
    try:
        with _conn(tenants_url, user=worker, password=pw) as conn:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role_b)))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL("SELECT state FROM {}").format(table_a))
            conn.execute("RESET ROLE")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(sql.SQL("SELECT state FROM {}").format(table_a))
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # cannot become tenant A
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(tenant_schema("acme", base))))
        # and the worker can use tenant B's store through the API (no provisioning rights needed)
        p = parse_store_url(tenants_url)
        worker_url = f"postgresql://{worker}:{pw}@{p.host}:{p.port}/{p.dbname}?schema={base}"
        with open_store(worker_url, tenant="beta", create_schema=False) as b:
            b.run("w1").append(UserInput("from the worker"))
            with pytest.raises(RunNotFoundError):
                b.run("r1").events()
    finally:
        with _conn(tenants_url) as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(worker)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(worker)))


@pytest.mark.postgres
def test_row_level_reads_of_artifacts_are_scoped_too(tenants_url: str) -> None:
    with open_store(tenants_url, tenant="acme") as a:
        ref = a.events.put_artifact(b"acme blob PLAINTEXT-A")
    with open_store(tenants_url, tenant="beta") as b:
        from contextfold.domain.errors import ArtifactNotFoundError

        with pytest.raises(ArtifactNotFoundError):
            b.artifact(ref)


def test_sqlite_is_one_tenant_per_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 't1.db'}"
    with open_store(url, tenant="acme") as a:
        a.run("r1").append(UserInput(SECRET_A))
    with open_store(url, tenant="acme") as a:
        assert a.run("r1").version == 1
    for other in ("beta", None):
        with pytest.raises(TenantMismatchError) as err:
            open_store(url, tenant=other)
        assert "acme" not in str(err.value)  # the error does not name the owner
        assert ("does not belong to tenant 'beta'" if other else "belongs to a tenant: open it as that tenant"
                ) in str(err.value)  # not "does not belong to no tenant"
    plain = f"sqlite:///{tmp_path / 'plain.db'}"
    with open_store(plain) as s:
        s.run("r1").append(UserInput("untenanted"))
    with pytest.raises(TenantMismatchError):
        open_store(plain, tenant="acme")  # a used untenanted file is not claimed


def test_bad_tenant_names_are_rejected(tmp_path: Path) -> None:
    for bad in ("Acme", "a-b", "1abc", "", "x" * 41, 'a"; drop'):
        with pytest.raises(StoreConfigError):
            open_store(f"sqlite:///{tmp_path / 'x.db'}", tenant=bad)


@pytest.mark.postgres
def test_tenants_of_two_schemas_can_never_share_one(pg_url: str) -> None:
    """A tenant's schema and role are '<schema>_t_<tenant>': tenant 'z' under ?schema=B_t_y and
    tenant 'y_t_z' under ?schema=B were both 'B_t_y_t_z', so each read the other's runs (one
    schema, one role); likewise tenant 'a_t_b' of public and tenant 'b' under
    ?schema=cf_tenant_a, tenant 't_z' under ?schema=B and tenant 'z' under ?schema=B_t, and tenant
    'b' under ?schema=cf_tenant and public's 't_b'. A schema that could name another's tenant holds
    none (``tests/unit/test_tenant_names.py`` checks the mapping for every pair)."""
    p = parse_store_url(pg_url)
    base = p.schema
    url = pg_url.split("?")[0]
    made = [f"{base}_t_y_t_z", "cf_tenant_a_t_b", f"{base}_t_t_z", "cf_tenant_t_b"]
    try:
        with (pytest.raises(StoreConfigError, match="cannot hold tenants"),
              open_store(f"{url}?schema={base}_t_y", tenant="z") as other):
            other.run("secret").append(UserInput(SECRET_A))
        with open_store(f"{url}?schema={base}", tenant="y_t_z") as mine:
            assert mine.runs() == []
        with pytest.raises(StoreConfigError, match="cannot hold tenants"):
            open_store(f"{url}?schema=cf_tenant_a", tenant="b").close()
        # and tenant 't_z' under ?schema=B with tenant 'z' under ?schema=B_t (both B_t_t_z), tenant
        # 'b' under ?schema=cf_tenant with public's tenant 't_b' (both cf_tenant_t_b)
        with open_store(f"{url}?schema={base}", tenant="t_z") as mine:
            mine.run("secret").append(UserInput(SECRET_A))
        for schema, tenant in ((f"{base}_t", "z"), ("cf_tenant", "b")):
            with pytest.raises(StoreConfigError, match="cannot hold tenants"):
                open_store(f"{url}?schema={schema}", tenant=tenant).close()
    finally:
        with _conn(pg_url) as admin:
            for name in made:
                admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
                if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                    admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
                    admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.mark.postgres
def test_a_reader_of_a_mistyped_schema_or_tenant_creates_nothing(
        tenants_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``runs`` with a mistyped ``?schema=`` created the schema and its tables, and with a mistyped
    ``CONTEXTFOLD_TENANT`` a cluster-wide role and schema, then said "no runs" (exit 0). A reader
    now refuses a store not made yet (exit 2), as on SQLite; ``import`` still creates it."""
    from contextfold.cli import main

    parsed = parse_store_url(tenants_url)

    def exists(kind: str, name: str) -> bool:
        query = ("SELECT 1 FROM pg_namespace WHERE nspname = %s" if kind == "schema"
                 else "SELECT 1 FROM pg_roles WHERE rolname = %s")
        with _conn(tenants_url) as conn:
            return conn.execute(query, (name,)).fetchone() is not None

    for command in (["runs"], ["events", "r"], ["build", "r"]):
        assert main(["--store", tenants_url, *command]) == 2
        assert f"no store in schema {parsed.schema!r}" in capsys.readouterr().err
        assert not exists("schema", parsed.schema)
    with pytest.raises(StoreConfigError, match="no store in schema"):
        open_store(tenants_url, must_exist=True)
    with open_store(tenants_url) as store:  # the default creates, as import does
        store.run("r").append(UserInput("go"))
    assert main(["--store", tenants_url, "runs"]) == 0 and "r\t" in capsys.readouterr().out
    monkeypatch.setenv("CONTEXTFOLD_TENANT", "acme")
    name = tenant_schema("acme", parsed.schema)
    assert main(["--store", tenants_url, "runs"]) == 2
    assert f"no store in tenant {name!r}'s schema" in capsys.readouterr().err
    assert not exists("schema", name) and not exists("role", name)

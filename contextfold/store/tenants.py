"""Tenants: every read and build of a store handle is scoped to one tenant.

PostgreSQL — **a schema and a role per tenant; the database enforces it.**
``open_store(url, tenant="acme")`` stores the tenant's runs and artifacts in
its own schema (``cf_tenant_acme``, or ``<schema>_t_acme`` under a URL's
``?schema=``, which then must hold no ``_t_``, not end in ``_t``, and be neither
``cf_tenant`` nor start with ``cf_tenant_``, so that no two tenants share a name: see
:func:`tenant_schema`) owned by a ``NOLOGIN`` role of the same name, with every privilege
on the schema revoked from ``PUBLIC``. Each pooled connection runs
``SET ROLE <tenant role>`` as soon as it is opened, so every statement the
store issues — and any raw SQL on that connection — runs with the tenant's
privileges only: another tenant's tables are "permission denied" at the
database, not hidden by a ``WHERE`` clause. A run id of another tenant is
simply absent from this tenant's schema: :class:`RunNotFoundError`.

Why not row-level security on a shared table: eventsourcing's table has a
global unique ``(originator_id, originator_version)`` and one notification
sequence, so tenants would collide on run ids (an append would reveal that
another tenant has a run of that name) and share a commit order; RLS is also
silently bypassed by superusers and table owners. A schema per tenant keeps
run ids, artifacts, notification ids and backups separate, and dropping a
tenant is ``DROP SCHEMA ... CASCADE`` plus ``DROP ROLE``.

Provisioning (creating the role and schema) needs a login role with
``CREATEROLE`` (or a superuser); ``open_store(..., create_schema=True)`` does
it idempotently. Workers that must not provision connect as a login role that
is merely a member of the tenant role (``GRANT cf_tenant_acme TO worker``) and
open with ``create_schema=False``; a member of one tenant role cannot
``SET ROLE`` to another.

SQLite — **one tenant per file.** The tenant is recorded in a
``contextfold_meta`` table when the file is created; opening it as another
tenant (or with no tenant when it has one) raises
:class:`TenantMismatchError` before anything is read.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from contextfold.domain.errors import StoreConfigError, TenantMismatchError

if TYPE_CHECKING:
    from contextfold.store.backends import SQLiteBackend, StoreURL

__all__ = [
    "META_TABLE",
    "TENANT_PATTERN",
    "bind_sqlite_tenant",
    "check_tenant",
    "drop_postgres_tenant",
    "provision_postgres_tenant",
    "tenant_schema",
]

META_TABLE = "contextfold_meta"
TENANT_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def check_tenant(tenant: str) -> str:
    if not isinstance(tenant, str) or not TENANT_PATTERN.fullmatch(tenant):
        raise StoreConfigError(
            f"invalid tenant {tenant!r}: 1-40 characters a-z, 0-9 and _, starting with a letter")
    return tenant


def tenant_schema(tenant: str, base_schema: str = "public") -> str:
    """The schema name of ``tenant`` under ``base_schema``; also its role name (roles are
    cluster-wide): ``cf_tenant_<tenant>`` under ``public``, ``<base>_t_<tenant>`` under any other.

    The mapping is injective: two different (base, tenant) pairs never name one schema or role
    (else each tenant reads the other's runs). A base that could break that holds no tenants
    (:class:`StoreConfigError`): one containing ``_t_``, ending in ``_t``, or whose name plus
    ``_`` starts with ``cf_tenant_`` (``cf_tenant`` itself, or ``cf_tenant_...``). Proof, for
    pairs (B1, T1) != (B2, T2) that both map (a tenant is ``[a-z][a-z0-9_]*``):

    - both bases ``public``: ``cf_tenant_T1 != cf_tenant_T2`` since ``T1 != T2``;
    - neither ``public``, say ``B1_t_T1 == B2_t_T2``: if ``len(B1) == len(B2)`` the bases are
      the same prefix, so are the tenants, a contradiction; else say ``B2`` is longer, so
      ``B2 = B1 + s`` with ``"_t_" + T1 == s + "_t_" + T2`` and ``s`` non-empty. ``s`` is a
      prefix of ``_t_T1``: of 3 or more characters it starts ``_t_`` (B2 holds ``_t_``); of 2
      it is ``_t`` (B2 ends in ``_t``); of 1 it is ``_``, and then ``_t_T1 == __t_T2`` fails
      at the second character. Every case is a refused base;
    - ``public`` and another, ``cf_tenant_T1 == B2_t_T2``: if ``len(B2) >= 10``, B2 starts with
      ``cf_tenant_``; else B2 is a prefix of ``cf_tenant_`` followed there by ``_t_``, whose
      ``_`` stands at index 2 (``_te`` follows: no match) or 9 (B2 = ``cf_tenant``). Refused.

    Names over PostgreSQL's 63 bytes are refused rather than cut (a cut could make two equal).
    Every other name maps as it always did, so existing tenants keep their schemas. Why these
    bases and not more: tenant ``t_acme`` under ``?schema=shop`` and tenant ``acme`` under
    ``?schema=shop_t`` were both ``shop_t_t_acme``, and tenant ``acme`` under
    ``?schema=cf_tenant`` was public's tenant ``t_acme`` (the ``_t_`` and ``cf_tenant_`` rules
    alone missed them)."""
    check_tenant(tenant)
    if base_schema != "public" and not _holds_tenants(base_schema):
        raise StoreConfigError(
            f"schema {base_schema!r} cannot hold tenants: a tenant's schema is '<schema>_t_<tenant>', "
            "so a schema containing '_t_' or ending in '_t' (or named 'cf_tenant' or starting with "
            "'cf_tenant_', public's tenant prefix) could name another schema's tenant; choose a "
            "schema without them")
    name = f"cf_tenant_{tenant}" if base_schema == "public" else f"{base_schema}_t_{tenant}"
    if len(name) > 63:
        raise StoreConfigError(f"tenant schema name {name!r} is longer than PostgreSQL's 63 bytes")
    return name


def _holds_tenants(base_schema: str) -> bool:
    """Whether a base other than ``public`` may hold tenants (:func:`tenant_schema` says why)."""
    return ("_t_" not in base_schema and not base_schema.endswith("_t")
            and not f"{base_schema}_".startswith("cf_tenant_"))


def _admin_connect(url: StoreURL):  # type: ignore[no-untyped-def]
    import psycopg

    from contextfold.store.backends import libpq_dead_peer
    from contextfold.store.store_url import DEFAULT_LOCK_TIMEOUT

    # lock_timeout: another worker provisioning the tenant holds its advisory lock; one stopped
    # meanwhile held it (and this wait) forever
    lock_ms = round(1000 * (DEFAULT_LOCK_TIMEOUT if url.lock_timeout is None else url.lock_timeout))
    try:
        return psycopg.connect(host=url.host, port=url.port, user=url.user, password=url.password,
                               dbname=url.dbname, autocommit=True, connect_timeout=5,
                               options=f"-c lock_timeout={lock_ms}", **libpq_dead_peer(url.network_timeout))
    except psycopg.OperationalError as exc:
        from contextfold.domain.errors import StoreUnavailableError

        raise StoreUnavailableError(f"cannot reach PostgreSQL at {url.host}:{url.port}: {exc}") from exc


def provision_postgres_tenant(url: StoreURL, tenant: str) -> str:
    """Create the tenant's role and schema if missing (idempotent); return the schema/role name."""
    import psycopg
    from psycopg import sql

    name = tenant_schema(tenant, url.schema)
    ident = sql.Identifier(name)
    with _admin_connect(url) as conn:
        try:
            # Serialise concurrent provisioning of the same tenant (CREATE ROLE has no IF NOT EXISTS).
            conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"contextfold.tenant.{name}",))
            try:
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone() is None:
                    conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(ident))
                me = conn.execute("SELECT current_user, rolsuper FROM pg_roles "
                                  "WHERE rolname = current_user").fetchone()
                if me is not None and not me[1]:
                    conn.execute(sql.SQL("GRANT {} TO {}").format(ident, sql.Identifier(me[0])))
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {} AUTHORIZATION {}").format(ident, ident))
                conn.execute(sql.SQL("REVOKE ALL ON SCHEMA {} FROM PUBLIC").format(ident))
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (f"contextfold.tenant.{name}",))
        except psycopg.Error as exc:
            from contextfold.store.driver_errors import busy

            held = busy(exc, f"provision tenant {tenant!r}")
            if held is not None:
                raise held from exc
            raise StoreConfigError(
                f"cannot provision tenant {tenant!r} (schema and role {name!r}): {exc}; "
                "provision it with a role that has CREATEROLE, or open with create_schema=False "
                "once it exists") from exc
    return name


def drop_postgres_tenant(url: StoreURL, tenant: str) -> None:
    """Drop the tenant's schema (all its runs and artifacts) and its role."""
    import psycopg
    from psycopg import sql

    name = tenant_schema(tenant, url.schema)
    ident = sql.Identifier(name)
    with _admin_connect(url) as conn:
        try:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                conn.execute(sql.SQL("DROP OWNED BY {}").format(ident))
                conn.execute(sql.SQL("DROP ROLE {}").format(ident))
        except psycopg.Error as exc:
            raise StoreConfigError(f"cannot drop tenant {tenant!r}: {exc}") from exc


def bind_sqlite_tenant(backend: SQLiteBackend, tenant: str | None, *, create: bool) -> None:
    """Check (and on a new file, record) the file's tenant; mismatch -> TenantMismatchError."""
    from contextfold.store.backends import EVENTS_TABLE

    if tenant is not None:
        check_tenant(tenant)
    has_meta = backend.query("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (META_TABLE,))
    recorded: str | None = None
    if has_meta:
        rows = backend.query(f"SELECT value FROM {META_TABLE} WHERE key='tenant'")
        recorded = str(rows[0][0]) if rows else None
    if recorded == tenant:
        return
    if recorded is None and tenant is not None and create:
        has_events = backend.query(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (EVENTS_TABLE,))
        if not has_events or not backend.query(f"SELECT 1 FROM {EVENTS_TABLE} LIMIT 1"):
            backend.execute(f"CREATE TABLE IF NOT EXISTS {META_TABLE} "
                            "(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            backend.execute(f"INSERT OR IGNORE INTO {META_TABLE} (key, value) VALUES ('tenant', ?)",
                            (tenant,))
            bind_sqlite_tenant(backend, tenant, create=False)  # a concurrent creator may have won
            return
    raise TenantMismatchError(backend.url, expected=tenant, found=recorded)

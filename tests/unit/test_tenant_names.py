"""A tenant's PostgreSQL schema and role name: two different (base, tenant) pairs never share one.

Tenant ``t_acme`` under ``?schema=shop`` and tenant ``acme`` under ``?schema=shop_t`` were both
``shop_t_t_acme`` (one schema, one role: each read the other's runs), and tenant ``acme`` under
``?schema=cf_tenant`` was public's tenant ``t_acme``.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from contextfold.domain.errors import StoreConfigError
from contextfold.store.tenants import TENANT_PATTERN, tenant_schema

_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")  # what a store URL's ?schema= takes
# pieces that make the names a collision needs: separators, their halves, public's prefix
_PIECES = ("_", "t", "a", "_t", "t_", "_t_", "cf", "cf_", "tenant", "cf_tenant", "cf_tenant_", "public")

bases = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=5).map("".join).filter(_SCHEMA.fullmatch)
tenants = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=5).map("".join).filter(
    TENANT_PATTERN.fullmatch)


def _mapped(tenant: str, base: str) -> str | None:
    try:
        return tenant_schema(tenant, base)
    except StoreConfigError:
        return None


def _pairs_naming(name: str) -> set[tuple[str, str]]:
    """Every (base, tenant) the mapping's two forms could read ``name`` as, that it accepts."""
    readings = {(name[:i], name[i + 3:]) for i in range(len(name)) if name.startswith("_t_", i)}
    if name.startswith("cf_tenant_"):
        readings.add(("public", name.removeprefix("cf_tenant_")))
    return {(b, t) for b, t in readings if _SCHEMA.fullmatch(b) and _mapped(t, b) == name}


@given(bases, tenants)
@example("shop", "t_acme")
@example("shop_t", "acme")
@example("cf_tenant", "acme")
@example("public", "t_acme")
@example("x", "y_t_z")
@example("public", "a_t_b")
def test_no_two_pairs_name_one_schema_or_role(base: str, tenant: str) -> None:
    """Every way to read the name back as a pair gives this pair alone, so no other pair maps to it
    (the schema name is the role name too); and a name it gives is the one it always gave."""
    name = _mapped(tenant, base)
    if name is None:
        return
    assert _pairs_naming(name) == {(base, tenant)}
    assert name == (f"cf_tenant_{tenant}" if base == "public" else f"{base}_t_{tenant}")


@given(st.lists(st.tuples(bases, tenants), min_size=2, max_size=30))
def test_distinct_pairs_give_distinct_names(pairs: list[tuple[str, str]]) -> None:
    named: dict[str, tuple[str, str]] = {}
    for base, tenant in pairs:
        name = _mapped(tenant, base)
        if name is not None:
            assert named.setdefault(name, (base, tenant)) == (base, tenant), name


@pytest.mark.parametrize("base", ["shop_t", "cf_tenant", "cf_tenant_a", "x_t_y", "_t"])
def test_a_base_that_could_name_another_bases_tenant_holds_none(base: str) -> None:
    with pytest.raises(StoreConfigError, match="cannot hold tenants"):
        tenant_schema("acme", base)


@pytest.mark.parametrize(("base", "tenant", "name"), [
    ("public", "acme", "cf_tenant_acme"), ("public", "t_acme", "cf_tenant_t_acme"),
    ("shop", "acme", "shop_t_acme"), ("shop", "t_acme", "shop_t_t_acme"), ("shop_tx", "a", "shop_tx_t_a"),
    ("cf_tenantx", "a", "cf_tenantx_t_a"), ("t", "a", "t_t_a"), ("cf_test_1", "acme", "cf_test_1_t_acme"),
])
def test_existing_names_map_as_before(base: str, tenant: str, name: str) -> None:
    assert tenant_schema(tenant, base) == name

"""The drop of a schema a failed ``import`` or ``demo`` made (:mod:`contextfold.store.pg_new_schema`):
never of one holding an event (another process recorded into it meanwhile) or a table of
someone else's."""

from __future__ import annotations

import psycopg
import pytest

from contextfold import UserInput
from contextfold.api import open_store
from contextfold.store.pg_new_schema import drop_if_unrecorded, schema_absent
from contextfold.store.store_url import parse_store_url

pytestmark = pytest.mark.postgres


def test_a_schema_with_only_empty_tables_of_ours_is_dropped(pg_url: str) -> None:
    url = parse_store_url(pg_url)
    assert schema_absent(url)
    open_store(pg_url).close()
    assert not schema_absent(url)
    assert drop_if_unrecorded(url)
    assert schema_absent(url)


def test_a_schema_recorded_into_is_left(pg_url: str) -> None:
    url = parse_store_url(pg_url)
    with open_store(pg_url) as store:
        store.run("r").append(UserInput("another process's"))
    assert not drop_if_unrecorded(url)
    with open_store(pg_url, must_exist=True) as store:
        assert [info.run_id for info in store.runs()] == ["r"]


def test_a_schema_holding_another_table_is_left(pg_url: str) -> None:
    url = parse_store_url(pg_url)
    open_store(pg_url).close()
    with psycopg.connect(pg_url.split("?")[0], autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE TABLE "{url.schema}".theirs (x int)')
    assert not drop_if_unrecorded(url)
    assert not schema_absent(url)

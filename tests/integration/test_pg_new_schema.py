"""The drop of a schema a failed ``import`` or ``demo`` made (:mod:`contextfold.store.pg_new_schema`):
never of one holding an event (another process recorded into it meanwhile) or any object of
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


def _admin(pg_url: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(pg_url.split("?")[0], autocommit=True, connect_timeout=5)


USERS_OBJECTS = {
    "view": ("CREATE VIEW {s}.recent AS SELECT 1 AS x", "SELECT to_regclass('{s}.recent')"),
    "sequence": ("CREATE SEQUENCE {s}.tickets", "SELECT to_regclass('{s}.tickets')"),
    "function": ("CREATE FUNCTION {s}.answer() RETURNS int LANGUAGE sql AS 'SELECT 42'",
                 "SELECT to_regprocedure('{s}.answer()')"),
    "enum type": ("CREATE TYPE {s}.mood AS ENUM ('ok', 'sad')", "SELECT to_regtype('{s}.mood')"),
    "domain": ("CREATE DOMAIN {s}.positive AS int CHECK (VALUE > 0)", "SELECT to_regtype('{s}.positive')"),
    # one named as eventsourcing's insert function, taking something else
    "overload": ("CREATE FUNCTION {s}.es_insert_events_text(n int) RETURNS int LANGUAGE sql AS 'SELECT n'",
                 "SELECT to_regprocedure('{s}.es_insert_events_text(int)')"),
    # on contextfold's own tables: gone with them under CASCADE
    "trigger": ("CREATE TRIGGER keep BEFORE UPDATE ON {s}.contextfold_events FOR EACH ROW "
                "EXECUTE FUNCTION suppress_redundant_updates_trigger()",
                "SELECT 1 FROM pg_trigger WHERE tgname = 'keep' "
                "AND tgrelid = '{s}.contextfold_events'::regclass"),
    "index": ("CREATE INDEX by_topic ON {s}.contextfold_events (topic)",
              "SELECT to_regclass('{s}.by_topic')"),
    "policy": ("CREATE POLICY mine ON {s}.contextfold_artifacts USING (true)",
               "SELECT 1 FROM pg_policy WHERE polname = 'mine' "
               "AND polrelid = '{s}.contextfold_artifacts'::regclass"),
}


@pytest.mark.parametrize("kind", list(USERS_OBJECTS))
def test_a_schema_holding_any_object_of_a_users_is_left(pg_url: str, kind: str) -> None:
    """The check listed tables and views only: a sequence, function, type or domain put in the
    new schema, or a trigger or index on its empty tables, went with ``DROP SCHEMA ... CASCADE``."""
    url = parse_store_url(pg_url)
    open_store(pg_url).close()
    create, exists = (sql.replace("{s}", f'"{url.schema}"') for sql in USERS_OBJECTS[kind])
    with _admin(pg_url) as conn:
        conn.execute(create)
    assert not drop_if_unrecorded(url)
    with _admin(pg_url) as conn:
        assert conn.execute(exists).fetchone() not in (None, (None,)), kind
        events = conn.execute("SELECT to_regclass(%s)", (f'"{url.schema}".contextfold_events',)).fetchone()
        assert events != (None,)


def test_a_view_elsewhere_reading_the_schema_s_table_is_not_dropped_with_it(pg_url: str) -> None:
    """``CASCADE`` reaches out of the schema: a view in another schema over contextfold's events
    table would have gone too."""
    url = parse_store_url(pg_url)
    open_store(pg_url).close()
    other = f"{url.schema}_views"
    with _admin(pg_url) as conn:
        conn.execute(f'CREATE SCHEMA "{other}"')
    try:
        with _admin(pg_url) as conn:
            conn.execute(f'CREATE VIEW "{other}".runs AS SELECT DISTINCT originator_id FROM '
                         f'"{url.schema}".contextfold_events')
        assert not drop_if_unrecorded(url)
        with _admin(pg_url) as conn:
            assert conn.execute("SELECT to_regclass(%s)", (f'"{other}".runs',)).fetchone() != (None,)
        assert not schema_absent(url)
    finally:
        with _admin(pg_url) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{other}" CASCADE')


def test_a_store_schema_is_dropped_whole_and_a_new_store_made_there_again(pg_url: str) -> None:
    """What a store creates (tables, their types and keys, eventsourcing's row type, sequence and
    insert function) is all the check allows, and all the drop removes: nothing is left, so the
    same URL makes a store anew."""
    url = parse_store_url(pg_url)
    with open_store(pg_url) as store:
        store.events.put_artifact(b"an artifact, written before its event")  # not a recorded run
    with _admin(pg_url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_depend WHERE refobjid = %s::regnamespace",
                           (f'"{url.schema}"',)).fetchone()
    assert row is not None and int(str(row[0])) >= 6  # 3 tables, a sequence, a type, a function
    assert drop_if_unrecorded(url) and schema_absent(url)
    with open_store(pg_url) as store:
        store.run("r").append(UserInput("again"))
        assert [i.run_id for i in store.runs()] == ["r"]


def test_an_object_made_after_the_check_fails_the_drop_rather_than_going_with_it(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The drop names the store's own objects and then drops the schema ``RESTRICT``: an object
    the check did not see (made by another session just after it) is never dropped with it."""
    from contextfold.store import pg_new_schema

    url = parse_store_url(pg_url)
    open_store(pg_url).close()
    with _admin(pg_url) as conn:
        conn.execute(f'CREATE SEQUENCE "{url.schema}".tickets')
    monkeypatch.setattr(pg_new_schema, "_only_own_objects", lambda reached, schema: True)  # as if unseen
    assert not drop_if_unrecorded(url)
    with _admin(pg_url) as conn:  # and nothing of the store's went either: one transaction
        found = conn.execute("SELECT to_regclass(%s), to_regclass(%s)", (
            f'"{url.schema}".tickets', f'"{url.schema}".contextfold_events')).fetchone()
    assert found is not None and None not in found

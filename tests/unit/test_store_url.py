"""Store URLs: every part we would not apply is refused with a StoreConfigError naming it."""

from __future__ import annotations

import pytest

from contextfold.domain.errors import StoreConfigError
from contextfold.store.backends import display_url, libpq_dead_peer, parse_store_url


@pytest.mark.parametrize(("url", "message"), [
    # ?schema= used 'public', a store nobody asked for
    ("postgresql://u@h/db?schema=", "empty schema in the store URL"),
    ("postgresql://u@h/db?schema", "empty schema in the store URL"),
    # ?schema=a&schema=b used 'a'
    ("postgresql://u@h/db?schema=a&schema=b", "option 'schema' given more than once"),
    ("postgresql://u@h/db?schema=a&schema=a", "option 'schema' given more than once"),
    # sqlite:///runs#2.db opened 'runs'
    ("sqlite:///runs#2.db", "a '#' fragment in the store URL"),
    ("sqlite:///runs.db#", "a '#' fragment in the store URL"),
    ("postgresql://u@h/db?schema=a#b", "a '#' fragment in the store URL"),
    # sqlite://host/x.db opened x.db
    ("sqlite://host/x.db", "a sqlite URL takes no host ('host'"),
    ("sqlite:///x.db?mode", "unsupported option 'mode'"),
    ("sqlite:///x.db?=1", "unsupported option ''"),
    # the outage bound: a number of seconds, never one that disables it or a typo read as 0
    ("sqlite:///x.db?connect_timeout=2", "unsupported option 'connect_timeout'"),
    *((f"postgresql://u@h/db?connect_timeout={bad}", "invalid connect_timeout")
      for bad in ("", "0", "-1", "abc", "nan", "inf", "3601")),
    ("postgresql://u@h/db?connect_timeout=1&connect_timeout=2",
     "option 'connect_timeout' given more than once"),
    ("sqlite:///x.db?network_timeout=2", "unsupported option 'network_timeout'"),
    *((f"postgresql://u@h/db?network_timeout={bad}", "invalid network_timeout")
      for bad in ("", "0", "-1", "abc", "nan", "inf", "3601")),
    # the waits for a lock and a pooled connection, and the pool's size
    *((f"{scheme}?lock_timeout={bad}", "invalid lock_timeout")
      for scheme in ("sqlite:///x.db", "postgresql://u@h/db") for bad in ("", "0", "abc", "inf")),
    ("sqlite:///x.db?pool_size=2", "unsupported option 'pool_size'"),
    *((f"postgresql://u@h/db?pool_size={bad}", "invalid pool_size")
      for bad in ("", "0", "-1", "2.5", "abc", "1001")),
    *((f"postgresql://u@h/db?pool_timeout={bad}", "invalid pool_timeout") for bad in ("", "0", "nan")),
])
def test_a_store_url_part_that_would_be_ignored_is_refused(url: str, message: str) -> None:
    with pytest.raises(StoreConfigError, match="^" + message.replace("(", r"\(")):
        parse_store_url(url)


def test_well_formed_store_urls_still_parse() -> None:
    assert parse_store_url("postgresql://u@h/db").schema == "public"
    assert parse_store_url("postgresql://u@h/db?schema=s1").schema == "s1"
    assert parse_store_url("postgresql://u@h/db").connect_timeout == 5.0
    assert parse_store_url("postgresql://u@h/db?schema=s1&connect_timeout=0.5").connect_timeout == 0.5
    assert parse_store_url("postgresql://u@h/db").network_timeout == 30.0
    assert parse_store_url("postgresql://u@h/db?network_timeout=2.5&connect_timeout=1").network_timeout == 2.5
    default = parse_store_url("postgresql://u@h/db")
    assert (default.lock_timeout, default.pool_size, default.pool_timeout) == (None, 10, 60.0)
    tuned = parse_store_url("postgresql://u@h/db?lock_timeout=1.5&pool_size=3&pool_timeout=7")
    assert (tuned.lock_timeout, tuned.pool_size, tuned.pool_timeout) == (1.5, 3, 7.0)
    assert parse_store_url("sqlite:///x.db?lock_timeout=0.25").lock_timeout == 0.25


@pytest.mark.parametrize("seconds", [0.5, 3.0, 30.0, 3600.0])
def test_the_network_timeout_becomes_keepalives_and_a_tcp_user_timeout_that_add_up_to_it(
        seconds: float) -> None:
    """A dead connection is dropped after about ``network_timeout``: keepalives first sent after
    the idle time, four unanswered ones apart by the interval, or sent data unacknowledged for
    the user timeout (libpq takes whole seconds for the first three, milliseconds for the last)."""
    params = libpq_dead_peer(seconds)
    assert params["keepalives"] == 1 and params["keepalives_count"] == 4
    assert all(type(v) is int and v >= 1 for v in params.values())
    dead_after = params["keepalives_idle"] + params["keepalives_count"] * params["keepalives_interval"]
    assert seconds <= dead_after <= max(seconds + 4, 5)
    assert params["tcp_user_timeout"] == max(1000, round(seconds * 1000))
    assert parse_store_url("sqlite:///runs%232.db").path == "runs#2.db"
    assert parse_store_url("sqlite:////abs/x.db").path == "/abs/x.db"


def test_a_password_cut_by_a_hash_is_never_shown() -> None:
    with pytest.raises(StoreConfigError) as info:
        parse_store_url("postgresql://u:pa#ss@h/db")
    assert "pa#ss" not in str(info.value) and "ss@h" not in str(info.value)
    assert display_url("postgresql://u:pa#ss@h/db") == "postgresql://u:***@h/db"


def test_postgresql_urls_read_as_libpq_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A percent-encoded database name was used as written ("my%20db"), a Unix socket directory
    as host (encoded, or ?host=) was refused or lower-cased, and with no user in the URL $PGUSER
    was ignored for "postgres" (psql connects as $PGUSER)."""
    assert parse_store_url("postgresql://u@h:5432/my%20db").dbname == "my db"
    assert parse_store_url("postgresql://u@%2Fvar%2Frun%2FPostgreSQL/db").host == "/var/run/PostgreSQL"
    assert parse_store_url("postgresql://u@/db?host=/var/run/postgresql").host == "/var/run/postgresql"
    assert parse_store_url("postgresql://u@[::1]:5433/db").host == "::1"
    assert parse_store_url("postgresql://u@Db.Example/db").host == "Db.Example"
    monkeypatch.setenv("PGUSER", "alice")
    assert parse_store_url("postgresql://127.0.0.1/db").user == "alice"
    assert parse_store_url("postgresql://bob@127.0.0.1/db").user == "bob"
    monkeypatch.delenv("PGUSER")
    assert parse_store_url("postgresql://127.0.0.1/db").user == "postgres"
    assert parse_store_url("postgresql://u@[fe80::1%25lo]/db").host == "fe80::1%lo"
    with pytest.raises(StoreConfigError, match="empty host in the store URL"):
        parse_store_url("postgresql://u@h/db?host=")
    # a libpq-style ?password= is refused as any unknown option, and never shown
    with pytest.raises(StoreConfigError, match=r"\?host=socket-directory") as refused:
        parse_store_url("postgresql://u@h/db?password=s3cret")
    assert "s3cret" not in str(refused.value) and "password=***" in str(refused.value)

"""A run a newer contextfold wrote to (an event type or version this release does not know) is
not a damaged log: reads, ``verify`` and the CLI say to upgrade, with a typed error that is no
:class:`IntegrityError`, while a row that is damaged is still reported as damage."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from eventsourcing.persistence import StoredEvent

from contextfold.domain.errors import IntegrityError, UpgradeRequiredError
from contextfold.domain.events import UserInput
from contextfold.domain.log import chain_hash
from contextfold.store.event_store import EventStore
from tests.cli_runner import cf_process as cf


def _write_raw(store: EventStore, run_id: str, topic: str, body: bytes) -> None:
    """Append ``body`` under ``topic`` as a release that knows it would: chained to the run's head."""
    head = store.read(run_id)[-1]
    position = head.position + 1
    digest = chain_hash(run_id, position, head.hash, body)
    store.backend.recorder.insert_events([StoredEvent(run_id, position, topic, digest.encode() + body)])


@pytest.mark.parametrize(("topic", "body"), [
    ("plan_forked@1", b'{"branch":"b2","type":"plan_forked","v":1}'),  # a type added later
    ("user_input@2", b'{"content":"hi","source":"user","type":"user_input","v":2}'),  # a later version
])
def test_a_newer_release_s_event_asks_for_an_upgrade(store: EventStore, topic: str, body: bytes) -> None:
    store.append("r", [UserInput("a")])
    _write_raw(store, "r", topic, body)
    etype, _, version = topic.partition("@")
    for read in (lambda: store.read("r"), lambda: store.verify("r")):
        with pytest.raises(UpgradeRequiredError) as caught:
            read()
        assert not isinstance(caught.value, IntegrityError)
        assert caught.value.position == 2
        assert f"{etype!r} version {version}" in str(caught.value) and "upgrade" in str(caught.value)


@pytest.mark.parametrize(("topic", "body"), [
    ("plan_forked@1", b'{"type":"user_input","v":1,"content":7}'),  # the body is not the topic's type
    ("user_input@1", b'{"content":7,"source":"user","type":"user_input","v":1}'),  # a known one, invalid
    ("plan_forked@x", b'{"type":"plan_forked","v":"x"}'),  # nonsense, not a release's
])
def test_a_damaged_row_is_still_an_integrity_error(store: EventStore, topic: str, body: bytes) -> None:
    store.append("r", [UserInput("a")])
    _write_raw(store, "r", topic, body)
    with pytest.raises(IntegrityError):
        store.read("r")
    report = store.verify("r")
    assert (report.ok, report.first_bad_position) == (False, 2)


def test_the_cli_says_to_upgrade_with_exit_2(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with EventStore(url) as store:
        store.append("r", [UserInput("a")])
        _write_raw(store, "r", "plan_forked@1", b'{"branch":"b2","type":"plan_forked","v":1}')
    for args in (("verify", "r"), ("build", "r"), ("events", "r")):
        out: subprocess.CompletedProcess[str] = cf("--store", url, *args, cwd=tmp_path)
        assert out.returncode == 2, (args, out.stderr)
        assert "Traceback" not in out.stderr and "integrity" not in out.stderr, out.stderr
        assert "UpgradeRequiredError" in out.stderr and "upgrade contextfold" in out.stderr, out.stderr

"""A log that moved back under a long-lived store object (an earlier backup restored online): the
next append goes on at the log's real end, never past a gap; on every backend."""

from __future__ import annotations

import os
from typing import Any

import pytest

from contextfold.domain.errors import (
    ConcurrencyConflictError,
    EncodingConflictError,
    IntegrityError,
    RunExistsError,
)
from contextfold.domain.events import ContextBuilt, ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.store.backends import EVENTS_TABLE
from contextfold.store.crypto import Keyring, generate_key
from contextfold.store.event_store import EventStore
from contextfold.store.head_check import StaleHeadError


def _restore(store_url: str, run_id: str, keep: int) -> None:
    """The run as a backup taken at position ``keep`` holds it, written by another connection."""
    with EventStore(store_url) as admin:
        b = admin.backend
        b.execute(f"DELETE FROM {b.table(EVENTS_TABLE)} WHERE originator_id = {b.placeholder} "
                  f"AND originator_version > {b.placeholder}", (run_id, keep))


def _positions(store_url: str, run_id: str, keyring: Keyring | None = None) -> list[int]:
    with EventStore(store_url, keyring=keyring) as fresh:
        assert fresh.verify(run_id).ok
        return [e.position for e in fresh.read(run_id)]


@pytest.mark.parametrize("encrypted", [False, True])
def test_an_append_after_a_restore_goes_on_at_the_log_s_end(store_url: str, encrypted: bool) -> None:
    """The worker's cached head said 4 and its append was written at 5: positions 1, 2, 5, a run
    that verify and every fold refused."""
    keyring = Keyring(generate_key()) if encrypted else None
    with EventStore(store_url, keyring=keyring) as worker:
        worker.append("r", [RunStarted(), UserInput("one")])
        worker.append("r", [UserInput("two"), UserInput("three")])
        _restore(store_url, "r", 2)
        assert [e.position for e in worker.append("r", [UserInput("four")])] == [3]
        assert worker.append("r", [UserInput("five")])[0].position == 4
    assert _positions(store_url, "r", keyring) == [1, 2, 3, 4]


def test_a_head_made_by_a_fold_is_checked_too(store_url: str) -> None:
    """A store that read the run (its head made by the read, not by a write of its own)."""
    with EventStore(store_url) as writer:
        writer.append("r", [RunStarted(), UserInput("one"), UserInput("two"), UserInput("three")])
    with EventStore(store_url) as reader:
        assert len(list(reader.iter_events("r"))) == 4  # the head, as a fold makes it
        _restore(store_url, "r", 2)
        assert reader.append("r", [UserInput("four")])[0].position == 3
    assert _positions(store_url, "r") == [1, 2, 3]


def test_a_log_rewritten_to_the_same_length_is_caught_by_its_last_row(store_url: str) -> None:
    """Restored, then another writer appended as many events again: the row at the cached head's
    position exists but is not the one the head was made from (its chain would break at 4)."""
    with EventStore(store_url) as worker, EventStore(store_url) as other:
        worker.append("r", [RunStarted(), UserInput("one"), UserInput("two")])
        _restore(store_url, "r", 1)
        other.append("r", [UserInput("another two"), UserInput("another three")])
        assert worker.append("r", [UserInput("four")])[0].position == 4
    assert _positions(store_url, "r") == [1, 2, 3, 4]


def test_an_append_at_an_expected_version_the_log_moved_back_from_is_a_conflict(store_url: str) -> None:
    with EventStore(store_url) as worker:
        worker.append("r", [RunStarted(), UserInput("one"), UserInput("two")])
        _restore(store_url, "r", 1)
        with pytest.raises(ConcurrencyConflictError):
            worker.append("r", [UserInput("three")], expected_version=3)
        assert worker.append("r", [UserInput("two again")], expected_version=1)[0].position == 2
    assert _positions(store_url, "r") == [1, 2]


def test_the_version_read_after_a_restore_is_taken_at_once(store_url: str) -> None:
    """A caller that reloads and passes the log's real version was refused for ever: the store
    caught up from its cached head (3), found nothing newer, and called 1 a conflict."""
    with EventStore(store_url) as worker:
        worker.append("r", [RunStarted(), UserInput("one"), UserInput("two")])
        _restore(store_url, "r", 1)
        assert worker.append("r", [UserInput("two again")], expected_version=1)[0].position == 2
    assert _positions(store_url, "r") == [1, 2]


def test_a_version_read_before_a_rewrite_is_a_conflict_and_the_reloaded_one_is_taken(
        store_url: str) -> None:
    """Restored, then another writer refilled the log to the caller's version with events the
    caller never read: its append is a conflict (its version names the old rows), and the
    version it reloads is taken."""
    with EventStore(store_url) as worker, EventStore(store_url) as other:
        worker.append("r", [RunStarted(), UserInput("one"), UserInput("two")])
        _restore(store_url, "r", 1)
        other.append("r", [UserInput("another two"), UserInput("another three")])
        with pytest.raises(ConcurrencyConflictError):
            worker.append("r", [UserInput("four")], expected_version=3)
        assert worker.append("r", [UserInput("four")], expected_version=3)[0].position == 4
    assert _positions(store_url, "r") == [1, 2, 3, 4]


def test_a_version_past_a_restored_log_is_a_conflict_not_bad_input(store_url: str) -> None:
    """The caller read 4 before a backup at 2 was restored: a conflict to reload and retry on, not
    the "expected_version is ahead" error meant for a version no writer ever reached."""
    with EventStore(store_url) as worker:
        worker.append("r", [RunStarted(), *(UserInput(f"m{i}") for i in range(5))])
        _restore(store_url, "r", 2)
        with pytest.raises(ConcurrencyConflictError):
            worker.append("r", [UserInput("x")], expected_version=4)
        assert worker.append("r", [UserInput("x")], expected_version=2)[0].position == 3


def test_a_large_batch_after_a_restore_is_checked_too(store_url: str) -> None:
    """PostgreSQL inserts a batch of more than a megabyte without psycopg's pipeline: that path
    checks the head as well."""
    with EventStore(store_url) as worker:
        worker.append("r", [RunStarted(), UserInput("one"), UserInput("two")])
        _restore(store_url, "r", 1)
        big = [UserInput(os.urandom(50_000).hex()) for _ in range(12)]  # 1.2 MB, incompressible
        assert [e.position for e in worker.append("r", big)] == list(range(2, 14))
    assert _positions(store_url, "r") == list(range(1, 14))


def test_a_plain_conflict_reads_no_more_than_the_rows_it_missed(store_url: str) -> None:
    """Telling a conflict from a log moved back re-read the whole run at every conflict (0.13 s on a
    20,000-event run, under the run's write lock); one row at the cached head tells."""
    with EventStore(store_url) as worker, EventStore(store_url) as other:
        worker.append("r", [RunStarted(), *(UserInput(f"m{i}") for i in range(300))])
        other.append("r", [UserInput("theirs")])
        reads: list[int] = []
        recorder = worker.backend.recorder
        real = recorder.select_events

        def counted(*args: Any, **kwargs: Any) -> Any:
            reads.append(int(kwargs.get("gt") or 0))
            return real(*args, **kwargs)

        recorder.select_events = counted
        with pytest.raises(ConcurrencyConflictError):
            worker.append("r", [UserInput("mine")], expected_version=300)
        assert reads and min(reads) >= 300  # never from the start


LONG = "".join(f"step {i}: ran the suite again, 3 failed, 120 passed\n" for i in range(2000))  # ~110 KB


def _large(i: int) -> UserInput:
    """A large event (a zstd frame when stored), much like the others: a delta of the last one."""
    return UserInput(LONG.replace("step 7:", f"step 7 ({i}):"))


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_large_event_after_a_restore_is_no_delta_of_a_keyframe_the_log_lost(
        store_url: str, encrypted: bool) -> None:
    """The worker remembered its keyframe at 3, which the restore removed: the next large event
    was written as a delta of whatever row 3 held then, and no read of the run succeeded again."""
    keyring = Keyring(generate_key()) if encrypted else None
    with EventStore(store_url, keyring=keyring) as worker:
        worker.append("r", [RunStarted(), UserInput("one")])
        worker.append("r", [_large(0)])  # 3: a keyframe the worker remembers
        _restore(store_url, "r", 2)
        assert worker.append("r", [UserInput("small")])[0].position == 3
        assert worker.append("r", [_large(1)])[0].position == 4
        assert worker.append("r", [_large(2)])[0].position == 5  # a delta of 4, the new keyframe
        assert [e.event for e in worker.read("r")][2:] == [UserInput("small"), _large(1), _large(2)]
    assert _positions(store_url, "r", keyring) == [1, 2, 3, 4, 5]


def test_a_reloaded_version_after_a_restore_forgets_the_lost_keyframe(store_url: str) -> None:
    """The log moved back, found by an append at the version the caller read again."""
    with EventStore(store_url) as worker:
        worker.append("r", [RunStarted(), UserInput("one"), _large(0)])
        _restore(store_url, "r", 2)
        assert worker.append("r", [UserInput("small")], expected_version=2)[0].position == 3
        assert worker.append("r", [_large(1)], expected_version=3)[0].position == 4
    assert _positions(store_url, "r") == [1, 2, 3, 4]


def test_a_keyframe_rewritten_under_a_dropped_head_is_checked_by_the_insert(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's head of the run was dropped (it wrote many other runs since), so the head it
    reads again is the log's and passes its check; its memory of the keyframe at 3 is still there,
    and row 3 is now another writer's: the insert checks the keyframe's row as well."""
    monkeypatch.setattr("contextfold.store.run_heads.HEADS_KEPT", 1)
    with EventStore(store_url) as worker, EventStore(store_url) as other:
        worker.append("r", [RunStarted(), UserInput("one"), _large(0)])
        _restore(store_url, "r", 2)
        other.append("r", [UserInput(LONG.replace("suite", "tests")), UserInput("two")])
        worker.append("s", [RunStarted()])  # drops the worker's head of r
        assert worker.append("r", [_large(1)])[0].position == 5
        assert worker.append("r", [_large(2)])[0].position == 6
    assert _positions(store_url, "r") == [1, 2, 3, 4, 5, 6]


def test_a_run_created_again_after_a_restore_is_no_delta_of_its_old_keyframe(
        store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restore from before the run began, then an import of a run of the same id in one batch
    (by a worker whose head of the run was dropped meanwhile)."""
    monkeypatch.setattr("contextfold.store.run_heads.HEADS_KEPT", 1)
    with EventStore(store_url) as worker:
        worker.append("r", [RunStarted(), UserInput("one"), _large(0)])
        _restore(store_url, "r", 0)
        worker.append("s", [RunStarted()])  # drops the worker's head of r
        assert worker.append_new_runs([("r", [RunStarted(), UserInput("two"), UserInput("three"),
                                              _large(1)])]) == 4
    assert _positions(store_url, "r") == [1, 2, 3, 4]


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_reader_that_read_the_old_keyframe_reads_the_new_one_s_deltas(
        store_url: str, encrypted: bool) -> None:
    """A long-lived reader remembered the keyframe at 3 it read before the restore; another writer
    then wrote a keyframe and a delta of it at 3 and 4: the reader decoded the new delta against
    the old keyframe and called an intact log damaged, where a fresh store read it."""
    keyring = Keyring(generate_key()) if encrypted else None
    other_text = LONG.replace("suite", "tests")
    with EventStore(store_url, keyring=keyring) as writer:
        writer.append("r", [RunStarted(), UserInput("one"), _large(0)])
        writer.append("r", [_large(1)])  # 4: a delta of 3
    with EventStore(store_url, keyring=keyring) as reader:
        assert len(reader.read("r")) == 4  # remembers the keyframe at 3
        _restore(store_url, "r", 2)
        with EventStore(store_url, keyring=keyring) as other:
            other.append("r", [UserInput(other_text)])
            other.append("r", [UserInput(other_text + "and more")])  # 4: a delta of the new 3
        assert [e.event for e in reader.read("r", after=3)] == [UserInput(other_text + "and more")]
        assert reader.verify("r").ok
        assert [e.event for e in reader.read("r")][2:] == [UserInput(other_text),
                                                           UserInput(other_text + "and more")]


def test_a_damaged_delta_of_a_remembered_keyframe_is_still_an_integrity_error(store_url: str) -> None:
    """The reader tries the log's keyframe when the one it remembers fails a delta: the same row
    there, and the delta is damaged."""
    with EventStore(store_url) as store:
        store.append("r", [RunStarted(), _large(0)])
        store.append("r", [_large(1)])
        assert len(store.read("r")) == 3
        b = store.backend
        p = b.placeholder
        row = bytes(b.query(f"SELECT state FROM {b.table(EVENTS_TABLE)} WHERE originator_id = {p} "
                            f"AND originator_version = 3", ("r",))[0][0])
        assert row.startswith(b"cfd1:2:")
        b.execute(f"UPDATE {b.table(EVENTS_TABLE)} SET state = {p} WHERE originator_id = {p} "
                  "AND originator_version = 3", (row[:-9] + bytes([row[-9] ^ 0x55]) + row[-8:], "r"))
        with pytest.raises(IntegrityError, match="delta row is damaged"):
            store.read("r", after=2)


def test_a_read_that_continues_a_fold_checks_the_event_folded_last(store_url: str) -> None:
    """``iter_events(after=V, after_hash=H)``: what ``Run.state`` catches up with; the row at V is
    read by the same query, and one that is not H's (or none) fails the read before any event."""
    with EventStore(store_url) as worker:
        recorded = worker.append("r", [RunStarted(), UserInput("one"), _large(0), UserInput("three")])
        assert list(worker.iter_events("r", after=4, after_hash=recorded[3].hash)) == []
        assert [e.position for e in worker.iter_events("r", after=3, after_hash=recorded[2].hash)] == [4]
        _restore(store_url, "r", 2)
        with pytest.raises(StaleHeadError):
            next(worker.iter_events("r", after=4, after_hash=recorded[3].hash))
        worker.append("r", [_large(1), UserInput("three")])
        with pytest.raises(StaleHeadError):
            next(worker.iter_events("r", after=3, after_hash=recorded[2].hash))


@pytest.mark.parametrize("read_first", [False, True])
def test_a_run_the_restore_removed_whole_is_imported_again_by_the_same_store(
        store_url: str, read_first: bool) -> None:
    """A backup from before the run began: the store's cached head (written or read) said the run
    held 3 events, nothing after 3 was found, and ``append_new_runs`` raised RunExistsError for a
    run the log no longer held, until the process restarted."""
    with EventStore(store_url) as worker:
        worker.append("r", [RunStarted(), UserInput("one"), _large(0)])
        if read_first:
            assert len(list(worker.iter_events("r"))) == 3
        _restore(store_url, "r", 0)
        assert worker.append_new_runs([("r", [RunStarted(), UserInput("two"), _large(1)]),
                                       ("s", [RunStarted()])]) == 4
        assert worker.append("r", [UserInput("three")])[0].position == 4
    assert _positions(store_url, "r") == [1, 2, 3, 4]


def test_a_run_the_restore_cut_short_is_still_taken_and_says_its_real_length(store_url: str) -> None:
    """A restore that kept part of the run: still a run that exists, named with the version the
    log holds, not the one the store remembered."""
    with EventStore(store_url) as worker:
        worker.append("r", [RunStarted(), UserInput("one"), UserInput("two")])
        _restore(store_url, "r", 1)
        with pytest.raises(RunExistsError) as caught:
            worker.append_new_runs([("r", [RunStarted()])])
        assert caught.value.events == 1


@pytest.mark.parametrize("expected_version", [None, 0])
def test_an_append_to_a_run_the_restore_removed_whole_starts_it_again(
        store_url: str, expected_version: int | None) -> None:
    with EventStore(store_url) as worker:
        worker.append("r", [RunStarted(), UserInput("one"), UserInput("two")])
        _restore(store_url, "r", 0)
        recorded = worker.append("r", [RunStarted(), UserInput("again")], expected_version=expected_version)
        assert [e.position for e in recorded] == [1, 2]
    assert _positions(store_url, "r") == [1, 2]


def _record(encoding: str) -> ContextBuilt:
    return ContextBuilt(turn=1, provider="openai-chat", request_hash="r", prefix_hash="p",
                        config_hash="c", manifest={"encoding": encoding})


def test_a_record_the_restore_removed_pins_no_encoding(store_url: str) -> None:
    """The worker's cached head knew the run's first record (cl100k_base), which the restore
    removed: a record naming another encoding is the run's first now, not a conflict. The
    append's second look read the head from the cached one, which the log no longer ends at."""
    with EventStore(store_url) as worker:
        worker.append("r", [RunStarted(), UserInput("one"), _record("cl100k_base")])
        _restore(store_url, "r", 2)
        assert worker.append("r", [_record("o200k_base")])[0].position == 3
        with pytest.raises(EncodingConflictError):
            worker.append("r", [_record("cl100k_base")])
    assert _positions(store_url, "r") == [1, 2, 3]


def test_a_result_the_restore_removed_can_be_appended_again(store_url: str) -> None:
    """The cached head's pairing had the call answered; the restore removed the answer: the
    store's second look at a refused batch read the same cached head and called the call's
    result a duplicate, for as long as the process lived."""
    with EventStore(store_url) as worker:
        worker.append("r", [RunStarted(), ModelResponse(tool_calls=[ToolCall(call_id="c1", name="sh",
                                                                              arguments="{}")])])
        worker.append("r", [ToolResult(call_id="c1", content="lost with the restore")])
        _restore(store_url, "r", 2)
        assert worker.append("r", [ToolResult(call_id="c1", content="again")])[0].position == 3
    assert _positions(store_url, "r") == [1, 2, 3]

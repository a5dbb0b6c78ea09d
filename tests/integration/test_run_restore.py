"""A long-lived ``Run`` handle whose log moved back under it (an earlier backup restored online,
as ``test_store_restore`` does it): its next state is folded again from the log, never the new
events on top of the removed ones; on every backend."""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.api import Run, open_store
from contextfold.domain.errors import RunNotFoundError
from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.store.backends import EVENTS_TABLE
from contextfold.store.crypto import generate_key
from contextfold.store.event_reads import EventReads


def _restore(store_url: str, run_id: str, keep: int) -> None:
    """The run as a backup taken at position ``keep`` holds it, written by another connection."""
    with open_store(store_url) as admin:
        b = admin.events.backend
        b.execute(f"DELETE FROM {b.table(EVENTS_TABLE)} WHERE originator_id = {b.placeholder} "
                  f"AND originator_version > {b.placeholder}", (run_id, keep))


def _started(run: Run, output: str) -> None:
    run.append(UserInput("Fix the failing test"))
    run.append(ModelResponse(tool_calls=[ToolCall(call_id="c1", name="pytest", arguments="{}")]))
    run.append(ToolResult(call_id="c1", content=output))


BUILD: dict[str, Any] = {"provider": "anthropic", "model": "claude-sonnet-4-5", "window": 20_000,
                         "reserve": 2_000}


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_run_handle_folds_the_log_again_after_it_moved_back(store_url: str, encrypted: bool) -> None:
    """Restored to 2, then another writer appended past the old end: the handle's build held the
    removed output and instruction, missed the new ones, and recorded that request (its replay
    failed)."""
    key = generate_key() if encrypted else None
    with open_store(store_url, cipher_key=key) as store:
        run = store.run("r")
        _started(run, "OLD-OUTPUT: 3 failed")
        run.append(UserInput("OLD instruction"))
        assert run.state().version == 4
        _restore(store_url, "r", 2)
        with open_store(store_url, cipher_key=key) as other:
            theirs = other.run("r")
            theirs.append(ToolResult(call_id="c1", content="new output: 1 failed"))
            theirs.append(UserInput("new instruction A"), UserInput("new instruction B"))
        built = run.build(**BUILD)
        body = built.body_bytes.decode()
        assert "new output" in body and "new instruction B" in body
        assert "OLD" not in body
        assert run.state().version == 6  # the new events and the build's record
    with open_store(store_url, cipher_key=key) as fresh:
        assert fresh.run("r").replay(turn=built.manifest.turn).ok


def test_a_log_moved_back_behind_the_folded_version_is_folded_again(store_url: str) -> None:
    with open_store(store_url) as store:
        run = store.run("r")
        _started(run, "3 failed")
        run.append(UserInput("removed"))
        assert run.state().version == 4
        _restore(store_url, "r", 2)
        state = run.state()
        assert state.version == 2 and state.open_groups  # the call is open again
        assert "removed" not in run.build(**BUILD).body_bytes.decode()


def test_a_long_output_read_back_after_a_restore_is_the_log_s_new_one(store_url: str) -> None:
    """A long tool output is kept as its position and read back through the store's text cache,
    which held the removed event's text at that position."""
    old, new = "OLD line\n" * 400, "new line\n" * 400  # longer than LAZY_TEXT_CHARS
    with open_store(store_url) as store:
        run = store.run("r")
        _started(run, old)
        assert "OLD line" in run.build(**BUILD).body_bytes.decode()  # cached at position 3
        _restore(store_url, "r", 2)
        with open_store(store_url) as other:
            theirs = other.run("r")
            theirs.append(ToolResult(call_id="c1", content=new))
            theirs.append(UserInput("go on"), UserInput("and on"))  # past the old end (4)
        body = run.build(**BUILD).body_bytes.decode()
        assert "new line" in body and "OLD line" not in body


def test_catching_up_a_run_handle_costs_one_read(store_url: str) -> None:
    """The check rides on the query that reads the new events: every build pays it."""
    with open_store(store_url) as store:
        run = store.run("r")
        _started(run, "3 failed")
        run.state()
        run.append(UserInput("next"))
        recorder = store.events.backend.recorder
        calls: list[tuple[Any, ...]] = []
        real = recorder.select_events

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls.append((args, kwargs))
            return real(*args, **kwargs)

        recorder.select_events = counted
        assert run.state().version == 4
        assert len(calls) == 1


def test_a_run_the_restore_removed_whole_is_started_again_through_its_handle(store_url: str) -> None:
    """A backup from before the run began: the handle finds no run (as a handle of a new id does),
    and the run starts again through the same store (its cached head of the removed run is not
    the log's)."""
    with open_store(store_url) as store:
        run = store.run("r")
        _started(run, "3 failed")
        assert run.state().version == 3
        _restore(store_url, "r", 0)
        with pytest.raises(RunNotFoundError):
            run.state()
        assert store.events.append_new_runs([("r", [UserInput("Fix it again")])]) == 1
        assert run.state().version == 1
        run.append(UserInput("and go on"))
        assert run.state().version == 2


def _large(variant: int) -> UserInput:
    """~160 KB of text, stored compressed: the second of two a delta of the first (as a run's
    consecutive build records are)."""
    return UserInput("".join(f"line {i}: ran the suite, {variant if i == 900 else 0} failed\n"
                             for i in range(4000)))


@pytest.mark.parametrize("encrypted", [False, True])
def test_catching_up_a_run_handle_decodes_no_row(store_url: str, encrypted: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The check that the log still holds the event folded last inflated that row (usually the
    last build's record, a megabyte as a delta of its keyframe) on every catch-up: now its
    stored bytes are compared by digest with those the fold read. New events are still decoded."""
    with open_store(store_url, cipher_key=generate_key() if encrypted else None) as store:
        run = store.run("r")
        run.append(UserInput("go"), _large(1))
        run.append(_large(2))  # a delta row
        assert run.state().version == 3
        decoded: list[int] = []
        real = EventReads._plain

        def counted(self: EventReads, run_id: str, position: int, topic: str, state: bytes) -> bytes:
            decoded.append(position)
            return real(self, run_id, position, topic, state)

        monkeypatch.setattr(EventReads, "_plain", counted)
        assert run.state().version == 3
        assert decoded == []
        run.append(UserInput("next"))
        assert run.state().version == 4
        assert decoded == [4]
        assert run.state().version == 4
        assert decoded == [4]


def test_a_row_stored_again_with_other_bytes_is_decoded_and_still_holds_the_event(store_url: str) -> None:
    """The digest is a shortcut, not the check: a row holding the same event in other bytes (here
    stored again uncompressed; a store re-encrypted under a new key does the same) is decoded
    and its chain hash compared, and the handle goes on without folding the run again."""
    with open_store(store_url) as store:
        run = store.run("r")
        run.append(UserInput("go"), _large(1))
        run.append(_large(2))
        state = run.state()
        b = store.events.backend
        p = b.placeholder
        stored = bytes(b.query(f"SELECT state FROM {b.table(EVENTS_TABLE)} WHERE originator_id = {p} "
                               "AND originator_version = 3", ("r",))[0][0])
        plain = store.events._plain("r", 3, "user_input@1", stored)
        assert plain != stored
        b.execute(f"UPDATE {b.table(EVENTS_TABLE)} SET state = {p} WHERE originator_id = {p} "
                  "AND originator_version = 3", (plain, "r"))
        run.append(UserInput("next"))
        assert run.state() is state and state.version == 4
        assert store.events.verify("r").ok

"""When did it happen: ``runs`` and ``events`` show the times, an export carries them and an import
keeps them (the chain head unchanged), and ``--at TIME`` picks the turn whose request was the last
one built at or before it, in every command that takes ``--turn``.

On a real OpenHands trace (its events' timestamps) and on a live run whose builds are recorded at
times of the test's own clock (``open_store(clock=...)``)."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from contextfold.cli import main
from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.store_api import open_store

TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES",
                             Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"))
TRACE = TRACES / "openhands-event-streams" / "runtime_trajs_basic.json"
"""Five events: the start (no time), the task at 22:44:56.900854, a response at 22:45:13.764487,
its result at 22:45:13.801384, the last response at 22:45:18.405685 (2025-01-27, no zone: UTC)."""

pytestmark = pytest.mark.skipif(not TRACE.is_file(), reason=f"{TRACE} is absent")


def runner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    def cf(*args: str, store: str = "cf.db") -> tuple[int, str, str]:
        try:
            code = main(["--store", f"sqlite:///{tmp_path / store}", *args])
        except SystemExit as exc:  # argparse's usage errors
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err
    return cf


@pytest.fixture
def cf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    run = runner(tmp_path, capsys)
    assert run("import", str(TRACE), "--run", "oh")[0] == 0
    return run


def test_runs_and_events_show_the_trace_s_times(cf: Callable[..., tuple[int, str, str]]) -> None:
    code, out, _ = cf("runs", "--json")
    assert code == 0 and json.loads(out) == [{"run_id": "oh", "events": 5,
                                              "first_at": "2025-01-27T22:44:56.900854Z",
                                              "last_at": "2025-01-27T22:45:18.405685Z"}]
    assert cf("runs")[1] == "oh\t5 events\t2025-01-27T22:44:56.900854Z .. 2025-01-27T22:45:18.405685Z\n"
    lines = cf("events", "oh")[1].splitlines()
    assert lines[0].split()[:3] == ["1", "-", "run_started"]
    assert lines[3].split()[:3] == ["4", "2025-01-27T22:45:13.801384Z", "tool_result"]
    exported = [json.loads(line) for line in cf("events", "oh", "--json")[1].splitlines()]
    assert "recorded_at" not in exported[0] and exported[1]["recorded_at"] == "2025-01-27T22:44:56.900854Z"


def test_an_export_carries_the_times_and_its_import_ends_at_the_same_chain_head(
        cf: Callable[..., tuple[int, str, str]], tmp_path: Path) -> None:
    export = cf("events", "oh", "--json", "--with-artifacts")[1]
    (tmp_path / "oh.jsonl").write_text(export)
    assert cf("import", str(tmp_path / "oh.jsonl"), "--run", "oh", store="copy.db")[0] == 0
    assert cf("events", "oh", "--json", "--with-artifacts", store="copy.db")[1] == export
    assert cf("runs", "--json", store="copy.db")[1] == cf("runs", "--json")[1]
    head = [line for line in cf("audit", "oh")[1].splitlines() if "hash chain intact" in line]
    assert head and head == [line for line in cf("audit", "oh", store="copy.db")[1].splitlines()
                             if "hash chain intact" in line]
    # an export made before times (no recorded_at): imported without them, the same chain
    old = "\n".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "recorded_at"})
                    for line in export.splitlines())
    (tmp_path / "old.jsonl").write_text(old)
    assert cf("import", str(tmp_path / "old.jsonl"), "--run", "oh", store="old.db")[0] == 0
    assert cf("runs", store="old.db")[1] == "oh\t5 events\tno times\n"
    assert head == [line for line in cf("audit", "oh", store="old.db")[1].splitlines()
                    if "hash chain intact" in line]
    # a recorded_at that is no time: refused, naming the line, nothing written
    bad = export.replace('"recorded_at":"2025-01-27T22:44:56.900854Z"', '"recorded_at":"noon"')
    (tmp_path / "bad.jsonl").write_text(bad)
    code, _, err = cf("import", str(tmp_path / "bad.jsonl"), "--run", "oh", store="bad.db")
    assert code == 2 and "ImportFormatError" in err and "recorded_at is not an ISO 8601 time: 'noon'" in err


@pytest.mark.parametrize("command", [("manifest", "oh"), ("replay", "oh"), ("audit", "oh"), ("build", "oh"),
                                     ("why", "oh", "str_replace_editor")])
def test_at_picks_the_turn_whose_request_was_last_built_and_says_why(
        cf: Callable[..., tuple[int, str, str]], command: tuple[str, ...]) -> None:
    by_turn = cf(*command, "--turn", "2")
    code, out, err = cf(*command, "--at", "2025-01-27 22:45:14")
    # audit --turn of a turn without a record shows it and exits 2 (not checked), as --at does
    assert code == by_turn[0] == (2 if command[0] == "audit" else 0), err
    if command[0] not in ("build", "replay"):  # these record a rebuild of a turn without a record
        assert out == by_turn[1]
    assert ("--at 2025-01-27 22:45:14 is turn 2: its request was the last one built at or before "
            "2025-01-27T22:45:14.000000Z, at 2025-01-27T22:45:13.801384Z (the last event before its model "
            "response, at position 4); no later request was built") in err
    assert cf(*command, "--at", "2025-01-27T23:45:13.7+01:00")[2].count("is turn 1:") == 1


def test_at_refuses_a_time_before_the_run_a_run_without_times_and_a_turn_beside_it(
        cf: Callable[..., tuple[int, str, str]], tmp_path: Path) -> None:
    code, out, err = cf("replay", "oh", "--at", "2025-01-27T22:44:56Z")
    assert code == 2 and out == "" and "TimeNotInRunError" in err and "before its first request" in err
    code, _, err = cf("replay", "oh", "--at", "2025-01-27T22:45:00", "--turn", "1")
    assert code == 2 and "not allowed with argument" in err
    code, _, err = cf("replay", "oh", "--at", "at noon")
    assert code == 2 and "InvalidInputError: not a time: 'at noon'" in err
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": "hello"}]))
    assert cf("import", str(chat), "--run", "chat")[0] == 0
    code, _, err = cf("manifest", "chat", "--at", "2025-01-27T22:45:00")
    assert code == 2 and "TimeNotInRunError" in err and "carry no times" in err and "--turn N" in err
    assert cf("replay", "ghost", "--at", "2025-01-27T22:45:00")[0] == 2


def test_help_says_a_bare_time_is_utc(cf: Callable[..., tuple[int, str, str]]) -> None:
    for command in ("build", "manifest", "replay", "audit", "why"):
        out = cf(command, "--help")[1]
        assert "--at TIME" in out and "without a zone is UTC" in " ".join(out.split()), command


def test_a_live_run_s_builds_give_their_turns_times(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Each build records its request at the store's clock: ``--at`` between two builds is the
    first; at the second's time, the second (the pending turn too, built but not answered)."""
    start = datetime(2026, 12, 7, 14, 0, tzinfo=UTC)
    ticks = itertools.count()
    with open_store(f"sqlite:///{tmp_path / 'cf.db'}",
                    clock=lambda: start + next(ticks) * timedelta(minutes=1)) as store:
        run = store.run("live")
        run.append(UserInput("fix the bug"))  # 14:00
        run.build()  # turn 1 recorded at 14:01
        run.append(ModelResponse(tool_calls=(ToolCall(call_id="c1", name="sh", arguments="{}"),)))  # 14:02
        run.append(ToolResult(call_id="c1", content="fixed"))  # 14:03
        run.build()  # turn 2 recorded at 14:04
    cf = runner(tmp_path, capsys)
    for at, turn in (("2026-12-07T14:01", 1), ("2026-12-07T14:03:59", 1), ("2026-12-07T14:04", 2),
                     ("2026-12-07T18:00+02:00", 2)):
        code, out, err = cf("manifest", "live", "--at", at, "--json")
        assert code == 0 and json.loads(out)["turn"] == turn, err
        assert "context_built record at position" in err
    assert cf("manifest", "live", "--at", "2026-12-07T14:00:30")[0] == 2  # before turn 1 was built

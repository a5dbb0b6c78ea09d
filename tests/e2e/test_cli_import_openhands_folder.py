"""``contextfold import`` of OpenHands conversations kept one JSON file per event.

OpenHands' file store keeps a session as ``sessions/<id>/events/<n>.json`` (one event per
file, named by its id) beside ``event_cache/<start>-<end>.json`` pages that copy 25 events
each and a ``metadata.json``. Each conversation is one run, equal to the run its events make
as one JSON array."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TRACES
from tests.e2e.test_cli_import_folder import cf, runs
from tests.unit.test_import_openhands_v1 import conversation as v1_conversation


def events_of(tmp_path: Path, capsys: pytest.CaptureFixture[str], run: str) -> list[dict[str, Any]]:
    """The run's events as exported, without what names the run (its id, in every event)."""
    code, out, err = cf(tmp_path, capsys, "events", run, "--json")
    assert code == 0, err
    return [{k: v for k, v in json.loads(line).items() if k != "run_id"} for line in out.splitlines()]


def _call(eid: int, call_id: str, command: str) -> dict[str, Any]:
    metadata = {"function_name": "execute_bash", "tool_call_id": call_id, "total_calls_in_response": 1,
                "model_response": {"id": f"resp-{eid}", "model": "claude-sonnet-4", "choices": [{"message": {
                    "role": "assistant", "content": "", "tool_calls": [{
                        "id": call_id, "type": "function", "function": {
                            "name": "execute_bash", "arguments": json.dumps({"command": command})}}]}}]}}
    return {"id": eid, "source": "agent", "action": "run", "message": f"Running command: {command}",
            "args": {"command": command, "thought": ""}, "tool_call_metadata": metadata}


def _output(eid: int, cause: int, call_id: str, content: str, exit_code: int) -> dict[str, Any]:
    return {"id": eid, "source": "environment", "cause": cause, "observation": "run", "content": content,
            "extras": {"command": "", "metadata": {"exit_code": exit_code}},
            "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": call_id}}


def conversation(task: str, steps: int) -> list[dict[str, Any]]:
    """An OpenHands event stream: the system prompt, the task, ``steps`` commands with their
    outputs (ids past 9, so a name order would put ``10.json`` before ``2.json``), the finish."""
    events: list[dict[str, Any]] = [
        {"id": 0, "source": "agent", "action": "system", "message": "You are OpenHands agent.",
         "args": {"content": "You are OpenHands agent.", "tools": []}},
        {"id": 1, "source": "user", "action": "message", "message": task,
         "args": {"content": task, "image_urls": []}},
        {"id": 2, "source": "environment", "observation": "agent_state_changed", "content": "",
         "extras": {"agent_state": "running"}}]
    for n in range(steps):
        eid = len(events)
        events += [_call(eid, f"toolu_{n:02d}", f"pytest -k case{n}"),
                   _output(eid + 1, eid, f"toolu_{n:02d}", f"case{n}: 1 failed", 1)]
    events.append({"id": len(events), "source": "agent", "action": "finish",
                   "args": {"final_thought": "Fixed.", "outputs": {}}})
    return events


def session(root: Path, sid: str, events: list[dict[str, Any]], model: str | None = None) -> Path:
    """``root/<sid>`` as OpenHands' file store writes it (``model``: its metadata's ``llm_model``)."""
    folder = root / sid
    (folder / "events").mkdir(parents=True)
    for e in events:
        (folder / "events" / f"{e['id']}.json").write_text(json.dumps(e, indent=2))
    (folder / "event_cache").mkdir()
    (folder / "event_cache" / "0-25.json").write_text(json.dumps(events[:25]))
    metadata = {"conversation_id": sid, "title": "Fix the tests"} | ({"llm_model": model} if model else {})
    (folder / "metadata.json").write_text(json.dumps(metadata))
    return folder


def test_each_conversation_is_one_run_equal_to_its_events_as_one_array(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = conversation("Fix the failing tests", 6), conversation("Make the build pass", 2)
    root = tmp_path / "openhands" / "sessions"
    session(root, "4f1c", first)
    session(root, "9a2e", second, model="openai/gpt-4o")
    code, out, err = cf(tmp_path, capsys, "import", str(tmp_path / "openhands"), "--run", "oh")
    assert code == 0, err
    assert "into 2 run(s) from" in out and "(2 openhands event folders)" in out
    assert "skipped" not in out  # a session's metadata.json is its state, not a trace
    assert runs(tmp_path, capsys) == {"oh/sessions/4f1c": 16, "oh/sessions/9a2e": 8}
    for name, events in (("4f1c", first), ("9a2e", second)):
        whole = tmp_path / f"{name}.json"
        whole.write_text(json.dumps(events))
        code, _, err = cf(tmp_path, capsys, "import", str(whole), "--run", f"array-{name}")
        assert code == 0, err
        as_array, as_files = events_of(tmp_path, capsys, f"array-{name}"), events_of(
            tmp_path, capsys, f"oh/sessions/{name}")
        assert as_files[1:] == as_array[1:]
        # the model: the session's metadata names it, else the events' model responses do
        assert (as_files[0]["model"], as_array[0]["model"]) == (
            "openai/gpt-4o" if name == "9a2e" else "claude-sonnet-4", "claude-sonnet-4")


def test_a_conversation_folder_or_its_events_folder_imports_as_the_run_itself(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = session(tmp_path, "4f1c", conversation("Fix the failing tests", 5))
    code, out, err = cf(tmp_path, capsys, "import", str(folder), "--run", "whole")
    assert code == 0, err
    assert "  whole: 14 events" in out
    code, out, err = cf(tmp_path, capsys, "import", str(folder / "events"), "--run", "events-only")
    assert code == 0, err
    assert "skipped" not in out
    assert events_of(tmp_path, capsys, "whole") == events_of(tmp_path, capsys, "events-only")


def test_a_broken_event_file_is_named_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "sessions"
    session(root, "good", conversation("Fix the failing tests", 2))
    bad = session(root, "bad", conversation("Make the build pass", 2))
    (bad / "events" / "4.json").write_text('{"id": 4,\n "source": "agent"\n')  # cut off mid-write
    code, _, err = cf(tmp_path, capsys, "import", str(root), "--run", "oh")
    assert code == 2
    assert f"{bad / 'events' / '4.json'}:" in err and "invalid JSON" in err
    (bad / "events" / "4.json").write_text(json.dumps({"id": 4, "source": "agent"}))
    code, _, err = cf(tmp_path, capsys, "import", str(root), "--run", "oh")
    assert code == 2
    assert f"{bad / 'events' / '4.json'}:1: event has neither 'action' nor 'observation'" in err
    assert runs(tmp_path, capsys) == {}


def test_a_glob_without_json_files_reads_no_event_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session(tmp_path / "sessions", "4f1c", conversation("Fix the failing tests", 1))
    code, _, err = cf(tmp_path, capsys, "import", str(tmp_path / "sessions"), "--run", "t",
                      "--glob", "*.traj")
    assert code == 2 and "no file in this folder matches *.traj" in err


@pytest.mark.skipif(not (TRACES / "openhands-event-streams").is_dir(),
                    reason=f"{TRACES} has no openhands-event-streams")
def test_the_multi_swe_bench_runs_kept_as_event_files_import_as_their_jsonl_records(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = TRACES / "openhands-event-streams" / "multi_swe_bench_example_output.jsonl"
    records = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    for record in records:
        session(tmp_path / "sessions", record["instance_id"], record["history"])
    code, out, err = cf(tmp_path, capsys, "import", str(tmp_path / "sessions"), "--run", "files")
    assert code == 0, err
    assert "(3 openhands event folders)" in out
    code, _, err = cf(tmp_path, capsys, "import", str(source), "--run", "jsonl")
    assert code == 0, err
    for record in records:
        iid = record["instance_id"]
        as_files = events_of(tmp_path, capsys, f"files/{iid}")
        as_jsonl = events_of(tmp_path, capsys, f"jsonl/{iid}")
        assert len(as_files) > 40
        # the run's start names the model from the JSONL record's config; the rest is the same
        assert as_files[0]["type"] == as_jsonl[0]["type"] == "run_started"
        assert as_files[1:] == as_jsonl[1:]


def test_another_tools_numbered_files_in_an_events_folder_are_read_one_by_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    for n in (1, 2):
        path = tmp_path / "exports" / "events" / f"{n}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(chat))
    code, out, err = cf(tmp_path, capsys, "import", str(tmp_path / "exports"), "--run", "x")
    assert code == 0, err
    assert "(2 openai-chat files)" in out
    assert runs(tmp_path, capsys) == {"x/events/1": 3, "x/events/2": 3}


def test_a_v1_sdk_conversation_kept_one_file_per_event_is_one_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The V1 SDK names its files ``event-<index>-<event uuid>.json`` beside a lock and a count
    marker (hidden) in ``<conversation>/events/``, with the conversation's ``base_state.json``."""
    events = v1_conversation()
    folder = tmp_path / "conversations" / "5e0c6f3ab2d14a4e"
    (folder / "events").mkdir(parents=True)
    for n, e in enumerate(events):
        name = f"event-{n:05d}-{uuid.UUID(int=n + 1)}.json"
        (folder / "events" / name).write_text(json.dumps(e))
    (folder / "events" / ".eventlog.lock").write_text("")
    (folder / "events" / f".eventlog-count-{len(events)}.marker").write_text("")
    (folder / "base_state.json").write_text(json.dumps({
        "id": "5e0c6f3ab2d14a4e", "agent": {"kind": "Agent", "llm": {
            "model": "litellm_proxy/claude-sonnet-4-5", "api_key": "**********"}}}))
    code, out, err = cf(tmp_path, capsys, "import", str(tmp_path / "conversations"), "--run", "v1")
    assert code == 0, err
    assert "(1 openhands event folder)" in out and "skipped" not in out
    (tmp_path / "all.json").write_text(json.dumps(events))
    code, _, err = cf(tmp_path, capsys, "import", str(tmp_path / "all.json"), "--run", "as-list")
    assert code == 0, err
    as_files = events_of(tmp_path, capsys, "v1/5e0c6f3ab2d14a4e")
    as_list = events_of(tmp_path, capsys, "as-list")
    # the run's model is the one its state names (a list of events names none); the rest is the same
    assert (as_files[0]["model"], as_list[0]["model"]) == ("litellm_proxy/claude-sonnet-4-5", None)
    assert as_files[1:] == as_list[1:]
    code, out, err = cf(tmp_path, capsys, "build", "v1/5e0c6f3ab2d14a4e", "--provider", "anthropic",
                        "--window", "16000", "--json")
    assert code == 0, err
    assert "Action rejected: too dangerous" in out

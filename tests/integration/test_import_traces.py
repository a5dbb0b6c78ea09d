"""Importers on real traces (../shared/traces): tau-bench, OpenHands, SWE-agent, pydantic-ai cassettes.

Skips, with the reason, when the traces folder is absent (set CONTEXTFOLD_TRACES
to point elsewhere).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from contextfold.domain.errors import ImportFormatError
from contextfold.domain.events import (
    AnyEvent,
    HistoryCompacted,
    InstructionSet,
    ModelResponse,
    PolicySet,
    RunStarted,
    ToolResult,
    ToolsRegistered,
    UserInput,
)
from contextfold.domain.log import PairingState
from contextfold.importers import detect_format, iter_runs, parse
from tests.request_calls import calls_and_answers

TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES",
                             Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"))

pytestmark = [
    pytest.mark.traces,
    pytest.mark.skipif(not TRACES.is_dir(), reason=f"traces folder {TRACES} is absent"),
]


def _calls(events: list[AnyEvent]) -> list[str]:
    return [c.call_id for e in events if isinstance(e, ModelResponse) for c in e.tool_calls]


def _results(events: list[AnyEvent]) -> list[str]:
    return [e.call_id for e in events if isinstance(e, ToolResult)]


def _replay_pairing(events: list[AnyEvent]) -> PairingState:
    """Every result must be a real answer (never late, never refused)."""
    state = PairingState()
    for pos, event in enumerate(events, start=1):
        kind = state.apply(event, pos)
        if isinstance(event, ToolResult):
            assert kind == "answer"
    return state


# ---------------------------------------------------------------- tau-bench

@pytest.fixture(scope="module")
def tau() -> tuple[list[dict[str, Any]], list[tuple[str, list[AnyEvent]]]]:
    path = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    data = path.read_bytes()
    return json.loads(data), list(iter_runs(data, format="openai-chat", source=str(path)))


def test_tau_bench_all_runs_import(tau: Any) -> None:
    records, runs = tau
    assert len(runs) == len(records) == 200
    assert len({suffix for suffix, _ in runs}) == 200
    reused = 0
    for rec, (suffix, events) in zip(records, runs, strict=True):
        traj = rec["traj"]
        assert suffix == f"task-{rec['task_id']}-trial-{rec['trial']}"
        # One message -> one event (system->PolicySet, user->UserInput,
        # assistant->ModelResponse, tool->ToolResult), plus the leading RunStarted.
        assert isinstance(events[0], RunStarted)
        assert len(events) == len(traj) + 1
        roles = Counter(m["role"] for m in traj)
        kinds = Counter(type(e).__name__ for e in events[1:])
        assert kinds == Counter({"PolicySet": roles["system"], "UserInput": roles["user"],
                                 "ModelResponse": roles["assistant"],
                                 "ToolResult": roles["tool"]}) - Counter()
        src_calls = [tc["id"] for m in traj for tc in m.get("tool_calls") or []]
        src_results = [m["tool_call_id"] for m in traj if m["role"] == "tool"]
        assert _calls(events) == src_calls
        assert _results(events) == src_results
        state = _replay_pairing(events)
        assert not state.open  # every call answered exactly once
        if len(set(src_calls)) < len(src_calls):
            reused += 1
    assert reused == 49


# ---------------------------------------------------------------- OpenHands

OPENHANDS_FILES = sorted((TRACES / "openhands-event-streams").glob("*.json*"))


@pytest.mark.parametrize("path", OPENHANDS_FILES, ids=lambda p: p.name)
def test_openhands_streams_import(path: Path) -> None:
    data = path.read_bytes()
    assert detect_format(data) == "openhands"
    runs = list(iter_runs(data, format="openhands", source=path.name))
    if path.suffix == ".jsonl":
        records = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    else:
        records = [{"history": json.loads(data)}]
    assert len(runs) == len(records)
    for rec, (_, events) in zip(records, runs, strict=True):
        history = rec["history"]
        src_ids = [e["tool_call_metadata"]["tool_call_id"] for e in history
                   if "action" in e and e.get("tool_call_metadata") and e["action"] != "finish"]
        if src_ids:
            assert _calls(events) == src_ids
        answered = [e for e in history if "observation" in e and (
            e.get("tool_call_metadata") or e.get("cause") is not None
            or "id" not in e) and e["observation"] not in ("agent_state_changed", "null",
                                                           "recall")]
        assert len(_results(events)) == len(answered)
        _replay_pairing(events)
        assert sum(isinstance(e, ModelResponse) for e in events) >= 1
        # the tools a system action gave the agent are registered with their schemas (they
        # were dropped: a rebuilt request declared the called ones with empty parameters)
        given = [t["function"] for e in history if e.get("action") == "system"
                 for t in (e.get("args") or {}).get("tools") or []]
        registered = [spec for e in events if isinstance(e, ToolsRegistered) for spec in e.tools]
        assert [(s.name, s.parameters) for s in registered] == [(f["name"], f["parameters"]) for f in given]


def test_openhands_multi_swe_bench_runs_register_codeact_tools() -> None:
    path = TRACES / "openhands-event-streams" / "multi_swe_bench_example_output.jsonl"
    for _, events in iter_runs(path.read_bytes(), format="openhands", source=path.name):
        [registered] = [e for e in events if isinstance(e, ToolsRegistered)]
        assert events.index(registered) == 2  # after RunStarted and the system prompt
        assert [s.name for s in registered.tools] == ["execute_bash", "think", "finish", "str_replace_editor"]
        assert "command" in registered.tools[0].parameters["properties"]


def test_openhands_flat_resolver_streams_keep_the_users_task() -> None:
    """The 2024 resolver output (flat events, no ``args``): each run's first user input is the
    task the first event carries, not an empty message."""
    path = TRACES / "openhands-event-streams" / "resolver_mock_output.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    runs = list(iter_runs(path.read_bytes(), format="openhands", source=path.name))
    assert len(runs) == len(records) == 2
    for rec, (_, events) in zip(records, runs, strict=True):
        task = next(e for e in events if isinstance(e, UserInput))
        assert task.text == rec["history"][0]["content"]
        assert task.text.startswith("Please fix the following issue")


def test_openhands_finish_keeps_what_the_model_wrote() -> None:
    """Multi-SWE-bench: a run's last response is its ``finish``, with the reply's own words
    (``args.thought``) and then the final message (``args.final_thought``)."""
    path = TRACES / "openhands-event-streams" / "multi_swe_bench_example_output.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    runs = list(iter_runs(path.read_bytes(), format="openhands", source=path.name))
    finished = 0
    for rec, (_, events) in zip(records, runs, strict=True):
        finish = [e for e in rec["history"] if e.get("action") == "finish"]
        if not finish:
            continue
        args = finish[-1]["args"]
        last = [e for e in events if isinstance(e, ModelResponse)][-1]
        assert last.text == f"{args['thought']}\n\n{args['final_thought']}"
        finished += 1
    assert finished == 2


def test_openhands_workspace_context_keeps_hosts_and_date() -> None:
    """Multi-SWE-bench: each run's workspace-context recall gave the model hosts, ports and the
    date (``additional_info.j2``'s RUNTIME_INFORMATION); they are the runtime's policy text."""
    path = TRACES / "openhands-event-streams" / "multi_swe_bench_example_output.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    runs = list(iter_runs(path.read_bytes(), format="openhands", source=path.name))
    for rec, (_, events) in zip(records, runs, strict=True):
        extras = next(e for e in rec["history"] if e.get("observation") == "recall")["extras"]
        [context] = [e for e in events if isinstance(e, PolicySet)
                     and e.source_ref == "openhands://workspace_context"]
        assert f"Today's date is {extras['date']} (UTC)." in context.text
        for host, port in extras["runtime_hosts"].items():
            assert f"* {host} (port {port})" in context.text


# ---------------------------------------------------------------- SWE-agent

SWE_FILES = sorted((TRACES / "swe-agent-demos").rglob("*.traj"))


def test_every_swe_agent_trajectory_is_found() -> None:
    assert len(SWE_FILES) == 22


@pytest.mark.parametrize("path", SWE_FILES, ids=lambda p: p.parent.name[:40] + "/" + p.name)
def test_swe_agent_trajectories_import_every_step_with_its_observation(path: Path) -> None:
    data = path.read_bytes()
    assert detect_format(data) == "swe-agent"
    events = parse(data, format="swe-agent", source=path.name)
    doc = json.loads(data)
    history = doc["history"]
    responses = [e for e in events if isinstance(e, ModelResponse)]
    results = [e for e in events if isinstance(e, ToolResult)]
    if doc.get("trajectory"):
        steps = doc["trajectory"]
        assert [r.text for r in responses] == [s.get("thought") or "" for s in steps]
        # what the model was shown: the command's output, inside SWE-agent's template
        assert all((s.get("observation") or "") in r.content for r, s in zip(results, steps, strict=True))
        assert len(results) == len(steps)
    else:  # read from the history
        assert len(responses) == sum(m["role"] == "assistant" for m in history)
        assert [r.content for r in results] == [m["content"] for m in history if m["role"] == "tool"]
    # a function-calling run keeps the ids it logged; every call is answered once, in order
    logged = [c["id"] for m in history for c in m.get("tool_calls") or ()]
    assert logged == [c for c in _calls(events) if not c.startswith("swe-")]
    assert _calls(events) == _results(events)
    assert not _replay_pairing(events).open
    demos = [m["content"] for m in history if m.get("is_demo")]
    assert [e.text for e in events if isinstance(e, InstructionSet)] == demos
    # a classic run's commands are tools from its start (documented where its prompt documents them)
    registered = [t for e in events if isinstance(e, ToolsRegistered) for t in e.tools]
    called = {c.name for e in responses for c in e.tool_calls}
    if logged:
        assert registered == []
    else:
        assert {t.name for t in registered} == called
        first_call = min(i for i, e in enumerate(events) if isinstance(e, ModelResponse) and e.tool_calls)
        assert all(i < first_call for i, e in enumerate(events) if isinstance(e, ToolsRegistered))
        prompt = "\n".join(m["content"] for m in history if m["role"] == "system")
        for tool in registered:
            if f"\n{tool.name}:\n  docstring:" in prompt:
                assert tool.description.split(" Usage: ")[0] in prompt


# ---------------------------------------------------------------- pydantic-ai cassettes

def _cassette_requests() -> list[tuple[str, str, dict[str, Any]]]:
    root = TRACES / "pydantic-ai-cassettes"
    if not root.is_dir():
        return []
    yaml = pytest.importorskip("yaml", reason="pyyaml is needed to read the cassettes")
    out = []
    for path in sorted(root.rglob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for n, it in enumerate(doc["interactions"]):
            body, uri = it["request"].get("parsed_body"), it["request"]["uri"]
            if not isinstance(body, dict):
                continue
            fmt = ("openai-chat" if "/chat/completions" in uri else
                   "openai-responses" if "/v1/responses" in uri else
                   "anthropic" if "api.anthropic.com/v1/messages" in uri else
                   "gemini" if ":generateContent" in uri else None)
            if fmt is not None:
                out.append((f"{path.relative_to(root)}#{n}", fmt, body))
    return out


def _source_ids(fmt: str, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Tool call ids and result ids, in order, as the recorded request carries them."""
    calls, answers = calls_and_answers(fmt, body)
    return calls, [call_id for call_id, _ in answers]


REQUESTS = _cassette_requests()


@pytest.mark.skipif(not REQUESTS, reason="no pydantic-ai cassettes found")
def test_cassette_request_bodies_import_with_their_ids() -> None:
    imported = continuations = 0
    formats: Counter[str] = Counter()
    for name, fmt, body in REQUESTS:
        data = json.dumps(body).encode()
        if fmt == "openai-responses" and (body.get("previous_response_id")
                                          or body.get("conversation")):
            # The body only holds the new items; earlier turns live server-side.
            try:
                parse(data, format=fmt, source=name)
            except ImportFormatError as e:
                assert "server-side state" in e.reason
                continuations += 1
                continue
        events = parse(data, format=fmt, source=name)
        calls, results = _source_ids(fmt, body)
        assert _calls(events) == calls, name
        # Responses server-side searches pair by order; the rest pair by id.
        assert sorted(_results(events)) == sorted(results), name
        if fmt != "openai-responses":
            assert _results(events) == results, name
        _replay_pairing(events)
        imported += 1
        formats[fmt] += 1
    assert imported + continuations == len(REQUESTS)
    assert continuations <= 3
    assert set(formats) == {"openai-chat", "openai-responses", "anthropic", "gemini"}


def test_anthropic_compaction_cassette_keeps_the_summary_apart_from_the_reply() -> None:
    """pydantic-ai's Anthropic compaction cassette: the assistant turn is [compaction summary,
    "Hello! 👋"]. The summary is a HistoryCompacted over the message before it, the reply as said."""
    yaml = pytest.importorskip("yaml", reason="pyyaml is needed to read the cassettes")
    path = (TRACES / "pydantic-ai-cassettes" / "models" / "cassettes" / "test_anthropic"
            / "test_anthropic_compaction_end_to_end.yaml")
    interactions = yaml.safe_load(path.read_text(encoding="utf-8"))["interactions"]
    body = [i["request"]["parsed_body"] for i in interactions
            if isinstance(i["request"].get("parsed_body"), dict)][-1]
    summary = next(b["content"] for m in body["messages"] if m["role"] == "assistant"
                   for b in m["content"] if b["type"] == "compaction")
    events = parse(json.dumps(body).encode(), format="anthropic", source=path.name)
    [compacted] = [e for e in events if isinstance(e, HistoryCompacted)]
    assert compacted.summary.inferences == (summary.strip(),)
    [reply] = [e for e in events if isinstance(e, ModelResponse)]
    assert reply.text == "Hello! \U0001f44b"

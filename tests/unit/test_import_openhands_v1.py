"""The OpenHands V1 importer (the software-agent SDK's events, each with a ``kind``).

The shapes follow the SDK's event models (``openhands.sdk.event``): a system prompt, a user
message with the context the agent appended, a parallel batch of two actions (one model
response), their observations, a rejected action, a scaffold error, bookkeeping events, and the
``finish`` call the agent ends with.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold.domain.errors import ImportFormatError
from contextfold.domain.events import (
    ImageBlock,
    ModelResponse,
    PolicySet,
    RunStarted,
    RuntimeNote,
    TextBlock,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.importers import detect_format, parse


def _b(value: Any) -> bytes:
    return json.dumps(value, indent=2).encode()


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value, "cache_prompt": False}


def action(eid: str, response: str, call_id: str, tool: str, arguments: dict[str, Any],
           thought: str = "") -> dict[str, Any]:
    return {"id": eid, "timestamp": "2026-11-02T10:00:01", "source": "agent", "kind": "ActionEvent",
            "thought": [text(thought)] if thought else [], "reasoning_content": None,
            "action": {"kind": "TerminalAction", **arguments}, "tool_name": tool, "tool_call_id": call_id,
            "tool_call": {"id": call_id, "name": tool, "arguments": json.dumps(arguments),
                          "origin": "completion"},
            "llm_response_id": response, "security_risk": "LOW"}


def observation(eid: str, action_id: str, call_id: str, tool: str, output: str, *,
                exit_code: int | None = None, kind: str = "TerminalObservation") -> dict[str, Any]:
    obs: dict[str, Any] = {"kind": kind, "content": [text(output)], "is_error": False}
    if exit_code is not None:
        obs |= {"command": "pytest -q", "exit_code": exit_code, "timeout": False,
                "metadata": {"exit_code": exit_code, "pid": -1, "working_dir": "/workspace"}}
    return {"id": eid, "timestamp": "2026-11-02T10:00:02", "source": "environment",
            "kind": "ObservationEvent", "tool_name": tool, "tool_call_id": call_id, "action_id": action_id,
            "observation": obs, "extended_content": []}


def conversation() -> list[dict[str, Any]]:
    return [
        {"id": "e0", "source": "agent", "kind": "SystemPromptEvent",
         "system_prompt": text("You are OpenHands agent."), "tools": [{"name": "terminal"}],
         "dynamic_context": text("Repository: acme/calc")},
        {"id": "e1", "source": "user", "kind": "MessageEvent", "activated_skills": ["testing"],
         "llm_message": {"role": "user", "content": [
             text("Fix the failing test"), {"type": "image", "image_urls": ["https://example.com/ci.png"]}]},
         "extended_content": [text("<EXTRA_INFO>Run pytest -q</EXTRA_INFO>")]},
        {"id": "e2", "source": "environment", "kind": "ConversationStateUpdateEvent",
         "key": "execution_status", "value": "running"},
        action("e3", "resp-1", "toolu_01", "terminal", {"command": "pytest -q"},
               "Run the tests and read calc.py."),
        action("e4", "resp-1", "toolu_02", "file_editor", {"command": "view", "path": "calc.py"}),
        observation("e5", "e3", "toolu_01", "terminal", "1 failed", exit_code=1),
        observation("e6", "e4", "toolu_02", "file_editor", "1\tdef add(a, b): return a - b",
                    kind="FileEditorObservation"),
        action("e7", "resp-2", "toolu_03", "terminal", {"command": "rm -rf /"}, "Clean up."),
        {"id": "e8", "source": "environment", "kind": "UserRejectObservation", "tool_name": "terminal",
         "tool_call_id": "toolu_03", "action_id": "e7", "rejection_reason": "too dangerous",
         "rejection_source": "user"},
        action("e9", "resp-3", "toolu_04", "finish", {"message": "Fixed add()."}, "Done."),
        observation("e10", "e9", "toolu_04", "finish", "Fixed add().", kind="FinishObservation"),
        {"id": "e11", "source": "agent", "kind": "MessageEvent",
         "llm_message": {"role": "assistant", "content": [text("The test passes now.")]}},
        {"id": "e12", "source": "agent", "kind": "AgentErrorEvent", "tool_name": "nope",
         "tool_call_id": "toolu_99", "error": "Tool 'nope' not found."},
    ]


def test_a_v1_conversation_maps_each_kind_and_keeps_a_parallel_batch_one_response() -> None:
    events = parse(_b(conversation()), format="openhands")
    assert isinstance(events[0], RunStarted)
    assert events[1] == PolicySet(text="You are OpenHands agent.\n\nRepository: acme/calc")
    task = events[2]
    assert isinstance(task, UserInput)
    assert [type(b) for b in task.content] == [TextBlock, ImageBlock, TextBlock]
    assert task.text.startswith("Fix the failing test") and "Run pytest -q" in task.text
    batch = events[3]
    assert isinstance(batch, ModelResponse) and batch.text == "Run the tests and read calc.py."
    assert batch.tool_calls == (
        ToolCall(call_id="toolu_01", name="terminal", arguments='{"command": "pytest -q"}'),
        ToolCall(call_id="toolu_02", name="file_editor", arguments='{"command": "view", "path": "calc.py"}'))
    tests, view = events[4], events[5]
    assert isinstance(tests, ToolResult) and isinstance(view, ToolResult)
    assert (tests.call_id, tests.content, tests.exit_code, tests.is_error, tests.origin) == (
        "toolu_01", "1 failed", 1, True, "external")
    assert (view.call_id, view.is_error, view.origin) == ("toolu_02", False, "workspace")
    rejected = events[7]
    assert isinstance(rejected, ToolResult)
    assert (rejected.call_id, rejected.content, rejected.is_error) == (
        "toolu_03", "Action rejected: too dangerous", True)
    finish, finished, reply, error = events[8:12]
    assert isinstance(finish, ModelResponse) and finish.tool_calls[0].name == "finish"
    assert isinstance(finished, ToolResult) and finished.content == "Fixed add()."
    assert reply == ModelResponse(text="The test passes now.")
    # answers no call: the runtime's note, not the user's current input
    assert error == RuntimeNote(text="Tool 'nope' not found.", is_error=True, source_ref="openhands://error/e12")
    assert len(events) == 12


def test_an_agent_server_page_and_a_bare_list_are_detected_and_read_alike() -> None:
    page = {"items": conversation(), "next_page_id": None}
    assert detect_format(_b(page)) == detect_format(_b(conversation())) == "openhands"
    assert detect_format(_b(conversation()[:2])) == "openhands"  # no action yet: still V1 events
    assert parse(_b(page), format="openhands") == parse(_b(conversation()), format="openhands")


def test_an_agent_error_for_an_open_call_is_its_error_result() -> None:
    events = [*conversation()[:2], action("a", "r", "toolu_07", "terminal", {"command": "ls"}),
              {"id": "b", "source": "agent", "kind": "AgentErrorEvent", "tool_name": "terminal",
               "tool_call_id": "toolu_07", "error": "Missing required argument 'command'"}]
    result = parse(_b(events), format="openhands")[-1]
    assert isinstance(result, ToolResult)
    assert (result.call_id, result.content, result.is_error) == (
        "toolu_07", "Missing required argument 'command'", True)


@pytest.mark.parametrize(("change", "message"), [
    (lambda es: es.insert(3, {"id": "x", "kind": "BrandNewEvent"}),
     "unknown OpenHands event kind 'BrandNewEvent'"),
    (lambda es: es[5]["observation"]["content"].append({"type": "audio"}),
     "unknown content part type 'audio'"),
    (lambda es: es[5].update(tool_call_id="toolu_zz"), "tool call pairing"),  # answers no call
])
def test_bad_v1_events_are_errors_that_name_the_line(change: Any, message: str) -> None:
    events = conversation()
    change(events)
    with pytest.raises(ImportFormatError) as info:
        parse(_b(events), format="openhands", source="conv.json")
    assert message in str(info.value)
    assert info.value.location.startswith("conv.json:") and info.value.location != "conv.json:1"

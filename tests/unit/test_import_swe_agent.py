"""The SWE-agent ``.traj`` importer: both modes, the history fallback, detection, and bad input.

The shapes follow the SWE-agent files in ``../shared/traces/swe-agent-demos`` (the trace
tests import all 22 of them); here each case is small enough to read whole.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from contextfold.domain.errors import ImportFormatError
from contextfold.domain.events import (
    ImageBlock,
    InstructionSet,
    ModelResponse,
    PolicySet,
    RunStarted,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolsRegistered,
    UserInput,
    canonical_json,
)
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import detect_format, parse
from contextfold.importers.swe_agent import command_docs, command_name, documented_tools
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.render import render
from tests.json_strings import joined_strings
from tests.unit.test_fold import Log

SYSTEM = {"role": "system", "content": "SETTING: you work in a shell.", "agent": "primary"}
DEMO = {"role": "user", "content": "Here is a demonstration ...", "is_demo": True, "agent": "primary"}
TASK = {"role": "user", "content": "We're currently solving the following issue: ...", "agent": "primary"}


def _b(value: Any) -> bytes:
    return json.dumps(value, indent=2).encode()


def _classic() -> dict[str, Any]:
    """A classic run: commands in the reply text, observations as user messages."""
    return {
        "environment": "swe_main",
        "history": [dict(SYSTEM), dict(DEMO), dict(TASK),
                    {"role": "assistant", "content": "Let's look.\n```\nopen a.py\n```",
                     "thought": "Let's look.", "action": "open a.py\n"},
                    {"role": "user", "content": "[File: a.py (2 lines total)]\n1:x = 1"},
                    {"role": "assistant", "content": "Run it.\n```\npython a.py\n```",
                     "thought": "Run it.", "action": "python a.py\n"}],
        "trajectory": [
            {"thought": "Let's look.", "action": "open a.py\n", "response": "...",
             "observation": "[File: a.py (2 lines total)]\n1:x = 1", "state": "{}"},
            {"thought": "Run it.", "action": "python a.py\n", "response": "...",
             "observation": "Traceback (most recent call last):\nValueError: x", "state": "{}"},
        ],
        "info": {"exit_status": "submitted"},
    }


def _function_calling(*, trajectory: bool) -> dict[str, Any]:
    """A function-calling run; its trajectory has a final submit the history does not show."""
    def call(cid: str, name: str, args: str) -> dict[str, Any]:
        return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}

    doc: dict[str, Any] = {
        "history": [
            {**SYSTEM, "message_type": "system_prompt"}, {**TASK, "message_type": "observation"},
            {"role": "assistant", "content": "Find it.", "thought": "Find it.", "action": "find_file a.py",
             "message_type": "action", "tool_calls": [call("call_1", "find_file", '{"file_name":"a.py"}')]},
            {"role": "tool", "content": "Found 1 matches", "tool_call_ids": ["call_1"],
             "message_type": "observation"},
            {"role": "assistant", "content": "Run it.", "thought": "Run it.", "action": "python a.py",
             "message_type": "action", "tool_calls": [call("call_2", "bash", '{"command":"python a.py"}')]},
            {"role": "tool", "content": "8.2", "tool_call_ids": ["call_2"], "message_type": "observation"},
        ],
        "replay_config": {"agent": {"model": {"name": "gpt-4o"}}},
    }
    if trajectory:
        doc["trajectory"] = [
            {"thought": "Find it.", "action": "find_file a.py", "observation": "Found 1 matches"},
            {"thought": "Run it.", "action": "python a.py", "observation": "8.2"},
            {"thought": "Done.", "action": "submit", "observation": "diff --git a/a.py b/a.py"},
        ]
    return doc


def test_classic_steps_become_command_calls_answered_by_their_observations() -> None:
    events = parse(_b(_classic()), format="swe-agent", source="run.traj")
    assert [type(e) for e in events] == [RunStarted, PolicySet, InstructionSet, UserInput, ToolsRegistered,
                                         ModelResponse, ToolResult, ModelResponse, ToolResult]
    started, policy, demo, task, tools, first, seen, second, ran = events
    assert isinstance(started, RunStarted) and started.agent == "swe-agent" and started.model is None
    assert isinstance(policy, PolicySet) and policy.text == SYSTEM["content"]
    assert isinstance(demo, InstructionSet) and demo.text == DEMO["content"]
    assert demo.source_ref == "swe-agent://demonstration/1" and demo.origin == "external"
    assert isinstance(task, UserInput) and task.text == TASK["content"]
    assert first == ModelResponse(text="Let's look.", tool_calls=(
        ToolCall(call_id="swe-1", name="open", arguments='{"command":"open a.py\\n"}'),))
    assert isinstance(seen, ToolResult) and seen.call_id == "swe-1" and seen.origin == "workspace"
    assert seen.content == "[File: a.py (2 lines total)]\n1:x = 1"
    assert isinstance(second, ModelResponse) and second.tool_calls[0].name == "bash"  # a shell command
    assert isinstance(ran, ToolResult) and ran.call_id == "swe-2" and ran.origin == "external"
    # no exit status in a .traj: a traceback in the text does not make it an error result
    assert not ran.is_error and ran.exit_code is None
    # the commands the steps call are tools from the start, taking the 'command' they are given
    assert isinstance(tools, ToolsRegistered) and [t.name for t in tools.tools] == ["open", "bash"]
    assert all(t.parameters["required"] == ["command"] for t in tools.tools)
    assert tools.tools[1].description.startswith("Run a shell command.")


def test_a_classic_run_registers_its_commands_as_the_system_prompt_documents_them() -> None:
    prompt = ("COMMANDS:\nopen:\n  docstring: opens the file at the given path\n"
              "  signature: open <path> [<line_number>]\n  arguments:\n    - path (string)\n\n"
              "edit:\n  docstring: replaces lines\n  signature: edit <start_line>:<end_line>\n"
              "<replacement_text>\nend_of_edit\n")
    assert command_docs(prompt) == {
        "open": "opens the file at the given path Usage: open <path> [<line_number>]",
        "edit": "replaces lines Usage: edit <start_line>:<end_line>"}
    doc = _classic()
    doc["history"][0] = {**SYSTEM, "content": prompt}
    events = parse(_b(doc), format="swe-agent")
    tools = next(e for e in events if isinstance(e, ToolsRegistered))
    assert events.index(tools) < min(i for i, e in enumerate(events) if isinstance(e, ModelResponse))
    assert {t.name: t.description for t in tools.tools}["open"] == command_docs(prompt)["open"]
    # a name longer than a tool name may be is not taken for a command: its steps are shell ones
    long = "x" * 129
    prompt = f"COMMANDS:\n{long}:\n  docstring: d\n  signature: {long} <a>\n"
    doc["history"][0] = {**SYSTEM, "content": prompt}
    doc["trajectory"][0]["action"] = doc["history"][3]["action"] = f"{long} a.py\n"
    events = parse(_b(doc), format="swe-agent")
    tools = next(e for e in events if isinstance(e, ToolsRegistered))
    assert [t.name for t in tools.tools] == ["bash"]
    # a function-calling run's tools take arguments of their own: none is registered
    fc = parse(_b(_function_calling(trajectory=True)), format="swe-agent")
    assert not any(isinstance(e, ToolsRegistered) for e in fc)


def test_function_calling_keeps_logged_calls_and_adds_the_steps_the_history_lacks() -> None:
    events = parse(_b(_function_calling(trajectory=True)), format="swe-agent")
    started = events[0]
    assert isinstance(started, RunStarted) and started.model == "gpt-4o"
    calls = [c for e in events if isinstance(e, ModelResponse) for c in e.tool_calls]
    assert calls == [ToolCall(call_id="call_1", name="find_file", arguments='{"file_name":"a.py"}'),
                     ToolCall(call_id="call_2", name="bash", arguments='{"command":"python a.py"}'),
                     ToolCall(call_id="swe-3", name="submit", arguments='{"command":"submit"}')]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [(r.call_id, r.content, r.origin) for r in results] == [
        ("call_1", "Found 1 matches", "workspace"), ("call_2", "8.2", "external"),
        ("swe-3", "diff --git a/a.py b/a.py", "external")]


def test_the_model_is_read_from_a_replay_config_object_or_json_text() -> None:
    doc = _function_calling(trajectory=True)
    doc["replay_config"] = json.dumps(doc["replay_config"])
    started = parse(_b(doc), format="swe-agent")[0]
    assert isinstance(started, RunStarted) and started.model == "gpt-4o"
    doc["replay_config"] = "{not json"
    started = parse(_b(doc), format="swe-agent")[0]
    assert isinstance(started, RunStarted) and started.model is None


def test_without_a_trajectory_the_history_is_read() -> None:
    fc = parse(_b(_function_calling(trajectory=False)), format="swe-agent")
    assert [e.call_id for e in fc if isinstance(e, ToolResult)] == ["call_1", "call_2"]
    responses = [e for e in fc if isinstance(e, ModelResponse)]
    assert [r.text for r in responses] == ["Find it.", "Run it."]
    classic = _classic()
    del classic["trajectory"]
    events = parse(_b(classic), format="swe-agent")
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [(r.call_id, r.content) for r in results] == [("swe-1", "[File: a.py (2 lines total)]\n1:x = 1")]
    last = events[-1]  # the last action has no observation in the history: its call stays open
    assert isinstance(last, ModelResponse) and last.tool_calls[0].call_id == "swe-2"
    assert [e.text for e in events if isinstance(e, ModelResponse)] == ["Let's look.", "Run it."]


def test_a_result_is_the_observation_as_the_model_was_shown_it() -> None:
    """SWE-agent's template adds state to the command's output (open file, directory); the last
    step, which the history does not show, keeps the trajectory's raw observation."""
    doc = _classic()
    doc["history"][4]["content"] = "[File: a.py (2 lines total)]\n1:x = 1\n(Open file: a.py)\nbash-$"
    seen, ran = (e for e in parse(_b(doc), format="swe-agent") if isinstance(e, ToolResult))
    assert seen.content == "[File: a.py (2 lines total)]\n1:x = 1\n(Open file: a.py)\nbash-$"
    assert ran.content == "Traceback (most recent call last):\nValueError: x"


def test_a_step_the_history_shows_differently_gets_a_command_call() -> None:
    """A re-queried step: the history's reply at that place has another action."""
    doc = _function_calling(trajectory=True)
    doc["trajectory"][1]["action"] = "python3 a.py"
    calls = [c for e in parse(_b(doc), format="swe-agent") if isinstance(e, ModelResponse)
             for c in e.tool_calls]
    assert [c.call_id for c in calls] == ["call_1", "swe-2", "swe-3"]
    assert calls[1].name == "bash"


def test_a_step_the_history_lacks_does_not_shift_the_later_steps_off_their_replies() -> None:
    """A failed step SWE-agent re-queried: the trajectory has it, the history does not."""
    doc = _function_calling(trajectory=True)
    failed = {"thought": "Try.", "action": "python a.py --bad", "observation": "usage: ..."}
    doc["trajectory"].insert(1, failed)
    calls = [c.call_id for e in parse(_b(doc), format="swe-agent") if isinstance(e, ModelResponse)
             for c in e.tool_calls]
    assert calls == ["call_1", "swe-2", "call_2", "swe-4"]


@pytest.mark.parametrize(("action", "name"), [
    ("open a.py", "open"), ("edit 2:2\nx\nend_of_edit", "edit"), ("submit", "submit"),
    ("connect_start server 31337", "connect_start"), ("python a.py", "bash"), ("./run.sh --fast", "bash"),
    ("", "bash"), ("  \n", "bash"), ("cd src && open a.py", "bash"), ("my_tool --x", "my_tool")])
def test_a_command_is_its_swe_agent_tool_or_bash(action: str, name: str) -> None:
    """One ``bash`` tool for every shell command: a tool per command word would declare (and
    cost every request) a schema for ``ls``, ``cat``, ``grep``..."""
    assert command_name(action, documented_tools("COMMANDS:\nmy_tool:\n  signature: my_tool <x>\n")) == name


def test_a_classic_run_declares_its_tools_and_one_shell() -> None:
    doc = _classic()
    doc["history"][0]["content"] = "COMMANDS:\nopen:\n  signature: open <path> [<line_number>]\n"
    doc["trajectory"].append({"thought": "Again.", "action": "python3 a.py", "observation": "1"})
    names = [c.name for e in parse(_b(doc), format="swe-agent") if isinstance(e, ModelResponse)
             for c in e.tool_calls]
    assert names == ["open", "bash", "bash"]


def test_detection_tells_a_traj_from_an_openhands_history() -> None:
    assert detect_format(_b(_classic())) == "swe-agent"
    assert detect_format(_b(_function_calling(trajectory=False))) == "swe-agent"
    openhands = {"history": [{"id": 1, "source": "user", "action": "message", "args": {"content": "hi"}}]}
    assert detect_format(_b(openhands)) == "openhands"


@pytest.mark.parametrize(("mutate", "match", "line_of"), [
    (lambda d: d.pop("history"), "missing field 'history'", None),
    (lambda d: d["trajectory"][1].pop("action"), "missing field 'action'", '"Run it."'),
    (lambda d: d["trajectory"][0].update(observation=3), "'observation' to be a string", '"observation": 3'),
    (lambda d: d["history"][0].update(role="critic"), "unknown role 'critic'", '"critic"'),
    (lambda d: d["history"][2].update(content=[{"type": "video", "url": "x"}]),
     "unsupported content part type 'video'", '"video"'),
    (lambda d: d["history"][0].update(content=[{"type": "image_url", "image_url": {"url": "x"}}]),
     "only text parts are allowed here", '"image_url"'),
    (lambda d: d.update(trajectory={"0": {}}), "'trajectory' to be an array", None),
])
def test_bad_input_is_a_located_typed_error(mutate: Any, match: str, line_of: str | None) -> None:
    doc = _classic()
    mutate(doc)
    data = _b(doc)
    with pytest.raises(ImportFormatError, match=match) as err:
        parse(data, format="swe-agent", source="run.traj")
    if line_of is not None:  # the error names the offending record's line (it opens above the text)
        line = int(err.value.location.rsplit(":", 1)[1])
        hit = max(i for i, text in enumerate(data.decode().splitlines(), 1) if line_of in text)
        assert hit - 6 <= line <= hit


PNG = "data:image/png;base64,iVBORw0KGgo="


def test_images_of_a_multimodal_task_and_of_observations_are_kept() -> None:
    """SWE-bench multimodal: the issue shows screenshots, and a browser tool returns one."""
    def shot(text: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": PNG}}]

    doc = _classic()
    doc["history"][2]["content"] = shot("The button is misaligned:")
    doc["history"][4]["content"] = shot("[File: a.py (2 lines total)]")
    events = parse(_b(doc), format="swe-agent")
    task = events[3]
    assert isinstance(task, UserInput) and task.text == "The button is misaligned:"
    assert [type(b) for b in task.content] == [TextBlock, ImageBlock]
    first, second = (e for e in events if isinstance(e, ToolResult))
    assert [b.url for b in first.blocks if isinstance(b, ImageBlock)] == [PNG]
    assert first.content == "[File: a.py (2 lines total)]" and second.blocks == ()
    fc = _function_calling(trajectory=False)
    fc["history"][3]["content"] = shot("Found 1 matches")
    result = next(e for e in parse(_b(fc), format="swe-agent") if isinstance(e, ToolResult))
    assert result.content == "Found 1 matches" and len(result.blocks) == 1


def test_a_results_pairing_is_checked_while_parsing() -> None:
    doc = _function_calling(trajectory=False)
    doc["history"][3]["tool_call_ids"] = ["call_9"]
    with pytest.raises(ImportFormatError, match="tool call pairing"):
        parse(_b(doc), format="swe-agent")
    doc["history"][3]["tool_call_ids"] = ["call_1", "call_2"]
    with pytest.raises(ImportFormatError, match="one 'tool_call_ids' entry"):
        parse(_b(doc), format="swe-agent")


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses", "anthropic", "gemini"])
def test_a_demonstration_is_a_third_partys_example_shown_as_external_instructions(provider: str) -> None:
    """DESIGN 2/8 and the seed's examples budget: a demonstration is a few-shot example, an
    instruction (the policy layer, the stable prefix: the same at every step), but a third
    party's, recorded on another repository (its issue text, files and command output): it was
    shown ``trust="workspace"``, the trust of the project's own instructions (an AGENTS.md).
    It is ``external`` now, a data block like any, and the project's instructions stay
    ``workspace`` (their JSON unchanged: the field is left out)."""
    events = parse(_b(_classic()), format="swe-agent", source="run.traj")
    demo = next(e for e in events if isinstance(e, InstructionSet))
    agents_md = InstructionSet(text="Run pytest before you submit.", source_ref="AGENTS.md")
    assert canonical_json(agents_md) == (b'{"source_ref":"AGENTS.md","text":"Run pytest before you submit.",'
                                         b'"type":"instruction_set","v":1}')
    assert b'"origin":"external"' in canonical_json(demo)
    log = Log().add(*events, agents_md)
    state = fold(log.records)
    result = build_context(state, BuildConfig(provider=provider, window=20_000, reserve=1_000),
                           render=lambda conv, p, m: render(conv, p, max_tokens=m))
    shown = {f.source_ref: f for f in result.manifest.fragments}
    example, project = shown["swe-agent://demonstration/1"], shown["AGENTS.md"]
    assert (example.kind, example.trust, example.layer) == ("instruction", "external", project.layer)
    assert (project.kind, project.trust) == ("instruction", "workspace")
    tags = re.findall(r"<data ([^>]*)>", joined_strings(result.request))
    assert 'source="swe-agent://demonstration/1" trust="external" kind="instructions"' in tags, tags
    assert 'source="AGENTS.md" trust="workspace" kind="instructions"' in tags, tags

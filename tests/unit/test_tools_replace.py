"""``ToolsRegistered(replace=True)``: a registration that is the whole toolkit, dropping the others.

Why: ``ToolsRegistered`` only added. After a hand-off to an agent with other tools (or an MCP
server disconnecting) every request still declared the tools the runtime could no longer run,
and the model called them. A dropped tool is never exposed again (until registered anew); its
past calls stay paired and in view, shown as the runtime's note of them (``not_offered``), as a
denied tool's are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import contextfold
from contextfold import ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.domain.events import HandOff, ToolSpec, ToolsRegistered, canonical_json, event_from_json
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.tool_reasons import not_exposed_reason

PROVIDERS = ("anthropic", "gemini", "neutral", "openai-chat", "openai-responses")
DEPLOY = ToolSpec(name="deploy", description="deploy the service")
BASH = ToolSpec(name="bash", description="run a shell command")
TOOLKIT_B = (ToolSpec(name="read_file", description="read a docs file"),
             ToolSpec(name="write_file", description="write a docs file"))


def _declared(request: dict[str, object], provider: str) -> list[str]:
    tools = request.get("tools", [])
    assert isinstance(tools, list)
    if provider == "gemini":
        return sorted(d["name"] for t in tools for d in t["functionDeclarations"])
    if provider == "openai-chat":
        return sorted(t["function"]["name"] for t in tools)
    return sorted(t["name"] for t in tools)


def _handed_off(run: contextfold.Run) -> None:
    run.append(PolicySet(text="Be careful."), ToolsRegistered(tools=(DEPLOY, BASH)),
               UserInput("deploy the service, then update the docs"),
               ModelResponse(tool_calls=(ToolCall(call_id="c1", name="deploy", arguments="{}"),)),
               ToolResult(call_id="c1", content="deployed dep-42"),
               HandOff(from_agent="ops", to_agent="docs-writer", note="Update the docs for dep-42"),
               ToolsRegistered(tools=(*TOOLKIT_B, BASH), replace=True))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_replacing_registration_drops_the_other_tools_and_keeps_their_calls_in_view(
        tmp_path: Path, provider: str) -> None:
    with contextfold.open_store(f"sqlite:///{tmp_path}/r.db") as store:
        run = store.run("r")
        _handed_off(run)
        built = run.build(provider=provider, window=50_000)  # validated with the SDK types
        body = json.dumps(built.request)
        if provider != "neutral":
            assert _declared(built.request, provider) == ["bash", "read_file", "write_file"]
        assert [t.name for t in built.manifest.tools] == ["bash", "read_file", "write_file"]
        assert "dep-42" in body and "deployed dep-42" in body  # the call and its result still shown
        if provider != "neutral":
            assert "TOOL_NOT_OFFERED" in body  # as the runtime's note: no call to an undeclared tool
        assert not any(r.startswith("declared_unregistered_tool") for r in built.manifest.repairs)
        assert run.replay(built.manifest.turn).ok
        state = run.state()
        assert "deploy" not in state.tools and "bash" in state.tools
        reason = not_exposed_reason(state, BuildConfig(provider=provider), "deploy", ("bash",))
        assert reason is not None and "replace=True" in reason and "runtime notes" in reason
        # registered at position 2: not "called by the history but never registered"
        assert reason.startswith("tool 'deploy' (registered, then dropped) is no longer exposed"), reason


def test_a_dropped_tool_registered_again_is_offered_again(tmp_path: Path) -> None:
    with contextfold.open_store(f"sqlite:///{tmp_path}/r.db") as store:
        run = store.run("r")
        _handed_off(run)
        run.append(ToolsRegistered(tools=(DEPLOY,)))
        built = run.build(provider="anthropic", window=50_000)
        assert _declared(built.request, "anthropic") == ["bash", "deploy", "read_file", "write_file"]
        assert "TOOL_NOT_OFFERED" not in json.dumps(built.request)  # the deploy call is a call again


def test_replace_is_left_out_of_the_json_when_false_so_old_logs_read_and_hash_alike() -> None:
    old = (b'{"tools":[{"description":"deploy the service","name":"deploy","parameters":{"properties":{},'
           b'"type":"object"},"tags":[]}],"type":"tools_registered","v":1}')  # as a release before wrote it
    event = event_from_json(json.loads(old))
    assert isinstance(event, ToolsRegistered) and event.replace is False
    assert canonical_json(event) == old == canonical_json(ToolsRegistered(tools=(DEPLOY,)))
    replacing = ToolsRegistered(tools=(DEPLOY,), replace=True)
    assert json.loads(canonical_json(replacing))["replace"] is True
    assert event_from_json(json.loads(canonical_json(replacing))) == replacing

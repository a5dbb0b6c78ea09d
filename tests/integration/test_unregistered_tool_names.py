"""A tool the model called under a name no runtime registered, and that an API refuses, keeps
the run buildable for every provider (``projections/tool_names.py``).

Why: gpt-4o sometimes calls ``multi_tool_use.parallel``; a model may emit a name with a space or
thousands of characters long. The runtime logs the call and answers it with an error. Before,
every later request for OpenAI and Anthropic was refused by the request check (the name in the
history), and a name over 128 characters failed every build with an untyped ValidationError.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold.api import open_store
from contextfold.cli_why import explain
from contextfold.domain.events import (
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.projections.tool_names import tool_name_alias

PROVIDERS = ("openai-chat", "openai-responses", "anthropic", "gemini", "neutral")


def _called(name: str) -> list[Any]:
    return [UserInput("look it up"),
            ModelResponse(tool_calls=(ToolCall(call_id="c1", name=name, arguments='{"q": "x"}'),)),
            ToolResult(call_id="c1", content=f"error: no tool named {name[:20]}", is_error=True),
            UserInput("try again")]


@pytest.mark.parametrize("name", ["multi_tool_use.parallel", "search the web", "x" * 5_000])
def test_a_made_up_name_is_shown_under_its_alias_where_the_provider_refuses_it(store_url: str,
                                                                              name: str) -> None:
    alias = tool_name_alias(name)
    with open_store(store_url) as store:
        run = store.run("made-up")
        run.append(*_called(name))
        for provider in PROVIDERS:
            built = run.build(provider, window=16_000, reserve=1_000)  # the SDK types checked it
            body = json.dumps(built.request)
            refused = provider != "neutral" or len(name) > 128
            refused = refused and not (provider == "gemini" and name == "multi_tool_use.parallel")
            shown = alias if refused else name
            assert json.dumps(shown) in body, provider  # declared, called and answered under it
            if refused:
                assert json.dumps(name) not in body, provider
                [note] = [r for r in built.manifest.repairs if r.startswith("renamed_unregistered_tool:")]
                assert note.endswith(f"->{alias}") and len(note) < 200, provider
                [found] = explain(built.manifest, name)  # `why RUN NAME`: asked by the logged name
                assert found["id"] == alias and "a name the API refuses" in found["reason"], provider
            else:
                assert f"declared_unregistered_tool:{name}" in built.manifest.repairs, provider
            assert [t.name for t in built.manifest.tools] == [shown], provider
            assert run.replay(turn=built.manifest.turn).ok


def test_a_name_the_policy_denies_is_never_declared_and_a_registered_one_is_never_renamed(
        store_url: str) -> None:
    with open_store(store_url) as store:
        denied = store.run("denied")
        denied.append(PolicySet(text="no", denied_tools=("functions.search", "shell")),
                      *_called("functions.search"))
        denied.append(ModelResponse(tool_calls=(ToolCall(call_id="c2", name="x" * 500),)),
                      ToolResult(call_id="c2", content="no such tool", is_error=True), UserInput("well?"))
        denied.append(ModelResponse(tool_calls=(ToolCall(call_id="c3", name="shell"),)),  # a name APIs take
                      ToolResult(call_id="c3", content="denied", is_error=True), UserInput("and?"))
        denied.append(PolicySet(text="only these", allowed_tools=("read",)))
        for provider in ("openai-chat", "anthropic", "neutral"):
            built = denied.build(provider)  # no made-up name may be shown, under any name
            assert built.manifest.tools == () and "tool_call" not in json.dumps(built.request), provider
            # nor said to be: a note that "shell" was declared named a tool the request did not hold
            assert built.manifest.repairs == (), provider
            # each denied group is the runtime's note of it, under the name as logged
            assert built.manifest.excluded["stale"] == 0, provider
            shown = json.dumps(built.request)
            assert shown.count("TOOL_NOT_OFFERED: this request does not offer the tools") == 3, provider
            for call, name in (("c1", "functions.search"), ("c2", "x" * 500), ("c3", "shell")):
                assert f"call {call}: {name} " in shown, provider
        registered = store.run("registered")
        registered.append(ToolsRegistered(tools=(ToolSpec(name="github.create_issue"),)),
                          *_called("github.create_issue"))
        # a registered name is never renamed: where the provider refuses it, it is not offered
        built = registered.build("openai-chat")
        assert built.manifest.tools == ()
        assert "renamed_unregistered_tool" not in " ".join(built.manifest.repairs)
        assert any(r.startswith("tool_not_offered:github.create_issue") for r in built.manifest.repairs)
        assert registered.build("gemini").manifest.tools[0].name == "github.create_issue"


def test_a_renamed_tool_the_policy_allows_or_pins_is_exposed_under_its_alias(store_url: str) -> None:
    """An allow-list (or pin) naming ``multi_tool_use.parallel`` let its calls be logged but not the
    alias that declares them: the exposure judged the alias, so the history's call and result were
    excluded as "uses tools the policy does not expose", while a repair said it was renamed."""
    name = "multi_tool_use.parallel"
    alias = tool_name_alias(name)
    with open_store(store_url) as store:
        for policy in (PolicySet(text="p", allowed_tools=(name, "ls")),
                       PolicySet(text="p", allowed_tools=(name, "ls"), pinned_tools=(name,)),
                       PolicySet(text="p")):
            run = store.run(f"allowed-{len(policy.allowed_tools or ())}-{len(policy.pinned_tools)}")
            run.append(policy, ToolsRegistered(tools=(ToolSpec(name="ls", description="list files"),)),
                       *_called(name))
            built = run.build("openai-chat", window=16_000, reserve=1_000)
            # ls: the whole permitted toolkit is declared (it fits max_tools)
            assert [t.name for t in built.manifest.tools] == ["ls", alias], policy
            assert not [e for e in built.manifest.excluded_items if e.reason == "stale"], policy
            assert json.dumps(alias) in json.dumps(built.request["messages"]), policy


def test_no_repair_names_a_tool_declared_for_calls_the_request_left_out(store_url: str) -> None:
    """A made-up tool whose only call was left out (its arguments too big for the window) is not
    declared, yet the repairs said it was declared, or renamed, for every build."""
    name = "multi_tool_use.parallel"
    with open_store(store_url) as store:
        run = store.run("dropped")
        run.append(ToolsRegistered(tools=(ToolSpec(name="a", description="alpha"),)), UserInput("alpha"),
                   ModelResponse(tool_calls=(ToolCall(call_id="c2", name=name,
                                                      arguments=json.dumps({"x": "y " * 5000})),)),
                   ToolResult(call_id="c2", content="P"))
        for i in range(3):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"a{i}", name="a"),)),
                       ToolResult(call_id=f"a{i}", content="A " * 300))
        run.append(UserInput("go on"))
        for provider in ("gemini", "openai-chat"):
            small = run.preview(provider, window=1_500, reserve=300)
            assert [t.name for t in small.manifest.tools] == ["a"], provider
            assert not [r for r in small.manifest.repairs if "unregistered_tool" in r], provider
            large = run.preview(provider, window=32_000, reserve=1_000)  # its call kept: declared, said so
            assert [r for r in large.manifest.repairs if "unregistered_tool" in r], provider

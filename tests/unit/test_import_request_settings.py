"""A recorded request's settings that bounded the model's tool use are named by its import.

Why: a trace's request body may force a tool (``tool_choice`` naming one), forbid calls, require
one, or allow one call at a time. The log has no place for those settings, and a build sends
none, so a rebuilt request of an imported run offered the tools freely: a call the model was
forced to make read, to an auditor, as its own choice. The import dropped them without a word;
it now says which it leaves out. The bodies are typed with the providers' SDK request types.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import ToolChoiceToolParam, message_create_params
from google.genai import types as genai
from openai.types.chat import ChatCompletionNamedToolChoiceParam, completion_create_params
from openai.types.responses import ToolChoiceFunctionParam, response_create_params

from contextfold.domain.events import canonical_json
from contextfold.domain.log import GENESIS_HASH, RecordedEvent, chain_hash
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import runs_and_artifacts, runs_artifacts_and_notes
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.render import render
from tests.cli_runner import cf

STAT: dict[str, object] = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
ASK = "stat setup.py"


def _chat(**settings: Any) -> completion_create_params.CompletionCreateParamsNonStreaming:
    body: completion_create_params.CompletionCreateParamsNonStreaming = {
        "model": "gpt-4o", "messages": [{"role": "user", "content": ASK}],
        "tools": [{"type": "function", "function": {"name": "stat", "parameters": STAT}}]}
    return {**body, **settings}  # type: ignore[typeddict-item]


FORCED_CHAT: ChatCompletionNamedToolChoiceParam = {"type": "function", "function": {"name": "stat"}}
FORCED_RESPONSES: ToolChoiceFunctionParam = {"type": "function", "name": "stat"}
FORCED_ANTHROPIC: ToolChoiceToolParam = {"type": "tool", "name": "stat", "disable_parallel_tool_use": True}


def _responses(**settings: Any) -> response_create_params.ResponseCreateParamsNonStreaming:
    body: response_create_params.ResponseCreateParamsNonStreaming = {
        "model": "gpt-4o", "input": [{"role": "user", "content": ASK}],
        "tools": [{"type": "function", "name": "stat", "parameters": STAT, "strict": False}]}
    return {**body, **settings}  # type: ignore[typeddict-item]


def _anthropic(**settings: Any) -> message_create_params.MessageCreateParamsNonStreaming:
    body: message_create_params.MessageCreateParamsNonStreaming = {
        "model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [{"role": "user", "content": ASK}],
        "tools": [{"name": "stat", "input_schema": STAT}]}
    return {**body, **settings}  # type: ignore[typeddict-item]


def _gemini(config: genai.ToolConfig | None) -> dict[str, Any]:
    request = genai.GenerateContentConfig(
        tools=[genai.Tool(function_declarations=[genai.FunctionDeclaration(
            name="stat", parameters_json_schema=STAT)])], tool_config=config)
    body = request.model_dump(mode="json", by_alias=True, exclude_none=True)
    ask = genai.Content(role="user", parts=[genai.Part(text=ASK)])
    contents = [ask.model_dump(mode="json", by_alias=True, exclude_none=True)]
    return {"model": "gemini-2.5-pro", "contents": contents, **body}


FORCED_GEMINI = genai.ToolConfig(function_calling_config=genai.FunctionCallingConfig(
    mode=genai.FunctionCallingConfigMode.ANY, allowed_function_names=["stat"]))

# (format, a body that bounded the model's tool use, what its note names, the same body left at the default)
CASES = [
    ("openai-chat", _chat(tool_choice=FORCED_CHAT, parallel_tool_calls=False),
     ('tool_choice={"function":{"name":"stat"},"type":"function"}', "parallel_tool_calls=false"),
     _chat(tool_choice="auto", parallel_tool_calls=True)),
    ("openai-chat", _chat(tool_choice="none"), ('tool_choice="none"',), _chat()),
    ("openai-responses", _responses(tool_choice=FORCED_RESPONSES, parallel_tool_calls=False),
     ('tool_choice={"name":"stat","type":"function"}', "parallel_tool_calls=false"),
     _responses(tool_choice="auto")),
    ("anthropic", _anthropic(tool_choice=FORCED_ANTHROPIC),
     ('tool_choice={"disable_parallel_tool_use":true,"name":"stat","type":"tool"}',),
     _anthropic(tool_choice={"type": "auto"})),
    ("gemini", _gemini(FORCED_GEMINI), ("toolConfig=", '"allowedFunctionNames":["stat"]', '"mode":"ANY"'),
     _gemini(None)),
]


def _built(format: str, body: dict[str, Any], provider: str) -> dict[str, Any]:
    runs, _ = runs_and_artifacts(json.dumps(body).encode(), format=format, source="trace.json")
    records, prev = [], GENESIS_HASH
    for pos, event in enumerate(runs[0][1], start=1):
        prev = chain_hash("r", pos, prev, canonical_json(event))
        records.append(RecordedEvent("r", pos, event, prev))
    result = build_context(fold(records), BuildConfig(provider=provider, window=200_000, reserve=4_000),
                           render=lambda c, p, m: render(c, p, max_tokens=m, validate=True))
    assert isinstance(result.request, dict)
    return result.request


@pytest.mark.parametrize(("format", "body", "named", "default"), CASES)
def test_the_import_names_the_settings_it_leaves_out(format: str, body: dict[str, Any],
                                                     named: tuple[str, ...], default: dict[str, Any]) -> None:
    runs, _, notes = runs_artifacts_and_notes(json.dumps(body).encode(), format=format, source="trace.json")
    assert len(runs) == 1
    assert len(notes) == 1 and "trace.json" in notes[0], notes
    assert all(n in notes[0] for n in named), notes[0]
    # what the note warns of: the rebuilt request offers the tool with no such setting
    request = _built(format, body, format)
    assert not {"tool_choice", "parallel_tool_calls", "toolConfig", "tool_config"} & request.keys()
    # the API's defaults bound nothing: no note
    assert runs_artifacts_and_notes(json.dumps(default).encode(), format=format, source="t.json")[2] == []


def test_the_cli_import_prints_the_note(tmp_path: Path) -> None:
    (tmp_path / "trace.json").write_text(json.dumps(_chat(tool_choice=FORCED_CHAT)))
    out = cf("import", "trace.json", "--run", "r", "--format", "openai-chat", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "tool_choice=" in out.stdout + out.stderr and "leaves them out" in out.stdout + out.stderr


def test_a_multi_run_file_counts_the_requests_that_set_them(tmp_path: Path) -> None:
    records = [{"task_id": i, "messages": [{"role": "user", "content": ASK}],
                **({"parallel_tool_calls": False} if i else {})} for i in range(3)]
    data = json.dumps(records).encode()
    _, _, notes = runs_artifacts_and_notes(data, format="openai-chat", source="tau.json")
    assert notes and "2 request(s) of tau.json set parallel_tool_calls=false" in notes[0], notes

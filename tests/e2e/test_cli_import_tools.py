"""``contextfold import`` of a request body keeps its tools, and says which a provider refuses.

Why: the import of a body read its history only; the next ``build`` declared the tools the
history called with an empty schema (and the manifest's ``declared_unregistered_tool``) and
dropped the others. Registered now, a body's tools also meet the import's notes on names and
schemas an API refuses, which named only logs that registered tools themselves before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.cli import main

FLIGHT = {"type": "object", "properties": {"to": {"type": "string"}}}
WEATHER = {"type": "object", "properties": {"city": {"type": "string"},
                                            "unit": {"type": "string", "enum": ["c", "f"]}},
           "required": ["city", "unit"]}


def cf(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--store", f"sqlite:///{tmp_path / 'cf.db'}", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_an_imported_chat_body_builds_with_its_tools(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    body = {"model": "gpt-4o", "tools": [
        {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                                          "parameters": WEATHER}},
        {"type": "function", "function": {"name": "book_flight", "description": "Book a flight",
                                          "parameters": FLIGHT}}],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "12C"},
            {"role": "user", "content": "And in Rome? Then book me a flight there."}]}
    source = tmp_path / "body.json"
    source.write_text(json.dumps(body))
    code, out, err = cf(tmp_path, capsys, "import", str(source), "--run", "r", "--format", "openai-chat")
    assert code == 0, err
    assert "imported 6 events" in out and "note:" not in out
    for provider in ("openai-chat", "anthropic"):
        code, out, err = cf(tmp_path, capsys, "build", "r", "--provider", provider, "--json")
        assert code == 0, err
        built = json.loads(out)
        tools = [t.get("function", t) for t in built["request"]["tools"]]
        schemas = {t["name"]: t.get("parameters", t.get("input_schema")) for t in tools}
        assert set(schemas) == {"get_weather", "book_flight"}
        assert schemas["get_weather"]["required"] == ["city", "unit"]
        assert built["manifest"]["repairs"] == []


def test_a_gemini_bodys_dotted_tool_name_is_named_at_import(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Gemini takes ``github.create_issue``; OpenAI and Anthropic refuse it. Registered from the
    body, the name is the run's (a build for them fails on it, as for any registered tool), so
    the import says so before the first build does."""
    body = {"tools": [{"functionDeclarations": [{"name": "github.create_issue", "description": "File it",
                                                  "parametersJsonSchema": {"type": "object", "properties": {
                                                      "title": {"type": "string"}}}}]}],
            "contents": [{"role": "user", "parts": [{"text": "File the bug."}]}]}
    source = tmp_path / "body.json"
    source.write_text(json.dumps(body))
    code, out, err = cf(tmp_path, capsys, "import", str(source), "--run", "g")
    assert code == 0, err
    [note] = [line for line in out.splitlines() if line.startswith("note:")]
    assert note.startswith("note: tool name(s) 'github.create_issue' are refused by openai-chat")
    assert "gemini" not in note
    assert cf(tmp_path, capsys, "build", "g", "--provider", "gemini")[0] == 0
    code, out, _ = cf(tmp_path, capsys, "build", "g", "--provider", "anthropic", "--json")
    assert code == 0 and "tool_not_offered:github.create_issue" in out  # as announced: not offered

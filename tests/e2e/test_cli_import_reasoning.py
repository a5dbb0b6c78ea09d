"""``contextfold import`` of a trace holding reasoning its provider never takes back records the run
without that piece and says so, instead of failing the whole import.

Why: a logger that keeps Anthropic's ``thinking`` text but drops its ``signature`` (or a Gemini
signature mangled to something not base64) made the append refuse the response, and so every run of
the file; the piece could never be sent back anyway (``reasoning.reasoning_refusals``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.cli import main
from contextfold.domain.events import AnthropicReasoning, ModelResponse
from contextfold.store.event_store import EventStore

SIGNED = {"type": "thinking", "thinking": "first, read a", "signature": "c2lnbmVk"}
UNSIGNED = {"type": "thinking", "thinking": "then run the tests"}
BODY = {
    "model": "claude-sonnet-4-5",
    "messages": [
        {"role": "user", "content": "Check both."},
        {"role": "assistant", "content": [
            SIGNED,
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
            UNSIGNED,
            {"type": "tool_use", "id": "toolu_2", "name": "run", "input": {"cmd": "pytest"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "1 failed", "is_error": True}]},
        {"role": "assistant", "content": [UNSIGNED, {"type": "text", "text": "It fails."}]},
        {"role": "user", "content": "Fix it."}]}


def test_unsigned_thinking_is_left_out_and_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "body.json"
    source.write_text(json.dumps(BODY))
    url = f"sqlite:///{tmp_path / 'cf.db'}"
    code = main(["--store", url, "import", str(source), "--run", "r", "--format", "anthropic"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "left out 2 reasoning piece(s)" in out.out and "signature" in out.out, out.out
    with EventStore(url) as store:
        responses = [r.event for r in store.read("r") if isinstance(r.event, ModelResponse)]
    first, second = responses
    assert isinstance(first.reasoning, AnthropicReasoning)
    assert [item.raw for item in first.reasoning.items] == [SIGNED]  # the signed block kept, in place
    assert [c.call_id for c in first.tool_calls] == ["toolu_1", "toolu_2"]
    assert second.reasoning is None and second.text == "It fails."
    code = main(["--store", url, "build", "r", "--provider", "anthropic", "--json"])
    built = json.loads(capsys.readouterr().out)
    assert code == 0
    blocks = [b for m in built["request"]["messages"] if m["role"] == "assistant" for b in m["content"]]
    assert SIGNED in blocks and not any(b.get("type") == "thinking" and "signature" not in b for b in blocks)


def test_a_trace_with_nothing_refused_imports_without_a_note(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    signed = json.dumps({**UNSIGNED, "signature": "c2ln"})
    body = json.loads(json.dumps(BODY).replace(json.dumps(UNSIGNED), signed))
    source = tmp_path / "body.json"
    source.write_text(json.dumps(body))
    code = main(["--store", f"sqlite:///{tmp_path / 'cf.db'}", "import", str(source), "--run", "r",
                 "--format", "anthropic"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "note:" not in out.out

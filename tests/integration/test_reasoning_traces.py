"""Provider reasoning from real recorded traffic (``../shared/traces/pydantic-ai-cassettes``):
imported verbatim, and sent back where the recorded request (accepted by its provider) had it.

- Anthropic: a code-execution run of a thinking model; its assistant turns hold ``thinking``
  blocks (empty text, a signature) interleaved with the server tool calls.
- OpenAI Responses: a gpt-5 run whose history holds a ``reasoning`` item (``encrypted_content``)
  before the calls of its response.
- Gemini: a tool-search run whose function-call parts carry ``thoughtSignature``.

Every request is built with the official SDK request types checked (``render_request``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from contextfold.api import render_request
from contextfold.domain.events import (
    AnthropicReasoning,
    AnyEvent,
    GeminiReasoning,
    ModelResponse,
    OpenAIResponsesReasoning,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import parse
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold

TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES",
                             Path(__file__).resolve().parents[2].parent / "shared" / "traces"))
CASSETTES = TRACES / "pydantic-ai-cassettes" / "cassettes"

pytestmark = [
    pytest.mark.traces,
    pytest.mark.skipif(not CASSETTES.is_dir(), reason=f"cassettes folder {CASSETTES} is absent"),
]

ANTHROPIC = ("test_code_execution_files_vcr/"
             "test_anthropic_code_execution_files_cache_prefix_stable[automatic-sonnet-5].yaml")
OPENAI = "test_tool_search/test_openai_native_tool_search_with_deferred_capability_gpt_5_6_sol.yaml"
GEMINI = "test_tool_search/test_tool_search_eval[google].yaml"


def _bodies(name: str, marker: str) -> list[dict[str, Any]]:
    """The request bodies of a cassette sent to URIs holding ``marker``, in order."""
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load((CASSETTES / name).read_text(encoding="utf-8"))
    return [i["request"]["parsed_body"] for i in data["interactions"]
            if marker in i["request"]["uri"] and isinstance(i["request"].get("parsed_body"), dict)]


def _import(body: dict[str, Any], fmt: str) -> list[AnyEvent]:
    return parse(json.dumps(body).encode(), format=fmt, source="cassette")


def _build(events: list[AnyEvent], provider: str) -> BuildResult:
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    return build_context(state, BuildConfig(provider=provider, window=1_000_000, reserve=8_000),
                         render=render_request)


def _responses(events: list[AnyEvent]) -> list[ModelResponse]:
    return [e for e in events if isinstance(e, ModelResponse)]


def test_anthropic_thinking_is_imported_verbatim_and_sent_back_between_the_calls() -> None:
    body = next(b for b in reversed(_bodies(ANTHROPIC, "api.anthropic.com")) if len(b["messages"]) > 1)
    recorded = [m for m in body["messages"] if m["role"] == "assistant"]
    thinking = [b for m in recorded for b in m["content"] if b["type"] in ("thinking", "redacted_thinking")]
    assert len(thinking) >= 2 and all(b["signature"] for b in thinking)
    events = _import(body, "anthropic")
    kept = [r for r in _responses(events) if r.reasoning is not None]
    assert all(isinstance(r.reasoning, AnthropicReasoning) for r in kept)
    assert [i.raw for r in kept if isinstance(r.reasoning, AnthropicReasoning)
            for i in r.reasoning.items if i.raw["type"] in ("thinking", "redacted_thinking")] == thinking

    request = _build(events, "anthropic").request
    sent = [b for m in request["messages"] if m["role"] == "assistant" for b in m["content"]]
    # the recorded order of thinking and calls (server calls go back as server calls, verbatim)
    kinds = ("thinking", "redacted_thinking", "server_tool_use", "tool_use")
    order = [b.get("signature") or b.get("id") for m in recorded for b in m["content"] if b["type"] in kinds]
    assert [b.get("signature") or b.get("id") for b in sent if b["type"] in kinds] == order
    assert any(b["type"] == "server_tool_use" for b in sent)
    assert [b for b in sent if b["type"] == "thinking"] == thinking  # verbatim, not a byte edited
    first = next(m for m in request["messages"] if m["role"] == "assistant")
    assert first["content"][0]["type"] == "thinking"  # a thinking turn starts with its thinking


def test_anthropic_thinking_handed_off_to_another_provider_is_left_out_and_named() -> None:
    body = next(b for b in reversed(_bodies(ANTHROPIC, "api.anthropic.com")) if len(b["messages"]) > 1)
    events = _import(body, "anthropic")
    signatures = [b["signature"] for m in body["messages"] if m["role"] == "assistant"
                  for b in m["content"] if b["type"] == "thinking"]
    for provider in ("gemini", "openai-responses", "openai-chat"):
        built = _build(events, provider)
        text = json.dumps(built.request)
        assert not any(s in text for s in signatures)
        notes = [f.reasoning for f in built.manifest.fragments if f.reasoning is not None]
        assert notes and all(n.startswith("anthropic reasoning not sent") for n in notes)


def test_openai_reasoning_items_are_imported_verbatim_and_sent_back_before_their_calls() -> None:
    body = next(b for b in _bodies(OPENAI, "/v1/responses")
                if any(i.get("type") == "reasoning" for i in b["input"]))
    item = next(i for i in body["input"] if i.get("type") == "reasoning")
    assert item["encrypted_content"]
    events = _import(body, "openai-responses")
    owner = next(r for r in _responses(events) if r.reasoning is not None)
    assert isinstance(owner.reasoning, OpenAIResponsesReasoning)
    assert [i.raw for i in owner.reasoning.items] == [item]
    assert owner.tool_calls  # the response it opened: the calls that followed it

    sent = _build(events, "openai-responses").request["input"]
    at = next(n for n, i in enumerate(sent) if i.get("type") == "reasoning")
    assert sent[at] == item
    first_call = next(n for n, i in enumerate(sent) if i.get("type") == "function_call")
    assert at < first_call and sent[first_call]["call_id"] == owner.tool_calls[0].call_id
    assert sum(1 for i in sent if i.get("type") == "reasoning") == 1


def test_gemini_signatures_are_imported_verbatim_and_sent_back_on_their_call_parts() -> None:
    body = _bodies(GEMINI, ":generateContent")[-1]
    recorded = {p["functionCall"]["id"]: p["thoughtSignature"] for c in body["contents"]
                if c["role"] == "model" for p in c["parts"]
                if "functionCall" in p and "thoughtSignature" in p}
    assert len(recorded) >= 2
    events = _import(body, "gemini")
    assert all(isinstance(r.reasoning, GeminiReasoning) for r in _responses(events) if r.reasoning)

    sent = _build(events, "gemini").request["contents"]
    got = {p["functionCall"]["id"]: p.get("thoughtSignature") for c in sent if c["role"] == "model"
           for p in c["parts"] if "functionCall" in p}
    assert {cid: got[cid] for cid in recorded} == recorded

"""``contextfold.read_response`` takes the final object the official SDKs' stream helpers assemble.

A local HTTP server (``tests.local_http``: no provider is called) streams
server-sent events as the provider does: the ``openai`` client's
``chat.completions.stream(...).get_final_completion()`` and the ``anthropic`` client's
``messages.stream(...).get_final_message()`` assemble their final object from the chunks (the
arguments and the thinking signature arrive in pieces), and that object reads to the same
events, usage and stop reason as the same response returned whole (``tests/unit``' fixtures).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

import contextfold
from tests.local_http import Handler, local_server
from tests.unit.test_read_response import ANTHROPIC, CHAT


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        line = f"event: {name}\n" if name else ""
        out.append(f"{line}data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
    return "".join(out).encode()


def _chat_stream() -> bytes:
    """CHAT's response as Chat Completions streams it: the text, then each call's id and name
    and its arguments in two pieces, the finish reason, and the usage in a last chunk."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": CHAT["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    pieces = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Checking "}),
              chunk({"content": "both."})]
    for n, call in enumerate(CHAT["choices"][0]["message"]["tool_calls"]):
        arguments = call["function"]["arguments"]
        pieces.append(chunk({"tool_calls": [{"index": n, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"],
                                                          "arguments": arguments[:5]}}]}))
        pieces.append(chunk({"tool_calls": [{"index": n, "function": {"arguments": arguments[5:]}}]}))
    pieces.append(chunk({}, "tool_calls"))
    pieces.append({**base, "choices": [], "usage": CHAT["usage"]})
    return _sse([(None, p) for p in pieces] + [(None, "[DONE]")])


def _anthropic_stream() -> bytes:
    """ANTHROPIC's response as the Messages API streams it: each block started, filled by deltas
    (the thinking's signature in a ``signature_delta``, a call's input as partial JSON), stopped."""
    start = {k: v for k, v in ANTHROPIC.items() if k not in ("content", "stop_reason", "usage")}
    usage = ANTHROPIC["usage"]
    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start", "message": {
        **start, "content": [], "stop_reason": None,
        "usage": {**usage, "output_tokens": 1}}})]
    for n, block in enumerate(ANTHROPIC["content"]):
        kind = block["type"]
        opened: dict[str, Any]
        deltas: list[dict[str, Any]]
        if kind == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]},
                      {"type": "signature_delta", "signature": block["signature"]}]
        elif kind == "text":
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"][:5]},
                      {"type": "text_delta", "text": block["text"][5:]}]
        elif kind == "tool_use":
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            text = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": text[:7]},
                      {"type": "input_json_delta", "partial_json": text[7:]}]
        else:
            opened, deltas = block, []
        events.append(("content_block_start", {"type": "content_block_start", "index": n,
                                               "content_block": opened}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": n, "delta": d})
                   for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": n}))
    stopped = {"stop_reason": ANTHROPIC["stop_reason"], "stop_sequence": None}
    events.append(("message_delta", {"type": "message_delta", "delta": stopped,
                                     "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return _sse(events)


class _Streamer(Handler):
    streams: ClassVar[dict[str, bytes]] = {}

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        payload = self.streams.get(self.path)
        if payload is None:
            self.reply(404, "text/plain", b"no route")
        else:
            self.reply(200, "text/event-stream", payload)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    streams = {"/v1/chat/completions": _chat_stream(), "/v1/messages": _anthropic_stream()}
    with local_server(type("Streamer", (_Streamer,), {"streams": streams}), monkeypatch) as url:
        yield url


def test_the_chat_stream_helpers_final_completion_reads_as_the_whole_response(server: str) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(api_key="test", base_url=f"{server}/v1", max_retries=0)
    with client.chat.completions.stream(model="gpt-4o", messages=[{"role": "user", "content": "go"}],
                                        stream_options={"include_usage": True}) as stream:
        final = stream.get_final_completion()
    assert type(final).__name__.startswith("ParsedChatCompletion")  # a subclass of ChatCompletion
    assert contextfold.read_response("openai-chat", final) == contextfold.read_response("openai-chat", CHAT)


def test_the_anthropic_stream_helpers_final_message_reads_as_the_whole_response(server: str) -> None:
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(api_key="test", base_url=server, max_retries=0)
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=1024,
                                messages=[{"role": "user", "content": "go"}]) as stream:
        final = stream.get_final_message()
    assert type(final).__name__ == "ParsedMessage"  # a subclass of Message
    reply = contextfold.read_response("anthropic", final)
    assert reply == contextfold.read_response("anthropic", ANTHROPIC)
    assert [c.call_id for c in reply.calls] == ["toolu_a", "toolu_b"]

"""``contextfold.StreamReader`` fed what the official SDK clients yield from a real HTTP stream.

A local server (``tests.local_http``: no provider is called) sends each provider's server-sent
events in chunks of 5 bytes (chunked transfer encoding), so the clients' decoders meet characters
split between their bytes. The chunks the clients yield go to the reader as they come, while the
SDK's own stream helper accumulates the same events: both read to the same reply, the reply of
the same response returned whole. google-genai has no helper: its chunks' ``.text`` join to the
reply's text. Recorded OpenAI streams (``../shared/traces/pydantic-ai-cassettes``) read as the
assistant turn the next recorded request sent back.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

import contextfold
from contextfold import ModelResponse, StreamIncompleteError
from tests.integration.test_cassettes import CASSETTES, cases
from tests.local_http import Handler, local_server
from tests.stream_events import anthropic_events, chat_chunks, gemini_chunks, responses_events, sse
from tests.unit.test_read_response import ANTHROPIC, CHAT, GEMINI, RESPONSES
from tests.unit.test_read_stream import WIDE

PIECE = 5


class _Streamer(Handler):
    protocol_version = "HTTP/1.1"
    streams: ClassVar[dict[str, bytes]] = {}
    dropped: ClassVar[int | None] = None
    """Bytes after which the connection drops (no last chunk): a stream that broke off."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        route = next((body for path, body in self.streams.items() if path in self.path), None)
        if route is None:
            self.reply(404, "text/plain", b"no route")
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        end = len(route) if self.dropped is None else self.dropped
        for i in range(0, end, PIECE):
            piece = route[i : min(i + PIECE, end)]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        if self.dropped is None:
            self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Set ``streams`` (a part of the path -> body) and ``dropped`` on the yielded dict before a request."""
    handler: Any = type("Streamer", (_Streamer,), {"streams": {}, "dropped": None})
    with local_server(handler, monkeypatch) as url:
        yield {"url": url, "handler": handler}


def _wide_chat() -> dict[str, Any]:
    body = copy.deepcopy(CHAT)
    body["choices"][0]["message"]["content"] = "Checking both: Zürich, naïve, 🌍."
    body["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"] = WIDE
    return body


def test_chat_chunks_the_client_yields_read_as_its_helpers_final_completion(serve: dict[str, Any]) -> None:
    openai = pytest.importorskip("openai")
    body = _wide_chat()
    serve["handler"].streams = {"/v1/chat/completions": sse(chat_chunks(body), done=True)}
    client = openai.OpenAI(api_key="test", base_url=f"{serve['url']}/v1", max_retries=0)
    reader = contextfold.StreamReader("openai-chat")
    with client.chat.completions.stream(
        model="gpt-4o", messages=[{"role": "user", "content": "go"}], stream_options={"include_usage": True}
    ) as stream:
        for event in stream:  # the helper's events: a `chunk` for each chunk, and its own
            reader.add(event)
        final = stream.get_final_completion()
    reply = reader.reply()
    assert (
        reply
        == contextfold.read_response("openai-chat", final)
        == contextfold.read_response("openai-chat", body)
    )

    raw = contextfold.StreamReader("openai-chat")
    for chunk in client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "go"}], stream=True
    ):
        raw.add(chunk)
    assert raw.reply() == reply
    assert json.loads(reply.calls[1].arguments) == json.loads(WIDE)


def test_responses_events_read_as_the_helpers_final_response(serve: dict[str, Any]) -> None:
    openai = pytest.importorskip("openai")
    serve["handler"].streams = {"/v1/responses": sse(responses_events(RESPONSES), named=True)}
    client = openai.OpenAI(api_key="test", base_url=f"{serve['url']}/v1", max_retries=0)
    reader = contextfold.StreamReader("openai-responses")
    with client.responses.stream(model="gpt-5", input="go") as stream:
        for event in stream:
            reader.add(event)
        final = stream.get_final_response()
    whole = contextfold.read_response("openai-responses", RESPONSES)
    assert reader.reply() == contextfold.read_response("openai-responses", final) == whole
    raw = contextfold.StreamReader("openai-responses")
    for event in client.responses.create(model="gpt-5", input="go", stream=True):
        raw.add(event)
    assert raw.reply() == whole


def test_a_responses_stream_ended_incomplete_reads_though_the_helper_gives_no_response(
    serve: dict[str, Any],
) -> None:
    """``response.incomplete`` (``max_output_tokens``) ends the stream: ``get_final_response()``
    raises, as it waits for ``response.completed``; the text cut at the limit reads, and says so."""
    openai = pytest.importorskip("openai")
    body = copy.deepcopy(RESPONSES)
    body.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    body["output"] = body["output"][:2]
    serve["handler"].streams = {"/v1/responses": sse(responses_events(body), named=True)}
    client = openai.OpenAI(api_key="test", base_url=f"{serve['url']}/v1", max_retries=0)
    reader = contextfold.StreamReader("openai-responses")
    with client.responses.stream(model="gpt-5", input="go") as stream:
        for event in stream:
            reader.add(event)
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            stream.get_final_response()
    reply = reader.reply()
    assert reply == contextfold.read_response("openai-responses", body)
    assert reply.stop_reason == "max_output_tokens" and reply.calls == ()


def test_anthropic_events_read_as_the_helpers_final_message(serve: dict[str, Any]) -> None:
    anthropic = pytest.importorskip("anthropic")
    body = copy.deepcopy(ANTHROPIC)
    body["content"][1]["text"] = "Checking both: Zürich, naïve, 🌍."
    body["content"][2]["input"] = json.loads(WIDE)
    serve["handler"].streams = {"/v1/messages": sse(anthropic_events(body), named=True)}
    client = anthropic.Anthropic(api_key="test", base_url=serve["url"], max_retries=0)
    reader = contextfold.StreamReader("anthropic")
    with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=1024, messages=[{"role": "user", "content": "go"}]
    ) as stream:
        for event in stream:  # raw events and the helper's own (text, input_json, thinking, ...)
            reader.add(event)
        final = stream.get_final_message()
    reply = reader.reply()
    assert (
        reply == contextfold.read_response("anthropic", final) == contextfold.read_response("anthropic", body)
    )
    raw = contextfold.StreamReader("anthropic")
    for event in client.messages.create(
        model="claude-sonnet-4-5", max_tokens=1024, messages=[{"role": "user", "content": "go"}], stream=True
    ):
        raw.add(event)
    assert raw.reply() == reply


def test_gemini_chunks_the_client_yields_read_as_the_whole_response(serve: dict[str, Any]) -> None:
    genai = pytest.importorskip("google.genai")
    body = copy.deepcopy(GEMINI)
    body["candidates"][0]["content"]["parts"][0]["text"] = "Checking both: Zürich, naïve, 🌍."
    serve["handler"].streams = {":streamGenerateContent": sse(gemini_chunks(body, size=3))}
    client = genai.Client(api_key="test", http_options={"base_url": serve["url"]})
    reader = contextfold.StreamReader("gemini")
    texts = []
    for chunk in client.models.generate_content_stream(model="gemini-3-flash-preview", contents="go"):
        reader.add(chunk)
        texts.append(chunk.text or "")
    reply = reader.reply()
    assert reply == contextfold.read_response("gemini", body)
    (response,) = reply.events
    assert isinstance(response, ModelResponse) and response.text == "".join(texts)


def test_a_dropped_connection_leaves_what_came_whole_and_never_the_call_it_cut(serve: dict[str, Any]) -> None:
    anthropic = pytest.importorskip("anthropic")
    events = anthropic_events(ANTHROPIC)
    start = events.index(
        {"type": "content_block_start", "index": 4, "content_block": {**ANTHROPIC["content"][4], "input": {}}}
    )
    serve["handler"].streams = {"/v1/messages": sse(events, named=True)}
    serve["handler"].dropped = len(sse(events[: start + 4], named=True))  # toolu_b's input: '{"path": "b.'
    client = anthropic.Anthropic(api_key="test", base_url=serve["url"], max_retries=0)
    reader = contextfold.StreamReader("anthropic")
    with (
        pytest.raises(anthropic.APIConnectionError),
        client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=1024, messages=[{"role": "user", "content": "go"}]
        ) as stream,
    ):
        for event in stream:
            reader.add(event)
    snapshot = stream.current_message_snapshot
    assert snapshot.content[-1].type == "tool_use" and snapshot.content[-1].input != {"path": "b.py"}
    with pytest.raises(contextfold.ImportFormatError, match="not finished"):
        contextfold.read_response("anthropic", snapshot)  # the helper's lenient guess is no call
    with pytest.raises(StreamIncompleteError) as caught:
        reader.reply()
    err = caught.value
    assert err.missing[0] == "call 'toolu_b' (read): its input did not finish"
    assert err.partial is not None and [c.call_id for c in err.partial.calls] == ["toolu_a"]
    assert err.text == "Checking both."


# ------------------------------------------------------------------ recorded streams


def _recorded_streams() -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every recorded Chat Completions stream: (cassette, its SSE text, the next request)."""
    if not CASSETTES.is_dir():
        return []
    yaml = pytest.importorskip("yaml")
    out = []
    for path in sorted(CASSETTES.rglob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        interactions = doc["interactions"]
        for n, it in enumerate(interactions):
            text = it["response"].get("body", {}).get("string")
            if isinstance(text, str) and text.startswith("data: "):
                following = (
                    interactions[n + 1]["request"].get("parsed_body") if n + 1 < len(interactions) else None
                )
                out.append((f"{path.name}#{n}", text, following))
    return out


@pytest.mark.traces
@pytest.mark.skipif(not CASSETTES.is_dir(), reason=f"cassettes folder {CASSETTES} is absent")
def test_recorded_chat_streams_read_as_the_turn_sent_back(serve: dict[str, Any]) -> None:
    openai = pytest.importorskip("openai")
    streams = _recorded_streams()
    assert len(streams) == 9 and any(c.provider == "openai-chat" for c in cases())
    client = openai.OpenAI(api_key="test", base_url=f"{serve['url']}/v1", max_retries=0)
    sent_back = 0
    for name, text, following in streams:
        serve["handler"].streams = {"/v1/chat/completions": text.encode()}
        reader = contextfold.StreamReader("openai-chat")
        with client.chat.completions.stream(
            model="gpt-4o", messages=[{"role": "user", "content": "go"}]
        ) as stream:
            for event in stream:
                reader.add(event)
            final = stream.get_final_completion()
        reply = reader.reply()
        assert reply == contextfold.read_response("openai-chat", final), name
        data = [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]
        assert contextfold.read_stream("openai-chat", data) == reply, name
        assert reply.usage is not None, name
        if following is None:
            continue
        (response,) = reply.events
        assert isinstance(response, ModelResponse)
        turns = [m for m in following["messages"] if m["role"] == "assistant"]
        if response.tool_calls:
            sent = next(
                m
                for m in turns
                if m.get("tool_calls") and m["tool_calls"][0]["id"] == response.tool_calls[0].call_id
            )
            assert [
                (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in sent["tool_calls"]
            ] == [(c.call_id, c.name, json.loads(c.arguments)) for c in response.tool_calls], name
            sent_back += 1
    assert sent_back >= 3


# ------------------------------------------------------------------ what a runtime keeps


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses", "anthropic", "gemini"])
def test_a_partial_reply_appended_builds_a_request_the_provider_takes(provider: str, store_url: str) -> None:
    """A runtime that keeps what came whole of a broken stream appends it, answers its whole
    calls, and builds on: the request passes the SDK's types, with no call the stream cut."""
    from contextfold import ToolResult, UserInput
    from contextfold.projections.render.validate import validate_sdk_types
    from tests.unit.test_read_response import BODIES
    from tests.unit.test_read_stream import STREAMS

    events = STREAMS[provider](BODIES[provider], size=3)
    reader = contextfold.StreamReader(provider)
    for event in events[: len(events) - 3]:  # the connection drops near the end
        reader.add(event)
    with pytest.raises(StreamIncompleteError) as caught:
        reader.reply()
    partial = caught.value.partial
    assert partial is not None and partial.events
    with contextfold.open_store(store_url) as store:
        run = store.run(f"partial-{provider}")
        run.append(UserInput("Read a.py and b.py."))
        run.build(provider, window=200_000, reserve=8_000)
        run.append(partial.events)
        run.append(ToolResult(call_id=c.call_id, content="contents") for c in partial.calls)
        built = run.build(provider, window=200_000, reserve=8_000)
    assert validate_sdk_types(provider, built.request) is True
    request = json.dumps(built.request)
    whole = {c.call_id for c in contextfold.read_response(provider, BODIES[provider]).calls}
    kept = {c.call_id for c in partial.calls}
    assert kept < whole and all((c in request) == (c in kept) for c in whole)

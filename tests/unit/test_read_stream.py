"""``contextfold.StreamReader`` / ``read_stream``: a streamed response, chunk by chunk, read into the
reply ``read_response`` reads from the same response returned whole -- checked against the
official SDKs' own accumulators (``ChatCompletionStreamState``, anthropic's ``accumulate_event``;
Responses and google-genai through their clients: ``tests/integration/test_read_stream_sdk.py``).

And what an interrupted stream leaves: at every point a stream may break off, the reader either
reads the whole reply (the provider said it ended) or refuses with ``StreamIncompleteError``,
whose partial reply never holds a call the whole response does not hold verbatim.
"""

from __future__ import annotations

import copy
import doctest
import json
import pickle
from typing import Any

import pytest

import contextfold
from contextfold import ImportFormatError, InvalidInputError, ModelResponse, StreamIncompleteError
from contextfold.importers import provider_stream
from tests.stream_events import anthropic_events, chat_chunks, gemini_chunks, responses_events
from tests.unit.test_read_response import ANTHROPIC, BODIES, CHAT, GEMINI, RESPONSES, sdk_object

STREAMS = {
    "openai-chat": chat_chunks,
    "openai-responses": responses_events,
    "anthropic": anthropic_events,
    "gemini": gemini_chunks,
}

WIDE = '{"city": "Zürich", "note": "naïve 🌍 \\u00fc", "n": [1, 2.5, null]}'
"""Arguments whose pieces cut next to multi-byte characters and inside a ``\\u`` escape."""


def _chat_body() -> dict[str, Any]:
    body = copy.deepcopy(CHAT)
    body["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"] = WIDE
    return body


def _sdk_chat_final(chunks: list[dict[str, Any]]) -> Any:
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    state: Any = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    return state.get_final_completion()


def _sdk_anthropic_final(events: list[dict[str, Any]]) -> Any:
    from anthropic.lib.streaming._messages import accumulate_event

    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for event in events:  # it takes an event's dict as well (constructed, as the client does)
        raw: Any = copy.deepcopy(event)
        snapshot = accumulate_event(event=raw, current_snapshot=snapshot, json_bufs=buffers)
    return snapshot


@pytest.mark.parametrize("provider", list(BODIES))
def test_a_stream_reads_as_the_same_response_returned_whole(provider: str) -> None:
    events = STREAMS[provider](BODIES[provider])
    whole = contextfold.read_response(provider, BODIES[provider])
    assert contextfold.read_stream(provider, events) == whole
    assert contextfold.read_stream(provider, [json.dumps(e) for e in events] + ["[DONE]"]) == whole
    assert contextfold.read_stream(provider, [json.dumps(e).encode() for e in events]) == whole


@pytest.mark.parametrize("interleave", [True, False])
def test_chat_reads_as_the_sdks_own_accumulation(interleave: bool) -> None:
    """Parallel calls (their pieces interleaved by index, or one after the other), arguments cut
    mid-JSON and next to multi-byte characters, the usage in a last chunk of no choices."""
    from openai.types.chat import ChatCompletionChunk

    chunks = chat_chunks(_chat_body(), interleave=interleave)
    sdk = contextfold.read_response("openai-chat", _sdk_chat_final(chunks))
    assert (
        contextfold.read_stream("openai-chat", [ChatCompletionChunk.model_validate(c) for c in chunks]) == sdk
    )
    assert contextfold.read_stream("openai-chat", chunks) == sdk
    assert sdk.usage is not None and sdk.usage["input_tokens"] == 1200
    assert json.loads(sdk.calls[1].arguments) == json.loads(WIDE)


def test_a_call_id_repeated_on_every_chunk_is_the_one_id() -> None:
    """Some OpenAI-compatible servers repeat a call's ``id`` on each of its chunks: the SDK's
    ``accumulate_delta`` joins strings, so its completion names ``call_acall_acall_a…``, an id no
    result answers; the reader keeps the first."""
    chunks = chat_chunks(CHAT)
    ids = [c["id"] for c in CHAT["choices"][0]["message"]["tool_calls"]]
    for chunk in chunks:
        for choice in chunk["choices"]:
            for call in choice["delta"].get("tool_calls", []):
                call["id"] = ids[call["index"]]
    sdk_ids = [c.id for c in _sdk_chat_final(chunks).choices[0].message.tool_calls]
    assert sdk_ids[0].startswith("call_acall_a")
    assert [c.call_id for c in contextfold.read_stream("openai-chat", chunks).calls] == ids


def test_chat_refusal_deltas_are_the_replys_text() -> None:
    body = copy.deepcopy(CHAT)
    body["choices"][0]["finish_reason"] = "stop"
    body["choices"][0]["message"].update(content=None, tool_calls=None, refusal="I can't help with that.")
    chunks = chat_chunks(body)
    reply = contextfold.read_stream("openai-chat", chunks)
    assert reply == contextfold.read_response("openai-chat", _sdk_chat_final(chunks))
    assert isinstance(reply.events[0], ModelResponse) and reply.events[0].text == "I can't help with that."


def test_anthropic_reads_as_the_sdks_own_accumulation() -> None:
    """Thinking and its ``signature_delta``, redacted thinking, input JSON in pieces, a server
    tool's call and its result; the SDK's raw event objects and their dicts."""
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    body = copy.deepcopy(ANTHROPIC)
    body["content"][2]["input"] = json.loads(WIDE)
    body["content"][3:3] = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "zürich"}},
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_1",
            "content": [
                {
                    "type": "web_search_result",
                    "url": "https://example.org",
                    "title": "Z",
                    "encrypted_content": "Eq0x",
                }
            ],
        },
    ]
    events = anthropic_events(body)
    sdk = contextfold.read_response("anthropic", _sdk_anthropic_final(events))
    adapter: Any = TypeAdapter(RawMessageStreamEvent)
    assert contextfold.read_stream("anthropic", [adapter.validate_python(e) for e in events]) == sdk
    assert contextfold.read_stream("anthropic", events) == sdk
    assert sdk == contextfold.read_response("anthropic", body)
    assert [c.call_id for c in sdk.calls] == ["toolu_a", "toolu_b"]  # the server's call is answered


def test_a_responses_stream_whose_end_leaves_out_the_output_reads_from_its_done_items() -> None:
    whole = contextfold.read_response("openai-responses", RESPONSES)
    assert (
        contextfold.read_stream("openai-responses", responses_events(RESPONSES, output_on_end=False)) == whole
    )
    (response,) = whole.events
    assert isinstance(response, ModelResponse) and response.reasoning is not None
    assert response.reasoning.items[0].raw["encrypted_content"] == "gAAAAABenc=="  # type: ignore[union-attr]


def test_gemini_text_pieces_and_a_late_signature_join_as_the_whole_response() -> None:
    """google-genai has no accumulator: its ``chunk.text`` of each chunk joins to the reply's
    text, and each function call's ``thoughtSignature`` rides on its call."""
    chunks = [sdk_object("gemini", c) for c in gemini_chunks(GEMINI, size=2)]
    reply = contextfold.read_stream("gemini", chunks)
    assert reply == contextfold.read_response("gemini", GEMINI)
    (response,) = reply.events
    assert isinstance(response, ModelResponse)
    assert response.text == "".join(
        c.text or "" for c in chunks if c.candidates[0].content.parts[0].text is not None
    )
    no_ids = copy.deepcopy(GEMINI)
    for part in no_ids["candidates"][0]["content"]["parts"][1:]:
        del part["functionCall"]["id"]
    assert (
        [c.call_id for c in contextfold.read_stream("gemini", gemini_chunks(no_ids)).calls]
        == [c.call_id for c in contextfold.read_response("gemini", no_ids).calls]
        == ["gemini-r1-1", "gemini-r1-2"]  # named after its responseId
    )


# ---------------------------------------------------------------- interrupted streams


@pytest.mark.parametrize("provider", list(BODIES))
def test_at_every_break_a_stream_is_whole_or_refused_and_never_holds_a_cut_call(provider: str) -> None:
    events = STREAMS[provider](BODIES[provider], size=2)
    whole = contextfold.read_response(provider, BODIES[provider])
    whole_calls = {c.call_id: c for c in whole.calls}
    refused = 0
    for n in range(len(events) + 1):
        reader = contextfold.StreamReader(provider)
        for event in events[:n]:
            reader.add(event)
        try:
            reply = reader.reply()
        except StreamIncompleteError as e:
            refused += 1
            assert not reader.done or provider == "openai-chat"
            assert e.missing and str(e).startswith(f"{provider} stream: ")
            usage_cut = provider == "openai-chat" and n == len(events) - 1  # all but its usage chunk
            if e.partial is not None:
                assert e.partial.stop_reason is None or usage_cut
                for call in e.partial.calls:
                    assert whole_calls[call.call_id] == call  # whole, verbatim: nothing fabricated
                assert whole.events[0].text.startswith(e.text)  # type: ignore[union-attr]
            continue
        assert reader.done
        assert reply == whole
    # only the end reads: Anthropic's message_delta (before message_stop), and the whole stream
    assert refused == len(events) + 1 - (2 if provider == "anthropic" else 1)


def test_a_chat_stream_cut_between_its_finish_and_its_usage_is_refused_its_reply_kept() -> None:
    """With ``stream_options.include_usage`` every chunk says ``"usage": null`` and the usage comes
    last, after the finish reason: a stream cut before it read whole, with ``usage=None``, and the
    runtime had no usage to observe. Refused now, ``err.partial`` the whole reply without it; the
    server's ``[DONE]`` ends it as it is; a stream that never asked reads whole."""
    from openai.types.chat import ChatCompletionChunk

    chunks = chat_chunks(CHAT)
    whole = contextfold.read_stream("openai-chat", chunks)
    assert whole.usage is not None
    for form in (chunks[:-1], [ChatCompletionChunk.model_validate(c) for c in chunks[:-1]]):
        with pytest.raises(StreamIncompleteError) as cut:
            contextfold.read_stream("openai-chat", form)
        assert cut.value.partial == whole.model_copy(update={"usage": None})
        assert "usage chunk" in cut.value.missing[0]
    assert contextfold.read_stream("openai-chat", [*chunks[:-1], "[DONE]"]).usage is None
    unasked = [{k: v for k, v in c.items() if k != "usage"} for c in chunks[:-1]]
    assert contextfold.read_stream("openai-chat", unasked) == whole.model_copy(update={"usage": None})


def test_a_dropped_chat_stream_keeps_its_text_and_the_calls_whose_arguments_closed() -> None:
    chunks = chat_chunks(_chat_body(), interleave=False)
    cut = (
        next(
            n
            for n, c in enumerate(chunks)
            if c["choices"]
            and c["choices"][0]["delta"].get("tool_calls", [{}])[0].get("index") == 1
            and "id" not in c["choices"][0]["delta"]["tool_calls"][0]
        )
        + 2
    )
    with pytest.raises(StreamIncompleteError) as caught:
        contextfold.read_stream("openai-chat", chunks[:cut])
    err = caught.value
    assert err.missing == (
        "call 'call_b' (read): its arguments did not finish",
        "the stream's end (a finish_reason)",
    )
    assert err.partial is not None and [c.call_id for c in err.partial.calls] == ["call_a"]
    assert err.text == "Checking both." and err.location == "openai-chat stream"
    assert isinstance(err, ImportFormatError)
    back = pickle.loads(pickle.dumps(err))
    assert vars(back) == vars(err) and back.partial == err.partial


def test_the_sdks_snapshot_of_a_dropped_stream_is_refused_by_read_response() -> None:
    """What the SDKs' accumulators hold when the connection drops inside a call: Chat's
    arguments half written, Anthropic's input parsed leniently from a prefix into a closed,
    plausible object (``"recursive"`` lost). Read as a response, each was a call to run."""
    chunks = chat_chunks(CHAT, interleave=False)
    chat_snapshot = _sdk_chat_final(chunks[:-4])
    assert chat_snapshot.choices[0].message.tool_calls[1].function.arguments == '{"path":"'
    with pytest.raises(ImportFormatError, match=r"finish_reason: the response is not finished"):
        contextfold.read_response("openai-chat", chat_snapshot)

    body = copy.deepcopy(ANTHROPIC)
    body["content"] = [
        {"type": "tool_use", "id": "toolu_1", "name": "rm", "input": {"path": "/tmp/x", "recursive": True}}
    ]
    events = anthropic_events(body, size=30)[:3]  # the input up to `"recursive"`
    snapshot = _sdk_anthropic_final(events)
    assert snapshot.content[0].input == {"path": "/tmp/x"}  # what jiter made of the prefix
    with pytest.raises(ImportFormatError, match=r"at stop_reason: the response is not finished"):
        contextfold.read_response("anthropic", snapshot)
    with pytest.raises(StreamIncompleteError) as caught:
        contextfold.read_stream("anthropic", events)
    assert caught.value.partial is None
    assert caught.value.missing[0] == "call 'toolu_1' (rm): its input did not finish"

    gemini_chunk = gemini_chunks(GEMINI)[0]
    with pytest.raises(ImportFormatError, match=r"finishReason: the response is not finished"):
        contextfold.read_response("gemini", gemini_chunk)


# ---------------------------------------------------------------- cut at the output limit


def test_chat_stopped_at_its_limit_inside_a_call_keeps_the_whole_ones() -> None:
    body = copy.deepcopy(CHAT)
    body["choices"][0]["finish_reason"] = "length"
    body["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"] = '{"path":"b.'
    chunks = chat_chunks(body)
    from openai import LengthFinishReasonError

    with pytest.raises(LengthFinishReasonError):  # the SDK's helper gives no final object at all
        _sdk_chat_final(chunks)
    with pytest.raises(ImportFormatError, match=r"call 'call_b'") as sdk_refused:
        contextfold.read_response("openai-chat", body)
    with pytest.raises(StreamIncompleteError) as caught:
        contextfold.read_stream("openai-chat", chunks)
    err = caught.value
    assert err.missing == ("call 'call_b' (read): its arguments did not finish",)
    assert err.partial is not None and err.partial.stop_reason == "length"
    assert [c.call_id for c in err.partial.calls] == ["call_a"]
    assert (
        err.location
        == sdk_refused.value.location
        == "openai-chat response at choices[0].message.tool_calls[1]"
    )


def test_anthropic_stopped_at_max_tokens_in_its_last_call_is_refused_as_read_response_does() -> None:
    body = copy.deepcopy(ANTHROPIC)
    body["stop_reason"] = "max_tokens"
    events = anthropic_events(body)
    with pytest.raises(StreamIncompleteError, match=r"content\[4\]: .*max_tokens.*'toolu_b'") as caught:
        contextfold.read_stream("anthropic", events)
    partial = caught.value.partial
    assert partial is not None and partial.stop_reason == "max_tokens"
    assert [c.call_id for c in partial.calls] == ["toolu_a"]
    with pytest.raises(ImportFormatError, match=r"'toolu_b'"):
        contextfold.read_response("anthropic", _sdk_anthropic_final(events))


def test_responses_incomplete_inside_a_call_keeps_the_done_items() -> None:
    body = copy.deepcopy(RESPONSES)
    body.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    body["output"][3].update(arguments='{"pa', status="incomplete")
    with pytest.raises(StreamIncompleteError, match=r"output\[3\]: .*max_output_tokens") as caught:
        contextfold.read_stream("openai-responses", responses_events(body))
    partial = caught.value.partial
    assert partial is not None and partial.stop_reason == "max_output_tokens"
    assert [c.call_id for c in partial.calls] == ["call_a"]
    (response,) = partial.events
    assert isinstance(response, ModelResponse) and response.reasoning is not None


def test_a_text_cut_at_the_limit_reads_whole() -> None:
    body = copy.deepcopy(GEMINI)
    body["candidates"][0]["finishReason"] = "MAX_TOKENS"
    del body["candidates"][0]["content"]["parts"][1:]
    assert contextfold.read_stream("gemini", gemini_chunks(body)).stop_reason == "MAX_TOKENS"
    body["candidates"][0]["content"]["parts"].append(GEMINI["candidates"][0]["content"]["parts"][1])
    with pytest.raises(StreamIncompleteError, match=r"parts\[1\]: .*'MAX_TOKENS'") as caught:
        contextfold.read_stream("gemini", gemini_chunks(body))
    assert caught.value.partial is not None and caught.value.partial.calls == ()
    assert caught.value.text == "Checking both."


# ---------------------------------------------------------------- the provider's own end


def test_an_error_event_or_a_failed_response_is_a_stream_that_did_not_finish() -> None:
    events = anthropic_events(ANTHROPIC)
    failed = [*events[:6], {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
    with pytest.raises(StreamIncompleteError, match=r"provider's error \(overloaded_error: Overloaded\)"):
        contextfold.read_stream("anthropic", failed)
    stream = responses_events(RESPONSES)
    stream[-1] = {
        "type": "response.failed",
        "sequence_number": 99,
        "response": {**RESPONSES, "status": "failed", "error": {"code": "server_error", "message": "boom"}},
    }
    with pytest.raises(StreamIncompleteError, match=r"\(boom\)") as caught:
        contextfold.read_stream("openai-responses", stream)
    assert caught.value.partial is not None and len(caught.value.partial.calls) == 2


def test_a_gemini_continuation_pause_is_not_the_end() -> None:
    chunks = gemini_chunks(GEMINI)
    chunks[-1]["candidates"][0]["finishReason"] = "CONTINUATION"
    with pytest.raises(StreamIncompleteError, match="CONTINUATION"):
        contextfold.read_stream("gemini", chunks)
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "modelVersion": "gemini-3-flash-preview"}
    with pytest.raises(ImportFormatError, match=r"prompt was blocked") as caught:
        contextfold.read_stream("gemini", [blocked])
    assert not isinstance(caught.value, StreamIncompleteError)


# ---------------------------------------------------------------- refused, not guessed


def test_a_whole_response_or_another_providers_chunk_is_refused_by_position() -> None:
    with pytest.raises(ImportFormatError, match=r"^openai-chat stream chunk 0 at object: .*read_response"):
        contextfold.read_stream("openai-chat", [CHAT])
    with pytest.raises(ImportFormatError, match=r"^anthropic stream chunk 1 at type: .*read_response"):
        contextfold.read_stream("anthropic", [anthropic_events(ANTHROPIC)[0], ANTHROPIC])
    from openai.types.chat import ChatCompletionChunk

    chunk = ChatCompletionChunk.model_validate(chat_chunks(CHAT)[0])
    with pytest.raises(ImportFormatError, match=r"expected a anthropic stream chunk, got openai\."):
        contextfold.read_stream("anthropic", [chunk])
    with pytest.raises(ImportFormatError, match=r"stream chunk 0: not JSON"):
        contextfold.read_stream("gemini", ["data: {"])
    with pytest.raises(ImportFormatError, match=r"chunk 2 at delta: .*before message_start|chunk 0 at type"):
        contextfold.read_stream("anthropic", anthropic_events(ANTHROPIC)[1:])
    with pytest.raises(InvalidInputError, match="unknown provider 'openai'"):
        contextfold.StreamReader("openai")


def test_the_sdk_helpers_own_events_are_skipped() -> None:
    """``messages.stream()`` yields a ``text`` event with its snapshot after each text delta, and
    ``chat.completions.stream()`` wraps each chunk in a ``chunk`` event: fed as they come, they
    read as the raw stream."""
    events: list[Any] = []
    for event in anthropic_events(ANTHROPIC):
        events.append(event)
        if event["type"] == "content_block_delta" and event["delta"]["type"] == "text_delta":
            events.append({"type": "text", "text": event["delta"]["text"], "snapshot": "…"})
    assert contextfold.read_stream("anthropic", events) == contextfold.read_response("anthropic", ANTHROPIC)
    wrapped = [{"type": "chunk", "chunk": c, "snapshot": {}} for c in chat_chunks(CHAT)]
    wrapped.insert(3, {"type": "content.delta", "delta": "Ch", "snapshot": "Ch"})
    assert contextfold.read_stream("openai-chat", wrapped) == contextfold.read_response("openai-chat", CHAT)


def test_the_docstring_example_runs() -> None:
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    (test,) = [t for t in finder.find(provider_stream.StreamReader, "StreamReader", globs={}) if t.examples]
    assert test.examples
    result = runner.run(test)
    assert result.failed == 0 and result.attempted == len(test.examples)

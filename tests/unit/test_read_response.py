"""``contextfold.read_response``: one provider response, as the official SDK returns it, read into
the events to append, with its usage and stop reason.

Each provider's response is given three ways: its REST JSON, the SDK's object built from it
(``Model.model_validate``: no network), and that object's ``model_dump()`` (with its nulls and, for
Gemini, bytes): all three read to the same events. What the next request needs back (signatures,
reasoning items, call ids, parallel calls, refusals) is kept verbatim; a response that is not the
named provider's, or one cut while writing a call, is refused with a typed error saying where.
"""

from __future__ import annotations

import base64
import copy
import doctest
import subprocess
import sys
from typing import Any

import pytest

import contextfold
from contextfold import ImportFormatError, InvalidInputError, ModelResponse
from contextfold.domain.events import (
    AnthropicReasoning,
    GeminiReasoning,
    GeminiSignature,
    OpenAIResponsesReasoning,
)
from contextfold.importers import provider_reply

SIGNATURE = base64.b64encode(bytes(range(200, 256)) + b"\xfb\xff").decode()
"""A Gemini thought signature whose standard and URL-safe base64 spellings differ (``+``, ``/``)."""
CALL_SIGNATURE = base64.b64encode(bytes(range(120, 190))).decode()

CHAT: dict[str, Any] = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": "Checking both.", "refusal": None, "annotations": [],
        "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "read", "arguments": "{\"path\":\"a.py\"}"}},
            {"id": "call_b", "type": "function",
             "function": {"name": "read", "arguments": "{\"path\":\"b.py\"}"}},
        ]}}],
    "usage": {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230,
              "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0}},
}

RESPONSES: dict[str, Any] = {
    "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5", "status": "completed",
    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
    "incomplete_details": None,
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two reads."}],
         "encrypted_content": "gAAAAABenc==", "status": None},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking both.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "read",
         "arguments": "{\"path\":\"a.py\"}", "status": "completed"},
        {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "read",
         "arguments": "{\"path\":\"b.py\"}", "status": "completed"},
    ],
    "usage": {"input_tokens": 1500, "input_tokens_details": {"cached_tokens": 1280, "cache_write_tokens": 0},
              "output_tokens": 90, "output_tokens_details": {"reasoning_tokens": 64}, "total_tokens": 1590},
}

ANTHROPIC: dict[str, Any] = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
    "content": [
        {"type": "thinking", "thinking": "Read a first.", "signature": "EqQBsig1"},
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a.py", "limit": None}},
        {"type": "redacted_thinking", "data": "EmwKAredacted"},
        {"type": "tool_use", "id": "toolu_b", "name": "read", "input": {"path": "b.py"}},
    ],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 50, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2000,
              "output_tokens": 120},
}

GEMINI: dict[str, Any] = {
    "candidates": [{"index": 0, "finishReason": "STOP", "content": {"role": "model", "parts": [
        {"text": "Checking both.", "thoughtSignature": SIGNATURE},
        {"functionCall": {"id": "g1", "name": "read", "args": {"path": "a.py", "limit": None}},
         "thoughtSignature": CALL_SIGNATURE},
        {"functionCall": {"id": "g2", "name": "read", "args": {"path": "b.py"}}},
    ]}}],
    "modelVersion": "gemini-3-flash-preview", "responseId": "r1",
    "usageMetadata": {"promptTokenCount": 900, "cachedContentTokenCount": 512, "candidatesTokenCount": 40,
                      "thoughtsTokenCount": 60, "totalTokenCount": 1000},
}

BODIES = {"openai-chat": CHAT, "openai-responses": RESPONSES, "anthropic": ANTHROPIC, "gemini": GEMINI}


def sdk_object(provider: str, body: dict[str, Any]) -> Any:
    """The official SDK's response object for ``body``, built without a network."""
    if provider == "openai-chat":
        from openai.types.chat import ChatCompletion
        return ChatCompletion.model_validate(body)
    if provider == "openai-responses":
        from openai.types.responses import Response
        return Response.model_validate(body)
    if provider == "anthropic":
        from anthropic.types import Message
        from anthropic.types.beta import BetaMessage
        from pydantic import ValidationError

        try:
            return Message.model_validate(body)
        except ValidationError:  # a block of a beta feature (compaction): the beta client's Message
            return BetaMessage.model_validate(body)
    from google.genai.types import GenerateContentResponse
    from pydantic import ValidationError

    while True:  # google-genai's client reads the fields its release knows and drops the rest
        try:
            return GenerateContentResponse.model_validate(body)
        except ValidationError as e:
            extra = [err["loc"] for err in e.errors() if err["type"] == "extra_forbidden"]
            if not extra:
                raise
            body = _dropped(body, extra)


def _dropped(value: Any, paths: list[tuple[int | str, ...]]) -> Any:
    """``value`` without the fields at the camelCase or snake_case ``paths``."""
    value = copy.deepcopy(value)
    for path in paths:
        holder = value
        for key in path[:-1]:
            holder = holder[key]
        del holder[path[-1]]
    return value


def only_response(provider: str, body: Any) -> ModelResponse:
    reply = contextfold.read_response(provider, body)
    assert len(reply.events) == 1 and isinstance(reply.events[0], ModelResponse)
    return reply.events[0]


@pytest.mark.parametrize("provider", list(BODIES))
def test_the_rest_json_the_sdk_object_and_its_dump_read_the_same(provider: str) -> None:
    body = BODIES[provider]
    obj = sdk_object(provider, copy.deepcopy(body))
    from_json = contextfold.read_response(provider, body)
    assert contextfold.read_response(provider, obj) == from_json
    assert contextfold.read_response(provider, obj.model_dump()) == from_json
    assert contextfold.read_response(provider, obj.model_dump(mode="json")) == from_json


@pytest.mark.parametrize("provider", list(BODIES))
def test_text_parallel_calls_and_their_ids_are_kept(provider: str) -> None:
    response = only_response(provider, sdk_object(provider, BODIES[provider]))
    assert response.text == "Checking both."
    ids = {"openai-chat": ("call_a", "call_b"), "openai-responses": ("call_a", "call_b"),
           "anthropic": ("toolu_a", "toolu_b"), "gemini": ("g1", "g2")}[provider]
    assert tuple(c.call_id for c in response.tool_calls) == ids
    assert contextfold.read_response(provider, BODIES[provider]).calls == response.tool_calls
    assert [c.name for c in response.tool_calls] == ["read", "read"]
    assert '"path":"a.py"' in response.tool_calls[0].arguments
    assert response.model == {"openai-chat": "gpt-4o-2024-08-06", "openai-responses": "gpt-5",
                              "anthropic": "claude-sonnet-4-5", "gemini": "gemini-3-flash-preview"}[provider]


def test_a_null_in_the_arguments_is_the_models_own_and_is_kept() -> None:
    """Nulls are dropped from the response's fields (the SDK's unset ones), never from the
    arguments the model wrote."""
    for provider in ("anthropic", "gemini"):
        response = only_response(provider, sdk_object(provider, BODIES[provider]).model_dump())
        assert response.tool_calls[0].arguments == '{"path":"a.py","limit":null}'


def test_anthropic_thinking_is_kept_verbatim_with_the_calls_it_stood_between() -> None:
    response = only_response("anthropic", sdk_object("anthropic", ANTHROPIC))
    assert isinstance(response.reasoning, AnthropicReasoning)
    assert [(i.before_call, i.raw) for i in response.reasoning.items] == [
        (0, {"type": "thinking", "thinking": "Read a first.", "signature": "EqQBsig1"}),
        (1, {"type": "redacted_thinking", "data": "EmwKAredacted"}),
    ]


def test_responses_reasoning_item_keeps_its_encrypted_content_and_goes_before_the_calls() -> None:
    response = only_response("openai-responses", sdk_object("openai-responses", RESPONSES).model_dump())
    assert isinstance(response.reasoning, OpenAIResponsesReasoning)
    (item,) = response.reasoning.items
    assert item.before_call == 0
    assert item.raw == {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAABenc==",
                        "summary": [{"type": "summary_text", "text": "Two reads."}]}


def test_gemini_signatures_stay_on_their_parts_spelled_as_gemini_sent_them() -> None:
    """The SDK holds a signature as bytes and dumps it URL-safe; the REST API spelled it with
    ``+`` and ``/``, as it is read here from every form."""
    for form in (GEMINI, sdk_object("gemini", GEMINI), sdk_object("gemini", GEMINI).model_dump()):
        response = only_response("gemini", form)
        assert response.reasoning == GeminiReasoning(signatures=(
            GeminiSignature(signature=SIGNATURE, call=None),
            GeminiSignature(signature=CALL_SIGNATURE, call=0)))


def test_chat_refusal_is_the_responses_text() -> None:
    body = copy.deepcopy(CHAT)
    body["choices"][0]["finish_reason"] = "stop"
    body["choices"][0]["message"].update(content=None, tool_calls=None, refusal="I can't help with that.")
    assert only_response("openai-chat", sdk_object("openai-chat", body)).text == "I can't help with that."


def test_responses_refusal_part_is_the_responses_text() -> None:
    body = copy.deepcopy(RESPONSES)
    body["output"] = [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                       "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]
    assert only_response("openai-responses", sdk_object("openai-responses", body)).text == (
        "I can't help with that.")


def test_anthropic_server_tool_use_and_its_result_are_kept_verbatim_and_are_no_call() -> None:
    body = copy.deepcopy(ANTHROPIC)
    body["content"] = [
        {"type": "text", "text": "Searching."},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "pydantic"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
         "content": [{"type": "web_search_result", "url": "https://pydantic.dev", "title": "Pydantic",
                      "encrypted_content": "Eq0x", "page_age": None}]},
        {"type": "text", "text": "Found it."},
    ]
    body["stop_reason"] = "end_turn"
    reply = contextfold.read_response("anthropic", sdk_object("anthropic", body))
    (response,) = reply.events
    assert isinstance(response, ModelResponse) and response.tool_calls == ()
    assert reply.calls == ()  # the provider ran it: nothing for the runtime to answer
    assert response.text == "Searching.\nFound it."
    assert isinstance(response.reasoning, AnthropicReasoning)
    assert [i.raw["type"] for i in response.reasoning.items] == ["server_tool_use", "web_search_tool_result"]
    assert response.reasoning.items[1].raw["content"][0]["url"] == "https://pydantic.dev"


@pytest.mark.parametrize("stop", ["pause_turn", "tool_use"])
def test_an_anthropic_server_call_without_its_result_is_not_the_runtimes_to_run(stop: str) -> None:
    """A ``pause_turn`` reply (the server paused its own loop), or a turn that also called a client
    tool, holds a ``server_tool_use`` with no result: the API runs it when the turn is sent back.
    It was a call in ``reply.calls``, for the runtime to run and answer (and, unanswered, a
    TOOL_RESULT_LOST at the next build)."""
    body = copy.deepcopy(ANTHROPIC)
    body["content"] = [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                        "input": {"query": "pydantic"}}]
    if stop == "tool_use":
        body["content"].append({"type": "tool_use", "id": "toolu_1", "name": "save", "input": {}})
    body["stop_reason"] = stop
    reply = contextfold.read_response("anthropic", sdk_object("anthropic", body))
    assert [c.call_id for c in reply.calls] == ([] if stop == "pause_turn" else ["toolu_1"])
    (response,) = reply.events
    assert isinstance(response, ModelResponse) and isinstance(response.reasoning, AnthropicReasoning)
    assert response.reasoning.items[0].raw == body["content"][0]


def test_usage_is_what_observe_usage_takes() -> None:
    usages = {p: contextfold.read_response(p, sdk_object(p, b)).usage for p, b in BODIES.items()}
    assert usages == {
        "openai-chat": {"input_tokens": 1200, "cached_tokens": 1024, "output_tokens": 30,
                        "model": "gpt-4o-2024-08-06"},
        "openai-responses": {"input_tokens": 1500, "cached_tokens": 1280, "output_tokens": 90,
                             "model": "gpt-5"},
        "anthropic": {"input_tokens": 2150, "cached_tokens": 2000, "output_tokens": 120,
                      "model": "claude-sonnet-4-5"},
        "gemini": {"input_tokens": 900, "cached_tokens": 512, "output_tokens": 100,
                   "model": "gemini-3-flash-preview"},
    }
    body = copy.deepcopy(ANTHROPIC)
    del body["usage"]
    assert contextfold.read_response("anthropic", body).usage is None


def test_stop_reason_is_the_providers_own_word() -> None:
    assert {p: contextfold.read_response(p, b).stop_reason for p, b in BODIES.items()} == {
        "openai-chat": "tool_calls", "openai-responses": "completed", "anthropic": "tool_use",
        "gemini": "STOP"}


# ---------------------------------------------------------------- refused, not guessed


@pytest.mark.parametrize("provider", list(BODIES))
def test_another_providers_response_is_refused(provider: str) -> None:
    for other, body in BODIES.items():
        if other == provider:
            continue
        with pytest.raises(ImportFormatError, match=f"^{provider} response"):
            contextfold.read_response(provider, body)
        with pytest.raises(ImportFormatError, match=r"expected .* or its dict, got "):
            contextfold.read_response(provider, sdk_object(other, body))


def test_a_request_body_is_not_a_response() -> None:
    with pytest.raises(ImportFormatError, match="not a anthropic response: 'type' is None"):
        contextfold.read_response("anthropic", {"model": "claude", "max_tokens": 10,
                                                "messages": [{"role": "assistant", "content": "hi"}]})
    with pytest.raises(ImportFormatError, match="'object' is None"):
        contextfold.read_response("openai-chat", {"messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(ImportFormatError, match="missing field 'candidates'"):
        contextfold.read_response("gemini", {"contents": [{"role": "model", "parts": [{"text": "hi"}]}]})


def test_a_stream_chunk_is_refused_and_the_final_object_named() -> None:
    from openai.types.chat import ChatCompletionChunk

    chunk = ChatCompletionChunk.model_validate({
        "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]})
    with pytest.raises(ImportFormatError, match=r"get_final_completion\(\)"):
        contextfold.read_response("openai-chat", chunk)
    with pytest.raises(ImportFormatError, match=r"get_final_completion\(\)"):
        contextfold.read_response("openai-chat", chunk.model_dump())


def test_an_unknown_provider_or_a_value_of_no_response_type_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="unknown provider 'openai'"):
        contextfold.read_response("openai", CHAT)
    with pytest.raises(ImportFormatError, match="expected openai ChatCompletion or its dict, got str"):
        contextfold.read_response("openai-chat", '{"object": "chat.completion"}')


def test_a_malformed_response_says_where() -> None:
    body = copy.deepcopy(CHAT)
    del body["choices"][0]["message"]["tool_calls"][1]["function"]["name"]
    with pytest.raises(ImportFormatError) as caught:
        contextfold.read_response("openai-chat", body)
    assert caught.value.location == "openai-chat response at choices[0].message.tool_calls[1].function"
    assert caught.value.reason == "missing field 'name'"

    body = copy.deepcopy(ANTHROPIC)
    body["content"][2]["type"] = "tool_use_v9"
    with pytest.raises(ImportFormatError, match=r"anthropic response at content\[2\]\.type: unsupported"):
        contextfold.read_response("anthropic", body)

    body = copy.deepcopy(RESPONSES)
    body["output"].append({"type": "function_call_output", "call_id": "call_a", "output": "x"})
    with pytest.raises(ImportFormatError, match=r"at output\[4\]: a response's output holds no"):
        contextfold.read_response("openai-responses", body)

    body = copy.deepcopy(ANTHROPIC)
    body["usage"]["output_tokens"] = -1
    with pytest.raises(ImportFormatError, match=r"at usage\.output_tokens"):
        contextfold.read_response("anthropic", body)


def test_thinking_without_its_signature_is_refused_here_not_at_the_append() -> None:
    body = copy.deepcopy(ANTHROPIC)
    del body["content"][0]["signature"]
    with pytest.raises(ImportFormatError, match="reasoning is refused: thinking block 1"):
        contextfold.read_response("anthropic", body)


def test_one_response_is_one_turn() -> None:
    body = copy.deepcopy(CHAT)
    body["choices"].append({**body["choices"][0], "index": 1})
    with pytest.raises(ImportFormatError, match=r"at choices: 2 choices"):
        contextfold.read_response("openai-chat", body)
    body = copy.deepcopy(GEMINI)
    body["candidates"].append(body["candidates"][0])
    with pytest.raises(ImportFormatError, match=r"at candidates: 2 candidates"):
        contextfold.read_response("gemini", body)


def test_a_response_with_nothing_to_record_is_refused() -> None:
    with pytest.raises(ImportFormatError, match=r"prompt was blocked \(SAFETY\)"):
        contextfold.read_response("gemini", {"promptFeedback": {"blockReason": "SAFETY"}})
    with pytest.raises(ImportFormatError, match=r"candidates\[0\]: the candidate holds no content "
                                                r"\(finishReason 'MALFORMED_FUNCTION_CALL'\)"):
        contextfold.read_response("gemini", {"candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL"}]})
    for status in ("queued", "in_progress", "failed"):
        body = {**RESPONSES, "status": status, "output": []}
        with pytest.raises(ImportFormatError, match=r"at status: the response"):
            contextfold.read_response("openai-responses", body)


# ---------------------------------------------------------------- cut at the output limit


def test_chat_cut_while_writing_a_call_is_refused_and_a_whole_one_read() -> None:
    body = copy.deepcopy(CHAT)
    body["choices"][0]["finish_reason"] = "length"
    body["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"] = "{\"path\":\"b."
    with pytest.raises(ImportFormatError, match=r"tool_calls\[1\]: the response stopped at its output "
                                                r"limit \(finish_reason 'length'\) while writing "
                                                r"call 'call_b'"):
        contextfold.read_response("openai-chat", sdk_object("openai-chat", body))
    del body["choices"][0]["message"]["tool_calls"][1]
    reply = contextfold.read_response("openai-chat", body)
    assert reply.stop_reason == "length" and [c.call_id for c in reply.calls] == ["call_a"]


def test_text_cut_at_the_limit_is_read_and_says_so() -> None:
    body = copy.deepcopy(CHAT)
    body["choices"][0]["finish_reason"] = "length"
    body["choices"][0]["message"].update(content="The answer is", tool_calls=None)
    assert only_response("openai-chat", body).text == "The answer is"
    assert contextfold.read_response("openai-chat", body).stop_reason == "length"


def test_anthropic_cut_in_its_last_tool_use_is_refused() -> None:
    body = copy.deepcopy(ANTHROPIC)
    body["stop_reason"] = "max_tokens"
    with pytest.raises(ImportFormatError, match=r"content\[4\]: .*\(stop_reason 'max_tokens'\) while writing "
                                                r"call 'toolu_b'"):
        contextfold.read_response("anthropic", sdk_object("anthropic", body))
    body["content"].append({"type": "text", "text": "And then"})
    assert contextfold.read_response("anthropic", body).stop_reason == "max_tokens"


def test_responses_cut_while_writing_a_call_is_refused() -> None:
    body = copy.deepcopy(RESPONSES)
    body.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    body["output"][3].update(arguments="{\"pa", status="incomplete")
    with pytest.raises(ImportFormatError, match=r"output\[3\]: .*max_output_tokens.* call 'call_b'"):
        contextfold.read_response("openai-responses", sdk_object("openai-responses", body))
    del body["output"][3]
    assert contextfold.read_response("openai-responses", body).stop_reason == "max_output_tokens"


def test_gemini_cut_in_its_last_function_call_is_refused() -> None:
    body = copy.deepcopy(GEMINI)
    body["candidates"][0]["finishReason"] = "MAX_TOKENS"
    with pytest.raises(ImportFormatError, match=r"parts\[2\]: .*'MAX_TOKENS'"):
        contextfold.read_response("gemini", sdk_object("gemini", body))


def test_the_docstring_example_runs() -> None:
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    (test,) = finder.find(provider_reply.read_response, "read_response", globs={})
    assert test.examples
    result = runner.run(test)
    assert result.failed == 0 and result.attempted == len(test.examples)


def test_reading_a_dict_imports_no_sdk() -> None:
    """The SDKs are the ``validate`` extra, not a dependency: an SDK object is told by the names
    of its classes, so reading a response's dict imports none of them."""
    code = ("import sys, contextfold\n"
            f"contextfold.read_response('anthropic', {ANTHROPIC!r})\n"
            "print(sorted(m for m in ('openai', 'anthropic', 'google.genai') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_chat_audio_reply_is_its_transcript() -> None:
    """With ``modalities: ["text", "audio"]`` the words are in ``message.audio.transcript`` and
    ``content`` is null: read from ``content`` alone the turn was empty, and rebuilt, the model was
    shown having said nothing. The audio's ``id`` is not kept: it expires (``expires_at``) and a
    request naming it later is refused; the transcript is what was said."""
    body = copy.deepcopy(CHAT)
    body["choices"][0]["finish_reason"] = "stop"
    body["choices"][0]["message"].update(content=None, tool_calls=None, audio={
        "id": "audio_1", "data": "UklGRg==", "expires_at": 1_700_000_000, "transcript": "Hello there."})
    for form in (body, sdk_object("openai-chat", body)):
        assert only_response("openai-chat", form).text == "Hello there."


def test_chat_legacy_function_calls_of_two_responses_have_two_ids() -> None:
    """A legacy ``function_call`` has no id: each response's was ``fc-0``, so two responses of a run
    named two calls alike (a runtime answering by id could not tell them apart, and a build
    aliased the second). It is named after the completion's own id, unique per response."""
    ids = []
    for n in (1, 2):
        body = copy.deepcopy(CHAT)
        body["id"] = f"chatcmpl-{n}"
        body["choices"][0]["finish_reason"] = "function_call"
        body["choices"][0]["message"].update(tool_calls=None, function_call={
            "name": "read", "arguments": "{\"path\":\"a.py\"}"})
        (call,) = contextfold.read_response("openai-chat", sdk_object("openai-chat", body)).calls
        ids.append(call.call_id)
    assert ids == ["fc-chatcmpl-1", "fc-chatcmpl-2"]

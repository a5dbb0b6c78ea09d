"""What a provider response reads to, and what goes back to it, is what the model said, in its order.

Each test reads a response shaped as the official SDK types hold it (the REST JSON and the SDK
object read the same: ``test_read_response``) and checks what is recorded or rendered.
"""

from __future__ import annotations

import base64
import copy
import warnings
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import contextfold
from contextfold import ModelResponse, TextBlock, ToolCall, ToolResult, UserInput
from contextfold.domain.events import OpenAIResponsesReasoning, RunStarted, TextBreak
from tests.unit.test_read_response import CHAT, GEMINI, sdk_object


def _gemini_without_ids(response_id: str | None, path: str) -> dict[str, Any]:
    body = copy.deepcopy(GEMINI)
    for part in body["candidates"][0]["content"]["parts"][1:]:
        del part["functionCall"]["id"]
    body["candidates"][0]["content"]["parts"][1]["functionCall"]["args"] = {"path": path}
    if response_id is None:
        del body["responseId"]
    else:
        body["responseId"] = response_id
    return body


def test_gemini_calls_without_ids_of_two_responses_have_two_ids() -> None:
    """Gemini before 3 names no call: every live response's calls were ``gemini-0-<part>``, so the
    second response's calls took the first's ids. They are named after the ``responseId``; a
    response without one after what it says; either way the same on a re-read."""
    first, second = _gemini_without_ids("resp-A", "a.py"), _gemini_without_ids("resp-B", "a.py")
    ids = [[c.call_id for c in contextfold.read_response("gemini", body).calls] for body in (first, second)]
    assert ids == [["gemini-resp-A-1", "gemini-resp-A-2"], ["gemini-resp-B-1", "gemini-resp-B-2"]]
    sdk_read = contextfold.read_response("gemini", sdk_object("gemini", second))
    assert [c.call_id for c in sdk_read.calls] == ids[1]
    anonymous = [_gemini_without_ids(None, path) for path in ("a.py", "c.py")]
    read = [[c.call_id for c in contextfold.read_response("gemini", body).calls] for body in anonymous]
    assert read[0] != read[1] and not set(read[0]) & set(read[1])
    assert read[0] == [c.call_id for c in contextfold.read_response("gemini", anonymous[0]).calls]
    assert all(i.startswith("gemini-r") for i in read[0])


def _built(provider: str, reply: contextfold.ProviderReply) -> dict[str, Any]:
    """The request built after ``reply`` and the answers to its calls, checked by the SDK's types."""
    from tests.integration.test_reasoning_traces import _build

    events = [RunStarted(), UserInput(content=(TextBlock(text="go"),)), *reply.events,
              *[ToolResult(call_id=c.call_id, content="ok") for c in reply.calls]]
    return _build(events, provider).request


def _responses(*output: dict[str, Any]) -> dict[str, Any]:
    return {"id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5", "status": "completed",
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "output": list(output)}


CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "ls", "arguments": "{}",
        "status": "completed"}
SEARCH = {"type": "web_search_call", "id": "ws_1", "status": "completed",
          "action": {"type": "search", "query": "contextfold"}}


def test_a_web_search_after_a_call_is_the_same_response_and_goes_back_where_it_stood() -> None:
    """``[function_call, web_search_call]`` is one response: it was read as two (the search item a
    response of its own, a turn without text or call), and the search went back after the call's
    output. Now one response, sent back as the output came, the call's output after it."""
    body = _responses(CALL, SEARCH)
    for form in (body, sdk_object("openai-responses", body)):
        reply = contextfold.read_response("openai-responses", form)
        (response,) = reply.events
        assert isinstance(response, ModelResponse)
        assert [c.call_id for c in response.tool_calls] == ["call_1"]
        assert isinstance(response.reasoning, OpenAIResponsesReasoning)
        assert [i.raw["id"] for i in response.reasoning.items] == ["ws_1"]
    items = _built("openai-responses", reply)["input"]
    assert [i.get("type") for i in items[1:]] == ["function_call", "web_search_call", "function_call_output"]


def _anthropic(*content: dict[str, Any], stop: str = "tool_use") -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": list(content), "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def _gemini(*parts: dict[str, Any]) -> dict[str, Any]:
    candidate = {"index": 0, "finishReason": "STOP", "content": {"role": "model", "parts": list(parts)}}
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash", "responseId": "resp-1"}


def _message(text: str, n: int) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}
CALLED_AND_SAID = {
    "anthropic": _anthropic({"type": "text", "text": "First."}, TOOL_USE,
                            {"type": "text", "text": "Second."}),
    "openai-responses": _responses(_message("First.", 1), CALL, _message("Second.", 2)),
    "gemini": _gemini({"text": "First."}, {"functionCall": {"id": "g1", "name": "ls", "args": {}}},
                      {"text": "Second."}),
}


def _said_in_order(provider: str, request: dict[str, Any]) -> list[str]:
    """The assistant turn's texts and calls as the request sends them, in order."""
    if provider == "anthropic":
        (turn,) = [m for m in request["messages"] if m["role"] == "assistant"]
        return [b.get("text") or b["type"] for b in turn["content"]]
    if provider == "gemini":
        (turn,) = [c for c in request["contents"] if c["role"] == "model"]
        return [p.get("text", "call") for p in turn["parts"]]
    return [i["content"] if i["type"] == "message" else i["type"] for i in request["input"][1:]]


@pytest.mark.parametrize("provider", list(CALLED_AND_SAID))
def test_text_written_after_a_call_goes_back_after_it(provider: str) -> None:
    """[text, call, text] went back with both texts first (the model shown saying before its call
    what it wrote after it). The text stays one (``response.text``, counted and searched as
    before); where its pieces stood is kept, and the request sends each there."""
    body = CALLED_AND_SAID[provider]
    for form in (body, sdk_object(provider, body)):
        reply = contextfold.read_response(provider, form)
        (response,) = reply.events
        assert isinstance(response, ModelResponse)
        assert response.text == ("First.\nSecond." if provider == "anthropic" else "First.Second.")
    request = _built(provider, reply)
    expected = {"anthropic": ["First.", "tool_use", "Second."],
                "openai-responses": ["First.", "function_call", "Second.", "function_call_output"],
                "gemini": ["First.", "call", "Second."]}[provider]
    assert _said_in_order(provider, request) == expected


def test_anthropic_text_after_a_server_tools_result_goes_back_after_it() -> None:
    """A web search answered in the turn: [text, server_tool_use, web_search_tool_result, text].
    The answer written from the results went back before the search."""
    body = _anthropic(
        {"type": "text", "text": "Searching."},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "text", "text": "Found nothing."}, stop="end_turn")
    reply = contextfold.read_response("anthropic", sdk_object("anthropic", body))
    request = _built("anthropic", reply)
    assert _said_in_order("anthropic", request) == ["Searching.", "server_tool_use", "web_search_tool_result",
                                                    "Found nothing."]


def test_a_response_whose_text_came_first_is_logged_as_before() -> None:
    """No breaks where the text stood before the calls: the event's JSON (and hash) is the one a
    release without them wrote, and the request is the same."""
    from tests.unit.test_read_response import ANTHROPIC

    (response,) = contextfold.read_response("anthropic", ANTHROPIC).events
    assert isinstance(response, ModelResponse)
    assert response.text_breaks == ()
    assert "text_breaks" not in response.model_dump(mode="json")


def test_chat_sends_the_text_before_the_calls_it_has_one_content_for() -> None:
    """Chat Completions' assistant message has one ``content`` and its ``tool_calls``, no order
    between them: a response logged with breaks goes to Chat with its text whole, before."""
    reply = contextfold.read_response("anthropic", CALLED_AND_SAID["anthropic"])
    (turn,) = [m for m in _built("openai-chat", reply)["messages"] if m["role"] == "assistant"]
    assert turn["content"] == "First.\nSecond." and [c["id"] for c in turn["tool_calls"]] == ["toolu_1"]


def test_breaks_that_do_not_cut_the_text_are_refused() -> None:
    call = ToolCall(call_id="c1", name="ls")
    with pytest.raises(ValidationError):
        ModelResponse(text="ab", tool_calls=(call,), text_breaks=(TextBreak(at=0, after=0),
                                                                  TextBreak(at=1, after=2)))
    with pytest.raises(ValidationError):
        ModelResponse(text="ab", tool_calls=(call,), text_breaks=(TextBreak(at=1, after=0),))
    ok = ModelResponse(text="a\nb", tool_calls=(call,),
                       text_breaks=(TextBreak(at=0, after=0), TextBreak(at=2, after=1, joiner="\n")))
    assert ModelResponse.model_validate_json(ok.model_dump_json()) == ok


class _Answer(BaseModel):
    x: int


def test_a_parse_helpers_object_reads_as_its_json_without_warnings() -> None:
    """``client.chat.completions.parse(response_format=Model)`` returns a ParsedChatCompletion
    whose ``parsed`` field its generic class types as None: its dump warned
    (PydanticSerializationUnexpectedValue) on every read. Read with the SDK's own client (a
    transport that answers locally), it reads as the REST JSON does, and warns of nothing;
    ``responses.parse``' ParsedResponse too."""
    import httpx2 as httpx  # the openai client's own
    import openai

    responses_body = _responses(_message('{"x": 1}', 1), CALL)
    chat_body = copy.deepcopy(CHAT)
    chat_body["choices"][0]["message"]["content"] = '{"x": 1}'

    def answer(request: httpx.Request) -> httpx.Response:
        responses = request.url.path.endswith("/responses")
        return httpx.Response(200, json=responses_body if responses else chat_body)

    client = openai.OpenAI(api_key="test", base_url="http://local.test/v1", max_retries=0,
                           http_client=httpx.Client(transport=httpx.MockTransport(answer)))
    parsed_chat = client.chat.completions.parse(model="gpt-4o", messages=[{"role": "user", "content": "go"}],
                                                response_format=_Answer)
    parsed_responses = client.responses.parse(model="gpt-5", input="go", text_format=_Answer)
    assert parsed_chat.choices[0].message.parsed == _Answer(x=1)
    for provider, parsed, body in (("openai-chat", parsed_chat, chat_body),
                                   ("openai-responses", parsed_responses, responses_body)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            reply = contextfold.read_response(provider, parsed)
        assert reply == contextfold.read_response(provider, body)


def _png(width: int, height: int) -> str:
    """A real PNG of noise (as incompressible as a photo), base64 as the tool returns it."""
    import io
    import os

    from PIL import Image

    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), os.urandom(width * height * 3)).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


def test_a_generated_image_sent_back_is_priced_as_an_image_not_as_its_base64() -> None:
    """An ``image_generation_call`` goes back with its image whole, base64: priced as the item's
    JSON text, a 256x256 image counted over 100,000 tokens for one image the model is shown, and
    the turn left every smaller build. Priced as an image now (gpt-4o's rule, as the fold prices
    any image: 256x256 high is 85 + 170 = 255), the rest of the item as text."""
    from contextfold.api import render_request
    from contextfold.domain.canonical import canonical_dumps
    from contextfold.domain.log import RecordedEvent
    from contextfold.domain.manifest import BuildConfig
    from contextfold.projections.builder import build_context
    from contextfold.projections.fold import fold
    from contextfold.projections.generated_images import generated_image_size
    from contextfold.projections.reasoning import reasoning_tokens
    from contextfold.projections.tokens import TokenCounter

    image = {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": _png(256, 256),
             "revised_prompt": "a cat"}
    assert generated_image_size(image) == (256, 256)
    assert generated_image_size({**image, "size": "1024x1536"}) == (1024, 1536)
    reply = contextfold.read_response("openai-responses", _responses(image, _message("Here it is.", 1)))
    (response,) = reply.events
    assert isinstance(response, ModelResponse) and response.reasoning is not None
    count = TokenCounter().count
    text = count(canonical_dumps({k: v for k, v in image.items() if k != "result"}))
    assert reasoning_tokens(response.reasoning, count) == text + 255
    assert count(canonical_dumps(image)) > 100_000  # what it was priced before
    events = [RunStarted(), UserInput(content=(TextBlock(text="draw a cat"),)), *reply.events,
              UserInput(content=(TextBlock(text="bigger"),))]
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    built = build_context(state, BuildConfig(provider="openai-responses", window=20_000, reserve=1_000),
                          render=render_request)
    assert any(i.get("type") == "image_generation_call" for i in built.request["input"])


def test_a_reasoning_item_before_a_message_written_after_a_call_goes_back_before_it() -> None:
    """[reasoning, message, function_call, reasoning, message]: the second reasoning item led to
    the message after the call. Read as one response, it stood after the last call and was
    refused as reasoning that led to nothing; it goes back before its message."""
    second = {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAAB2"}
    first = {**second, "id": "rs_1", "encrypted_content": "gAAAAB1"}
    body = _responses(first, _message("First.", 1), CALL, second, _message("Second.", 2))
    reply = contextfold.read_response("openai-responses", sdk_object("openai-responses", body))
    items = _built("openai-responses", reply)["input"][1:]
    assert [i.get("id") or i.get("content") or i["type"] for i in items] == [
        "rs_1", "First.", "function_call", "rs_2", "Second.", "function_call_output"]

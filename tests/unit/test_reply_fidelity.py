"""What a provider response reads to, and what goes back to it, is what the model said, in its order.

Each test reads a response shaped as the official SDK types hold it (the REST JSON and the SDK
object read the same: ``test_read_response``) and checks what is recorded or rendered.
"""

from __future__ import annotations

import copy
from typing import Any

import contextfold
from contextfold import ModelResponse, TextBlock, ToolResult, UserInput
from contextfold.domain.events import OpenAIResponsesReasoning, RunStarted
from tests.unit.test_read_response import GEMINI, sdk_object


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
    assert [c.call_id for c in contextfold.read_response("gemini", sdk_object("gemini", second)).calls] == ids[1]
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

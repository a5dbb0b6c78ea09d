"""Tools the provider runs itself (OpenAI Responses hosted tools: web and file search, code
interpreter, image generation, remote MCP) from a response or a history to the next request.

Their items are read (``read_response``, the Responses importer) into the response's verbatim
provider items, sent back as they came and where they stood to OpenAI Responses (every request
checked by the official SDK's request types: ``render_request`` validates), priced where sent,
left out of a build for another provider with the manifest saying so, and never a call for the
runtime to run or answer. Every fixture is built by the SDK's own models (``model_validate``,
then ``model_dump``): no field is guessed."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import contextfold
from contextfold.api import render_request
from contextfold.domain.canonical import canonical_dumps
from contextfold.domain.events import (
    AnyEvent,
    ModelResponse,
    OpenAIResponsesReasoning,
    ToolResult,
    ToolResultLost,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import parse
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold
from contextfold.projections.state import RunState
from contextfold.projections.tokens import get_counter

count = get_counter("cl100k_base").count

REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAABenc=="}
WEB_SEARCH = {"type": "web_search_call", "id": "ws_1", "status": "completed",
              "action": {"type": "search", "query": "pydantic 2 release date",
                         "sources": [{"type": "url", "url": "https://pydantic.dev/articles/pydantic-v2-final"}]}}
CODE = {"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "container_id": "cntr_1",
        "code": "print(sum(range(10)))", "outputs": [{"type": "logs", "logs": "45\n"}]}
FILE_SEARCH = {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["refund policy"],
               "results": [{"file_id": "file-1", "filename": "policy.md", "score": 0.9,
                            "text": "Refunds within 30 days."}]}
IMAGE = {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBORw0KGgo="}
MCP_TOOLS = {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "deepwiki",
             "tools": [{"name": "ask_question", "input_schema": {"type": "object"}}]}
MCP_CALL = {"type": "mcp_call", "id": "mcp_1", "server_label": "deepwiki", "name": "ask_question",
            "arguments": "{\"question\":\"What is MCP?\"}", "output": "A protocol.", "status": "completed"}
MCP_APPROVAL = {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "deepwiki",
                "name": "ask_question", "arguments": "{\"question\":\"Why?\"}"}


def _message(text: str, n: int = 1) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _response(*output: dict[str, Any], model: str = "gpt-5") -> dict[str, Any]:
    """A Responses API response with ``output``, as the SDK's ``Response`` model dumps it."""
    from openai.types.responses import Response

    body = {"id": "resp_1", "object": "response", "created_at": 1, "model": model, "status": "completed",
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "output": list(output),
            "usage": {"input_tokens": 100,
                      "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                      "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 8},
                      "total_tokens": 120}}
    return Response.model_validate(body).model_dump()


def _items(response: ModelResponse) -> list[dict[str, Any]]:
    assert isinstance(response.reasoning, OpenAIResponsesReasoning)
    return [item.raw for item in response.reasoning.items]


def _state(events: list[AnyEvent]) -> RunState:
    return fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])


def _build(events: list[AnyEvent], provider: str, model: str | None = None) -> BuildResult:
    return build_context(_state(events), BuildConfig(provider=provider, window=100_000, reserve=1000,
                                                     model=model),
                         render=render_request)


def _sdk_item(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` as the SDK's output item model reads and dumps it (its unset fields dropped)."""
    from openai.types.responses import ResponseOutputItem
    from pydantic import TypeAdapter

    model = TypeAdapter(ResponseOutputItem).validate_python(item)
    dumped: dict[str, Any] = model.model_dump(exclude_none=True)
    return dumped


HOSTED = [WEB_SEARCH, CODE, FILE_SEARCH, IMAGE, MCP_TOOLS, MCP_CALL, MCP_APPROVAL]


@pytest.mark.parametrize("item", HOSTED, ids=lambda item: item["type"])
def test_a_hosted_tools_item_is_read_verbatim_and_is_no_call_for_the_runtime(item: dict[str, Any]) -> None:
    body = _response(REASONING, item, _message("Done."))
    for form in (body, _sdk_response(body)):
        reply = contextfold.read_response("openai-responses", form)
        (response,) = reply.events
        assert isinstance(response, ModelResponse)
        assert response.text == "Done." and response.tool_calls == () and reply.calls == ()
        assert _items(response) == [REASONING, _sdk_item(item)]


def _sdk_response(body: dict[str, Any]) -> Any:
    from openai.types.responses import Response

    return Response.model_validate(body)


@pytest.mark.parametrize("item", HOSTED, ids=lambda item: item["type"])
def test_it_goes_back_to_openai_responses_verbatim_where_it_stood_and_validates(item: dict[str, Any]) -> None:
    reply = contextfold.read_response("openai-responses", _response(REASONING, item, _message("Done.")))
    events: list[AnyEvent] = [UserInput("Look it up."), *reply.events, UserInput("Thanks. And then?")]
    built = _build(events, "openai-responses", model="gpt-5")  # render_request checks the SDK types
    sent = built.request["input"]
    assert sent[1:4] == [REASONING, _sdk_item(item),
                         {"type": "message", "role": "assistant", "content": "Done."}]
    line = next(f for f in built.manifest.fragments if f.id == "e2")
    assert line.reasoning is not None and "sent verbatim" in line.reasoning
    # the estimate counts what is sent: the items' JSON is in the turn's tokens
    assert line.tokens >= sum(count(canonical_dumps(i)) for i in (REASONING, _sdk_item(item)))


def test_a_response_of_hosted_items_alone_is_a_turn_that_goes_back() -> None:
    """An image generation answers with its ``image_generation_call`` and no message."""
    reply = contextfold.read_response("openai-responses", _response(IMAGE))
    (response,) = reply.events
    assert isinstance(response, ModelResponse) and response.text == "" and reply.calls == ()
    built = _build([UserInput("Draw a cat."), response, UserInput("Bigger.")], "openai-responses")
    assert built.request["input"][1] == _sdk_item(IMAGE)
    assert [i.get("role") for i in built.request["input"]] == ["user", None, "user"]


def test_hosted_items_beside_function_calls_need_no_result_and_get_no_loss(tmp_path: Any) -> None:
    """Through a real SQLite store: the runtime answers the one function call it was given; the
    build appends no loss for the hosted call, and the request pairs every call."""
    body = _response(REASONING, WEB_SEARCH, _message("Saving it."),
                     {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "save",
                      "arguments": "{}", "status": "completed"})
    reply = contextfold.read_response("openai-responses", body)
    assert [c.call_id for c in reply.calls] == ["call_1"]
    with contextfold.open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        run = store.run("hosted")
        run.append(UserInput("Find and save it."))
        run.append(reply.events)
        run.append(*(ToolResult(call_id=c.call_id, content="saved") for c in reply.calls))
        built = run.build("openai-responses", window=100_000, reserve=1000)
        assert [i["type"] for i in built.request["input"]] == [
            "message", "reasoning", "web_search_call", "message", "function_call", "function_call_output"]
        assert not any(isinstance(r.event, ToolResultLost) for r in run.events())


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai-chat"])
def test_another_provider_is_sent_none_of_it_and_the_manifest_says_so(provider: str) -> None:
    """A hand-off: no fake call, no result; the reply's words (which cite the search) are sent,
    and the manifest names what was left out."""
    reply = contextfold.read_response("openai-responses", _response(REASONING, WEB_SEARCH, CODE,
                                                                    _message("Pydantic 2: 2023.")))
    built = _build([UserInput("When?"), *reply.events, UserInput("Sure?")], provider)
    text = json.dumps(built.request)
    assert "ws_1" not in text and "ci_1" not in text and "Pydantic 2: 2023." in text
    line = next(f for f in built.manifest.fragments if f.id == "e2")
    assert line.reasoning is not None and "not sent" in line.reasoning
    assert "web_search_call" in line.reasoning and "code_interpreter_call" in line.reasoning


def test_a_model_that_does_not_reason_still_gets_its_hosted_items_back_not_reasoning() -> None:
    """gpt-4.1 runs web search and code interpreter; OpenAI refuses reasoning items for it, not
    these."""
    reply = contextfold.read_response("openai-responses", _response(REASONING, CODE, _message("45.")))
    events: list[AnyEvent] = [UserInput("Sum 0..9."), *reply.events, UserInput("Times two?")]
    built = _build(events, "openai-responses", model="gpt-4.1")
    assert [i["type"] for i in built.request["input"]] == ["message", "code_interpreter_call", "message",
                                                           "message"]
    line = next(f for f in built.manifest.fragments if f.id == "e2")
    code_tokens = count(canonical_dumps(_sdk_item(CODE)))
    reasoning_tokens = count(canonical_dumps(REASONING))
    assert line.reasoning is not None and "1 reasoning item" in line.reasoning
    full = _build(events, "openai-responses", model="gpt-5")
    full_line = next(f for f in full.manifest.fragments if f.id == "e2")
    assert full_line.tokens - line.tokens == reasoning_tokens and line.tokens >= code_tokens


def test_a_history_with_hosted_items_imports_and_rebuilds_its_items() -> None:
    """The Responses importer reads a recorded ``input`` (a client that appended each
    ``response.output``): the MCP approval round trip and a search go back in their order."""
    from openai.types.responses import ResponseInputItemParam  # noqa: F401  (the shapes below are its)

    approval = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    history = [{"role": "user", "content": "Ask deepwiki why."},
               _sdk_item(MCP_TOOLS), _sdk_item(MCP_APPROVAL), approval, _sdk_item(MCP_CALL),
               _message("Because."),
               {"role": "user", "content": "Search it too."},
               REASONING, _sdk_item(WEB_SEARCH), _message("Found.", 2)]
    events = parse(json.dumps({"model": "gpt-5", "input": history}).encode(), format="openai-responses")
    responses = [e for e in events if isinstance(e, ModelResponse)]
    assert [r.text for r in responses] == ["Because.", "Found."]
    assert not any(isinstance(e, ToolResult) for e in events)
    built = _build(list(events[1:]), "openai-responses", model="gpt-5")
    assert [i["type"] for i in built.request["input"]] == [
        "message", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response", "mcp_call", "message",
        "message", "reasoning", "web_search_call", "message"]


def test_a_web_search_calls_action_keeps_no_unset_field_of_the_sdk() -> None:
    """The SDK object dumps ``queries: None`` inside a search's ``action``; the REST JSON has no
    such key, and the request type refuses a null there."""
    body = _response(REASONING, WEB_SEARCH, _message("Done."))
    assert body["output"][1]["action"]["queries"] is None
    (response,) = contextfold.read_response("openai-responses", copy.deepcopy(body)).events
    assert isinstance(response, ModelResponse)
    assert "queries" not in _items(response)[1]["action"]


# ---------------------------------------------------------------- Anthropic's server tools

SERVER_USE = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
              "input": {"query": "pydantic 2 release date"}}
SERVER_RESULT = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
    {"type": "web_search_result", "url": "https://pydantic.dev/articles/pydantic-v2-final",
     "title": "Pydantic V2 Is Here!", "encrypted_content": "EqgfCioIARgBIiQ3YTAw"}]}


def _message_of(*content: dict[str, Any], stop: str = "end_turn") -> dict[str, Any]:
    """An Anthropic Messages response with ``content``, as the SDK's ``Message`` model dumps it."""
    from anthropic.types import Message

    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": list(content), "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20}}
    return Message.model_validate(body).model_dump(exclude_none=True)


def _block(block: dict[str, Any]) -> dict[str, Any]:
    """``block`` as the SDK's response block model reads and dumps it."""
    from anthropic.types import ContentBlock
    from pydantic import TypeAdapter

    dumped: dict[str, Any] = TypeAdapter(ContentBlock).validate_python(block).model_dump(exclude_none=True)
    return dumped


def test_anthropic_gets_its_server_tools_blocks_back_in_the_turn_that_made_them() -> None:
    """Before: a ``tool_use`` the client never declared and a ``tool_result`` in the next user
    message (the cassettes' 9 unreproduced requests)."""
    reply = contextfold.read_response("anthropic", _message_of(SERVER_USE, SERVER_RESULT,
                                                               {"type": "text", "text": "2023."}))
    assert reply.calls == () and len(reply.events) == 1
    built = _build([UserInput("When?"), *reply.events, UserInput("Sure?")], "anthropic")
    turn = built.request["messages"][1]
    assert turn == {"role": "assistant", "content": [_block(SERVER_USE), _block(SERVER_RESULT),
                                                     {"type": "text", "text": "2023."}]}
    assert "tool_result" not in json.dumps(built.request["messages"][2])


def test_a_paused_turn_goes_back_as_it_is_and_its_continuation_joins_it(tmp_path: Any) -> None:
    """``pause_turn``: the server paused its loop with a search not run yet. The next request sends
    the turn back (nothing to answer, no loss appended), and the continuation's blocks follow the
    paused ones in the same assistant message."""
    paused = contextfold.read_response("anthropic", _message_of(SERVER_USE, stop="pause_turn"))
    assert paused.calls == () and paused.stop_reason == "pause_turn"
    with contextfold.open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        run = store.run("paused")
        run.append(UserInput("When was pydantic 2 released?"))
        run.append(paused.events)
        built = run.build("anthropic", window=100_000, reserve=1000)
        assert built.request["messages"][-1] == {"role": "assistant", "content": [
            {**_block(SERVER_USE), "cache_control": {"type": "ephemeral"}}]}
        done = contextfold.read_response("anthropic", _message_of(SERVER_RESULT,
                                                                  {"type": "text", "text": "2023."}))
        run.append(done.events)
        run.append(UserInput("Thanks."))
        again = run.build("anthropic", window=100_000, reserve=1000)
        assert again.request["messages"][1]["content"] == [_block(SERVER_USE), _block(SERVER_RESULT),
                                                           {"type": "text", "text": "2023."}]
        assert not any(isinstance(r.event, (ToolResultLost, ToolResult)) for r in run.events())


@pytest.mark.parametrize("provider", ["openai-responses", "gemini", "openai-chat"])
def test_anthropic_server_tools_are_no_fake_call_for_another_provider(provider: str) -> None:
    reply = contextfold.read_response("anthropic", _message_of(SERVER_USE, SERVER_RESULT,
                                                               {"type": "text", "text": "2023."}))
    built = _build([UserInput("When?"), *reply.events, UserInput("Sure?")], provider)
    text = json.dumps(built.request)
    assert "srvtoolu_1" not in text and "2023." in text
    line = next(f for f in built.manifest.fragments if f.id == "e2")
    assert line.reasoning == ("anthropic reasoning not sent: 1 server_tool_use block, "
                              f"1 web_search_tool_result block ({line_tokens(reply)} tokens) "
                              "that only anthropic can read")


def line_tokens(reply: Any) -> int:
    return sum(count(canonical_dumps(i.raw)) for i in reply.events[0].reasoning.items)

"""Importers: every format's mapping, parallel batches, and hostile inputs with their locations."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from contextfold.domain.errors import ImportFormatError
from contextfold.domain.events import (
    AnthropicReasoning,
    DocumentBlock,
    HistoryCompacted,
    ImageBlock,
    InstructionSet,
    MemoryRecalled,
    ModelResponse,
    PolicySet,
    RunStarted,
    RuntimeNote,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolsRegistered,
    UserInput,
    event_to_json,
)
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import FORMATS, detect_format, guess_format, iter_runs, parse
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.render import render
from tests.unit.test_fold import Log


def _b(value: Any) -> bytes:
    return json.dumps(value).encode()


def _lines(*values: Any) -> bytes:
    return "\n".join(json.dumps(v) for v in values).encode() + b"\n"


def _types(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


# ---------------------------------------------------------------- openai chat

CHAT = [
    {"role": "system", "content": "Be careful."},
    {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]},
    {"role": "user", "content": [{"type": "text", "text": "Look"},
                                 {"type": "image_url", "image_url": {"url": "https://x/a.png",
                                                                     "detail": "low"}}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"p\":1}"}},
        {"id": "c2", "type": "function", "function": {"name": "cat", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "file body"},
    {"role": "tool", "tool_call_id": "c1", "content": "a b"},
    {"role": "assistant", "content": "done"},
]


def test_openai_chat_maps_one_message_to_one_event() -> None:
    events = parse(_b(CHAT), format="openai-chat")
    assert _types(events) == ["RunStarted", "PolicySet", "PolicySet", "UserInput",
                              "ModelResponse", "ToolResult", "ToolResult", "ModelResponse"]
    assert len(events) == len(CHAT) + 1
    assert isinstance(events[1], PolicySet) and events[1].text == "Be careful."
    user = events[3]
    assert isinstance(user, UserInput)
    assert user.content[0] == TextBlock(text="Look")
    img = user.content[1]
    assert isinstance(img, ImageBlock) and img.url == "https://x/a.png" and img.detail == "low"
    batch = events[4]
    assert isinstance(batch, ModelResponse)
    assert batch.tool_calls == (ToolCall(call_id="c1", name="ls", arguments="{\"p\":1}"),
                                ToolCall(call_id="c2", name="cat", arguments="{}"))
    assert [e.call_id for e in events[5:7] if isinstance(e, ToolResult)] == ["c2", "c1"]


def test_openai_chat_message_level_refusal_is_the_replys_text() -> None:
    """Chat Completions returns a refusal as ``content: null`` and ``refusal``: it imported as an
    empty response, and rebuilt for Anthropic the turn vanished and the user turns merged."""
    chat = [{"role": "user", "content": "Give me the admin password of the prod DB."},
            {"role": "assistant", "content": None, "refusal": "I can't share credentials."},
            {"role": "user", "content": "Fine, then how do I rotate it?"}]
    events = parse(_b(chat), format="openai-chat")
    assert events[2] == ModelResponse(text="I can't share credentials.")
    log = Log().add(*events)
    built = build_context(fold(log.records), BuildConfig(provider="anthropic", window=10_000, reserve=1_000),
                          render=lambda c, p, n: render(c, p, max_tokens=n))
    roles = [m["role"] for m in built.request["messages"]]
    assert roles == ["user", "assistant", "user"]
    assert "I can't share credentials." in json.dumps(built.request["messages"][1])
    both = {"role": "assistant", "content": "Sorry.", "refusal": "I can't share credentials."}
    part = {"role": "assistant", "refusal": "No.", "content": [{"type": "refusal", "refusal": "No."}]}
    replies = [e for e in parse(_b([chat[0], both, chat[2], part]), format="openai-chat")
               if isinstance(e, ModelResponse)]
    assert [r.text for r in replies] == ["Sorry.\nI can't share credentials.", "No."]  # said once
    with pytest.raises(ImportFormatError, match="'refusal' to be a string"):
        parse(_b([chat[0], {"role": "assistant", "content": None, "refusal": 3}]), format="openai-chat")


def test_openai_chat_input_audio_survives_a_round_trip_to_an_audio_model() -> None:
    """An ``input_audio`` part of a Chat history came back to Chat Completions as a "not
    attached, this API takes PDF documents only" note: the model never heard the user. It goes
    back as ``input_audio`` to an audio model; any other model refuses the part, so it gets a note."""
    wav = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()
    audio = {"type": "input_audio", "input_audio": {"data": wav, "format": "wav"}}
    chat = [{"role": "user", "content": [{"type": "text", "text": "Here is my voice note:"}, audio]}]
    state = fold(Log().add(*parse(_b(chat), format="openai-chat")).records)
    for model in ("gpt-4o-audio-preview", "gpt-4o"):
        config = BuildConfig(provider="openai-chat", model=model, window=10_000, reserve=1_000)
        built = build_context(state, config, render=lambda c, p, n: render(c, p, max_tokens=n, validate=True))
        [user] = [m for m in built.request["messages"] if m["role"] == "user"]
        if model == "gpt-4o":
            assert "takes no audio" in user["content"][-1]["text"] and wav not in json.dumps(user)
        else:
            assert user["content"][-1] == {"type": "input_audio",
                                           "input_audio": {"data": wav, "format": "wav"}}


def test_openai_chat_object_with_messages_and_jsonl_agree() -> None:
    as_obj = parse(_b({"model": "gpt-4o", "messages": CHAT}), format="openai-chat")
    as_jsonl = parse(_lines(*CHAT), format="openai-chat")
    assert isinstance(as_obj[0], RunStarted) and as_obj[0].model == "gpt-4o"
    assert as_obj[1:] == as_jsonl[1:]


def test_openai_chat_legacy_function_call_gets_stable_synthesized_id() -> None:
    msgs = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None,
             "function_call": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
            {"role": "function", "name": "weather", "content": "rain"},
            {"role": "assistant", "content": "It rains."}]
    events = parse(_b(msgs), format="openai-chat")
    call = events[2]
    assert isinstance(call, ModelResponse)
    assert call.tool_calls == (ToolCall(call_id="fc-1", name="weather",
                                        arguments="{\"city\":\"Oslo\"}"),)
    result = events[3]
    assert isinstance(result, ToolResult) and result.call_id == "fc-1" and result.content == "rain"
    assert parse(_b(msgs), format="openai-chat") == events


def test_openai_chat_reused_call_id_after_answer_is_accepted() -> None:
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    msgs = [call, {"role": "tool", "tool_call_id": "call_1", "content": "x"},
            call, {"role": "tool", "tool_call_id": "call_1", "content": "y"}]
    assert len(parse(_b(msgs), format="openai-chat")) == 5


def test_multi_run_file_yields_one_run_per_record() -> None:
    data = _b([{"task_id": 3, "trial": 0, "traj": CHAT}, {"task_id": 3, "trial": 1, "traj": CHAT}])
    runs = list(iter_runs(data, format="openai-chat", source="tau.json"))
    assert [s for s, _ in runs] == ["task-3-trial-0", "task-3-trial-1"]
    assert all(len(ev) == len(CHAT) + 1 for _, ev in runs)
    with pytest.raises(ImportFormatError, match="2 runs"):
        parse(data, format="openai-chat")
    single = list(iter_runs(_b(CHAT), format="openai-chat"))
    assert [s for s, _ in single] == [""]


# ---------------------------------------------------------------- errors and locations

def _located(data: bytes, fmt: str, match: str) -> ImportFormatError:
    with pytest.raises(ImportFormatError, match=match) as info:
        parse(data, format=fmt, source="in.json")
    return info.value


def test_unknown_role_names_the_message_line() -> None:
    text = json.dumps([*CHAT[:3], {"role": "wizard", "content": "x"}], indent=1).encode()
    err = _located(text, "openai-chat", "unknown role 'wizard'")
    line = text.decode().splitlines()[int(err.location.split(":")[1]) - 1]
    assert '"role": "wizard"' in line


def test_jsonl_errors_name_the_line() -> None:
    data = _lines(*CHAT[:3]) + b'{"role": "user"}\n'
    err = _located(data, "openai-chat", "missing field 'content'")
    assert err.location == "in.json:4"
    data = _lines(*CHAT[:3]) + b'{"role": "user", "content": 5}\n'
    assert _located(data, "openai-chat", "content").location == "in.json:4"


def test_result_for_unknown_call_is_a_located_pairing_error() -> None:
    data = _lines(CHAT[2], {"role": "tool", "tool_call_id": "nope", "content": ""})
    err = _located(data, "openai-chat", "no open tool call with id 'nope'")
    assert err.location == "in.json:2"


def test_second_result_for_one_call_is_refused() -> None:
    data = _lines(*CHAT[3:6], {"role": "tool", "tool_call_id": "c1", "content": "again"})
    assert _located(data, "openai-chat", "already has a result").location == "in.json:4"


def test_truncated_json_reports_the_line() -> None:
    text = json.dumps(CHAT, indent=1).encode()
    cut = text[: len(text) // 2]
    err = _located(cut, "openai-chat", "invalid JSON")
    newlines = cut.count(b"\n")
    assert err.location == f"in.json:{newlines + 1}"


def test_truncated_jsonl_line() -> None:
    data = _lines(*CHAT[:3]) + b'{"role": "user", "cont'
    assert _located(data, "openai-chat", "invalid JSON").location == "in.json:4"


def test_invalid_utf8_reports_line_of_bad_byte() -> None:
    data = _lines(*CHAT[:2]) + b'{"role": "user", "content": "caf\xe9"}\n'
    err = _located(data, "openai-chat", "invalid UTF-8 byte 0xe9")
    assert err.location == "in.json:3"


@pytest.mark.parametrize("depth", [250, 100_000])
def test_deep_nesting_is_refused_with_its_line(depth: int) -> None:
    nested = "[" * depth + "]" * depth
    data = ('[{"role": "user", "content": "hi"},\n {"role": "tool", "x": ' + nested + "}]").encode()
    err = _located(data, "openai-chat", "nested deeper than 200")
    assert err.location == "in.json:2"


def test_empty_and_unknown_format() -> None:
    _located(b"  \n", "openai-chat", "empty input")
    _located(_b(CHAT), "yaml", "unknown format")


def test_fifty_megabyte_tool_output_parses() -> None:
    big = "x" * (50 * 1024 * 1024)
    data = _lines(CHAT[3], {"role": "tool", "tool_call_id": "c1", "content": big},
                  {"role": "tool", "tool_call_id": "c2", "content": "ok"})
    events = parse(data, format="openai-chat")
    assert isinstance(events[2], ToolResult) and len(events[2].content) == len(big)


# ---------------------------------------------------------------- anthropic

ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "system": [{"type": "text", "text": "Rules."}],
    "messages": [
        {"role": "user", "content": "Check both."},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "toolu_2", "name": "run", "input": {"cmd": "pytest"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "text", "text": "A"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "iVBO"}}]},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "1 failed",
             "is_error": True},
            {"type": "text", "text": "and hurry"}]},
        {"role": "assistant", "content": "Fixed."},
    ],
}


def test_anthropic_mapping_and_parallel_results() -> None:
    events = parse(_b(ANTHROPIC), format="anthropic")
    assert _types(events) == ["RunStarted", "PolicySet", "UserInput", "ModelResponse",
                              "ToolResult", "ToolResult", "UserInput", "ModelResponse"]
    assert isinstance(events[0], RunStarted) and events[0].model == "claude-sonnet-4-5"
    resp = events[3]
    assert isinstance(resp, ModelResponse) and resp.text == "Checking."  # thinking dropped
    assert [c.call_id for c in resp.tool_calls] == ["toolu_1", "toolu_2"]
    assert resp.tool_calls[0].arguments == '{"path":"a"}'
    r1, r2 = events[4], events[5]
    assert isinstance(r1, ToolResult) and isinstance(r2, ToolResult)
    assert r1.content == "A" and not r1.is_error
    assert r1.blocks == (ImageBlock(url="data:image/png;base64,iVBO", media_type="image/png"),)
    assert r2.is_error and r2.content == "1 failed"


def test_anthropic_compaction_block_is_a_summary_not_the_replys_words() -> None:
    """A ``compaction`` block (the server's summary; the API drops what precedes it) was glued
    onto the reply: the model was shown having said the summary, and its reply was altered."""
    summary = "The user pasted filler text and asked me to say hello.\n\nNext step: say hello."
    body = {"system": "Be brief.", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Remember this. Now say hello."}]},
        {"role": "assistant", "content": [{"type": "compaction", "content": summary},
                                          {"type": "text", "text": "Hello! \U0001f44b"}]},
        {"role": "user", "content": [{"type": "text", "text": "What did I ask you to do?"}]}]}
    events = parse(_b(body), format="anthropic")
    assert _types(events) == ["RunStarted", "PolicySet", "UserInput", "HistoryCompacted", "ModelResponse",
                              "UserInput"]
    compacted, reply = events[3], events[4]
    assert isinstance(compacted, HistoryCompacted)
    assert (compacted.covers_from, compacted.covers_to, compacted.summarizer) == (3, 3, "anthropic")
    assert compacted.summary.inferences == (summary,)
    assert isinstance(reply, ModelResponse) and reply.text == "Hello! \U0001f44b"
    built = build_context(fold(Log().add(*events).records),
                          BuildConfig(provider="anthropic", window=10_000, reserve=1_000),
                          render=lambda c, p, n: render(c, p, max_tokens=n, validate=True))
    said = [b["text"] for m in built.request["messages"] if m["role"] == "assistant" for b in m["content"]]
    assert said == ["Hello! \U0001f44b"]
    assert "say hello." in json.dumps(built.request["messages"][0])  # the summary, as a data block
    # nothing before it in this body: no cover, a note naming the server's summary
    alone = parse(_b({"messages": body["messages"][1:]}), format="anthropic")
    assert _types(alone) == ["RunStarted", "RuntimeNote", "ModelResponse", "UserInput"]
    note = alone[1]
    assert isinstance(note, RuntimeNote) and note.source_ref == "anthropic://compaction"
    assert note.text.startswith("Summary of the earlier conversation, by the server's compaction:")


def test_anthropic_server_tool_is_kept_verbatim_in_place_and_is_no_call() -> None:
    """A server tool's use and result go back to Anthropic as they came, inside the turn (the API
    pairs them there), and are no call for the runtime: no ToolCall, no ToolResult."""
    served: list[dict[str, Any]] = [
        {"type": "server_tool_use", "id": "srv_1", "name": "bash_code_execution",
         "input": {"command": "false"}},
        {"type": "bash_code_execution_tool_result", "tool_use_id": "srv_1",
         "content": {"type": "bash_code_execution_result", "return_code": 1,
                     "stdout": "", "stderr": "boom"}}]
    body = {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "sum it"},
                                     {"type": "container_upload", "file_id": "file_9"}]},
        {"role": "assistant", "content": [*served, {"type": "text", "text": "It failed."}]}]}
    events = parse(_b(body), format="anthropic")
    assert _types(events) == ["RunStarted", "UserInput", "ModelResponse"]
    user = events[1]
    assert isinstance(user, UserInput) and "file_9" in user.text
    response = events[2]
    assert isinstance(response, ModelResponse) and response.tool_calls == () and response.text == "It failed."
    assert isinstance(response.reasoning, AnthropicReasoning)
    assert [i.raw for i in response.reasoning.items] == served


def test_anthropic_document_url_and_bad_role() -> None:
    body = [{"role": "user", "content": [
        {"type": "document", "source": {"type": "url", "url": "https://x/d.pdf"}}]}]
    user = parse(_b(body), format="anthropic")[1]
    assert isinstance(user, UserInput)
    (doc,) = user.content
    assert isinstance(doc, DocumentBlock) and doc.url == "https://x/d.pdf"
    bad = json.dumps([{"role": "user", "content": "x"}, {"role": "system", "content": "y"}],
                     indent=1).encode()
    assert _located(bad, "anthropic", "unknown role 'system'").location == "in.json:7"


@pytest.mark.parametrize(("url", "kind", "expected"), [
    ("https://x/a/ant.JPG?w=2#top", "image", "image/jpeg"),
    ("https://x/shot.webp", "image", "image/webp"),
    ("https://x/render?id=3.png", "image", "image/*"),  # the query names no file
    ("https://x.png/render", "image", "image/*"),  # nor does the host
    ("https://x/spec.pdf", "image", "image/*"),  # an image named .pdf: not guessed
    ("https://x/d.pdf", "document", "application/pdf"),
    ("https://x/d", "document", "application/octet-stream"),
])
def test_a_media_url_imported_without_a_type_gets_the_one_its_extension_names(
        url: str, kind: str, expected: str) -> None:
    """Neither an OpenAI ``image_url`` nor an Anthropic ``url`` source carries a type, and ``image/*``
    went to Gemini as a ``fileData`` type, which it refuses."""
    body = [{"role": "user", "content": [{"type": kind, "source": {"type": "url", "url": url}}]}]
    user = parse(_b(body), format="anthropic")[1]
    assert isinstance(user, UserInput)
    (block,) = user.content
    assert isinstance(block, ImageBlock | DocumentBlock) and block.media_type == expected


# ---------------------------------------------------------------- openai responses

def test_openai_responses_items_group_into_turns() -> None:
    body = {"model": "gpt-5", "instructions": "Be brief.", "input": [
        {"role": "user", "content": "refund?"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "zz"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Looking.", "annotations": []}]},
        {"type": "function_call", "call_id": "call_a", "name": "lookup", "arguments": "{}"},
        {"type": "function_call", "call_id": "call_b", "name": "lookup", "arguments": "{\"o\":2}"},
        {"type": "function_call_output", "call_id": "call_b", "output": "ok b"},
        {"type": "function_call_output", "call_id": "call_a", "output": "ok a"},
        {"type": "additional_tools", "role": "developer", "tools": [
            {"type": "function", "name": "refund", "description": "Refund.",
             "parameters": {"type": "object", "properties": {}}}]},
        {"role": "assistant", "content": "Done."}]}
    events = parse(_b(body), format="openai-responses")
    assert _types(events) == ["RunStarted", "PolicySet", "UserInput", "ModelResponse",
                              "ToolResult", "ToolResult", "ToolsRegistered", "ModelResponse"]
    turn = events[3]
    assert isinstance(turn, ModelResponse) and turn.text == "Looking."
    assert [c.call_id for c in turn.tool_calls] == ["call_a", "call_b"]
    tools = events[6]
    assert isinstance(tools, ToolsRegistered) and tools.tools[0].name == "refund"


def test_openai_responses_tool_output_images_and_files_become_blocks() -> None:
    """A ``function_call_output`` holding an ``input_image`` part was kept as the compact JSON of
    its parts: the screenshot's base64 became ~115,000 tokens of text, and no image."""
    body = {"input": [
        {"role": "user", "content": "take a screenshot"},
        {"type": "function_call", "call_id": "c1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [
            {"type": "input_text", "text": "screenshot"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
            {"type": "input_file", "filename": "r.pdf", "file_data": "JVBERg=="}]},
        {"type": "function_call", "call_id": "c2", "name": "odd", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "other", "x": 1}]}]}
    results = [e for e in parse(_b(body), format="openai-responses") if isinstance(e, ToolResult)]
    shot, odd = results
    assert shot.content == "screenshot"
    assert [type(b).__name__ for b in shot.blocks] == ["ImageBlock", "DocumentBlock"]
    assert isinstance(shot.blocks[0], ImageBlock) and shot.blocks[0].url == "data:image/png;base64,AAAA"
    assert odd.content == '[{"type":"other","x":1}]' and odd.blocks == ()  # kept as JSON, not lost


def test_openai_responses_continuation_needs_full_items() -> None:
    body = {"previous_response_id": "resp_1",
            "input": [{"type": "function_call_output", "call_id": "c9", "output": "x"}]}
    _located(_b(body), "openai-responses", "previous_response_id")


# ---------------------------------------------------------------- gemini

def test_gemini_without_ids_synthesizes_and_pairs_by_name() -> None:
    body = {"systemInstruction": {"parts": [{"text": "Sys."}]}, "contents": [
        {"role": "user", "parts": [{"text": "weather in A and B"}]},
        {"role": "model", "parts": [
            {"functionCall": {"name": "weather", "args": {"city": "A"}}},
            {"functionCall": {"name": "weather", "args": {"city": "B"}}},
            {"functionCall": {"name": "time", "args": {}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "time", "response": {"result": "noon"}}},
            {"functionResponse": {"name": "weather", "response": {"result": "sun"}}},
            {"functionResponse": {"name": "weather", "response": {"error": "down"}}}]},
        {"role": "model", "parts": [{"text": "Sun in A.", "thoughtSignature": "x"}]}]}
    events = parse(_b(body), format="gemini")
    assert _types(events) == ["RunStarted", "PolicySet", "UserInput", "ModelResponse",
                              "ToolResult", "ToolResult", "ToolResult", "ModelResponse"]
    resp = events[3]
    assert isinstance(resp, ModelResponse)
    assert [c.call_id for c in resp.tool_calls] == ["gemini-1-0", "gemini-1-1", "gemini-1-2"]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [(r.call_id, r.is_error) for r in results] == [
        ("gemini-1-2", False), ("gemini-1-0", False), ("gemini-1-1", True)]
    assert parse(_b(body), format="gemini") == events


def test_gemini_keeps_ids_and_inline_data() -> None:
    body = {"contents": [
        {"role": "user", "parts": [{"inline_data": {"mime_type": "image/jpeg", "data": "AA"}}]},
        {"role": "model", "parts": [{"functionCall": {"id": "g1", "name": "f", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"id": "g1", "name": "f",
                                                          "response": {"r": 1}}}]}]}
    events = parse(_b(body), format="gemini")
    user = events[1]
    assert isinstance(user, UserInput)
    img = user.content[0]
    assert isinstance(img, ImageBlock) and img.url == "data:image/jpeg;base64,AA=="
    assert isinstance(events[3], ToolResult) and events[3].call_id == "g1"
    bad = {"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "f",
                                                                          "response": {}}}]}]}
    _located(_b(bad), "gemini", "answers no open functionCall")


def test_gemini_function_response_parts_become_blocks() -> None:
    """``functionResponse.parts`` (a multimodal tool result's images) were dropped without a word;
    a part of no known kind is now an import error naming it, not a silent loss."""
    def body(parts: list[Any]) -> dict[str, Any]:
        return {"contents": [
            {"role": "user", "parts": [{"text": "shoot"}]},
            {"role": "model", "parts": [{"functionCall": {"id": "g1", "name": "shot", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {
                "id": "g1", "name": "shot", "response": {"output": "here"}, "parts": parts}}]}]}

    events = parse(_b(body([{"inlineData": {"mimeType": "image/png", "data": "AAAA"}}])), format="gemini")
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.content == "here"
    assert len(result.blocks) == 1 and isinstance(result.blocks[0], ImageBlock)
    assert result.blocks[0].url == "data:image/png;base64,AAAA"
    _located(_b(body([{"videoMetadata": {}}])), "gemini", "unsupported function response part")


def test_gemini_inline_data_in_url_safe_unpadded_base64_is_stored_standard() -> None:
    """protobuf JSON ``bytes`` may be URL-safe and unpadded (pydantic-ai's recorded Gemini
    requests are): the data: URL kept them, and the store refused to decode it."""
    raw = bytes([0xFB, 0xEF, 0xFF, 0x00, 0x3E])
    body = {"contents": [{"role": "user", "parts": [
        {"text": "the file:"},
        {"inlineData": {"mimeType": "audio/mpeg", "data": base64.urlsafe_b64encode(raw).decode()}},
        {"inlineData": {"mimeType": "image/png",
                        "data": base64.urlsafe_b64encode(raw).decode().rstrip("=")}}]}]}
    user = parse(_b(body), format="gemini")[1]
    assert isinstance(user, UserInput)
    urls = [b.url for b in user.content if isinstance(b, DocumentBlock | ImageBlock)]
    assert len(urls) == 2
    for url in urls:
        assert url is not None
        assert base64.b64decode(url.split(",", 1)[1], validate=True) == raw


# ---------------------------------------------------------------- openhands

def _oh_action(eid: int, call_id: str, resp_id: str, total: int, cmd: str) -> dict[str, Any]:
    return {"id": eid, "source": "agent", "action": "run", "message": f"Running {cmd}",
            "args": {"command": cmd, "thought": "run both"},
            "tool_call_metadata": {
                "function_name": "execute_bash", "tool_call_id": call_id,
                "total_calls_in_response": total,
                "model_response": {"id": resp_id, "model": "m1", "choices": [{"message": {
                    "content": "Running both.", "tool_calls": [
                        {"id": "t1", "function": {"name": "execute_bash",
                                                  "arguments": "{\"command\": \"ls\"}"}},
                        {"id": "t2", "function": {"name": "execute_bash",
                                                  "arguments": "{\"command\": \"make\"}"}}]}}]}}}


def _oh_obs(eid: int, cause: int, call_id: str, kind: str, content: str,
            code: int | None) -> dict[str, Any]:
    extras: dict[str, Any] = {"metadata": {"exit_code": code}} if code is not None else {}
    return {"id": eid, "source": "agent", "observation": kind, "cause": cause,
            "content": content, "extras": extras,
            "tool_call_metadata": {"function_name": "x", "tool_call_id": call_id,
                                   "total_calls_in_response": 2}}


OPENHANDS = [
    {"id": 0, "source": "agent", "action": "system", "args": {"content": "You are OpenHands."}},
    {"id": 1, "source": "user", "action": "message", "args": {"content": "Fix it",
                                                              "image_urls": ["https://x/i.png"]}},
    {"id": 2, "source": "user", "action": "recall", "args": {}},
    {"id": 3, "source": "environment", "observation": "recall", "cause": 2, "content": "",
     "extras": {"repo_instructions": "Use make.", "repo_name": "r",
                "microagent_knowledge": [{"name": "gh", "content": "Use gh."}]}},
    _oh_action(4, "t1", "resp-1", 2, "ls"),
    _oh_obs(5, 4, "t1", "run", "a b", 0),
    _oh_action(6, "t2", "resp-1", 2, "make"),
    _oh_obs(7, 6, "t2", "run", "error: x", 2),
    {"id": 8, "source": "environment", "observation": "agent_state_changed", "content": "",
     "extras": {}},
    {"id": 9, "source": "agent", "action": "finish", "args": {"final_thought": "Gave up."}},
]


def test_openhands_parallel_batch_is_one_response() -> None:
    events = parse(_b(OPENHANDS), format="openhands")
    assert _types(events) == ["RunStarted", "PolicySet", "UserInput", "PolicySet", "InstructionSet",
                              "MemoryRecalled", "ModelResponse", "ToolResult", "ToolResult",
                              "ModelResponse"]
    assert isinstance(events[0], RunStarted) and events[0].model == "m1"
    assert isinstance(events[4], InstructionSet) and events[4].text == "Use make."
    assert isinstance(events[5], MemoryRecalled) and events[5].memory_id == "gh"
    batch = events[6]
    assert isinstance(batch, ModelResponse) and batch.text == "Running both."
    assert batch.tool_calls == (
        ToolCall(call_id="t1", name="execute_bash", arguments="{\"command\": \"ls\"}"),
        ToolCall(call_id="t2", name="execute_bash", arguments="{\"command\": \"make\"}"))
    ok, failed = events[7], events[8]
    assert isinstance(ok, ToolResult) and ok.exit_code == 0 and not ok.is_error
    assert isinstance(failed, ToolResult) and failed.exit_code == 2 and failed.is_error
    assert isinstance(events[9], ModelResponse) and events[9].text == "Gave up."


def test_openhands_workspace_context_keeps_what_the_runtime_told_the_model() -> None:
    """A workspace-context recall, rendered for the model by OpenHands' ``additional_info.j2``:
    the repository, the hosts and ports, an operator's instruction, the secrets' descriptions and
    the date were dropped (only repository instructions and microagents were kept)."""
    recall = {"id": 3, "source": "environment", "observation": "recall", "cause": 2,
              "content": "Added workspace context",
              "extras": {"recall_type": "workspace_context", "repo_name": "acme/calc",
                         "repo_directory": "calc", "repo_instructions": "Use make.",
                         "runtime_hosts": {"http://localhost:54079": 54079},
                         "additional_agent_instructions": "Never push to the remote.",
                         "custom_secrets_descriptions": {"NPM_TOKEN": "publishes the package"},
                         "date": "2025-04-30", "microagent_knowledge": []}}
    events = parse(_b([*OPENHANDS[:3], recall]), format="openhands")
    assert _types(events) == ["RunStarted", "PolicySet", "UserInput", "PolicySet", "InstructionSet"]
    context = events[3]
    assert isinstance(context, PolicySet) and context.source_ref == "openhands://workspace_context"
    assert context.text == "\n".join([
        "<REPOSITORY_INFO>",
        "At the user's request, repository acme/calc has been cloned to the current working directory calc.",
        "</REPOSITORY_INFO>",
        "<RUNTIME_INFORMATION>",
        "The user has access to the following hosts for accessing a web application,",
        "each of which has a corresponding port:",
        "* http://localhost:54079 (port 54079)",
        "When starting a web server, use the corresponding ports. You should also",
        "set any options to allow iframes and CORS requests, and allow the server to",
        "be accessed from any host (e.g. 0.0.0.0).",
        "For example, if you are using vite.config.js, you should set server.host and "
        "server.allowedHosts to true",
        "Never push to the remote.",
        "<CUSTOM_SECRETS>",
        "You are have access to the following environment variables",  # (the template's words)
        "* $**NPM_TOKEN**: publishes the package",
        "</CUSTOM_SECRETS>",
        "Today's date is 2025-04-30 (UTC).",
        "</RUNTIME_INFORMATION>"])
    assert isinstance(events[4], InstructionSet) and events[4].text == "Use make."
    knowledge_only = {**recall, "extras": {"recall_type": "knowledge",
                                           "microagent_knowledge": [{"name": "gh", "content": "Use gh."}]}}
    assert _types(parse(_b([*OPENHANDS[:3], knowledge_only]), format="openhands"))[3:] == ["MemoryRecalled"]


def test_openhands_file_editor_errors_are_error_results() -> None:
    """OpenHands' file editor reports a refused command as an ``edit`` (or ``read``) observation
    whose content starts with "ERROR:" and a newline, and no flag (23 of the 32 edit observations
    in the Multi-SWE-bench traces). They were imported as successes, so a summary listed them
    under "reported success by the tool"."""
    refused = [_oh_action(4, "t1", "resp-1", 1, "ls"),
               _oh_obs(5, 4, "t1", "edit", "ERROR:\nNo replacement was performed. Multiple occurrences of "
                       "old_str `return x;` in lines [3, 9]. Please ensure it is unique.", None)]
    results = [e for e in parse(_b([*OPENHANDS[:2], *refused]), format="openhands")
               if isinstance(e, ToolResult)]
    assert [(r.is_error, r.origin) for r in results] == [(True, "workspace")]
    for kind, content in (("edit", "The file x.c has been edited. ERROR:\n was the old text"),
                          ("edit", "ERROR: not the editor's form (no newline)"),
                          ("run", "ERROR:\nprinted by the program")):
        obs = _oh_obs(5, 4, "t1", kind, content, 0 if kind == "run" else None)
        result = next(e for e in parse(_b([*OPENHANDS[:2], refused[0], obs]), format="openhands")
                      if isinstance(e, ToolResult))
        assert not result.is_error, (kind, content)


def test_openhands_old_stream_without_ids() -> None:
    record = {"history": [
        {"content": "Add a licence", "action": "message"},
        {"command": "touch LICENSE", "thought": "create it", "action": "run"},
        {"content": "", "command": "touch LICENSE", "exit_code": 0, "observation": "run"},
        {"path": "LICENSE", "thought": "check", "action": "read"},
        {"content": "MIT", "observation": "read"},
        {"outputs": {}, "thought": "Done.", "action": "finish"}]}
    runs = list(iter_runs(_lines(record, record), format="openhands", source="r.jsonl"))
    assert [s for s, _ in runs] == ["line-1", "line-2"]
    events = runs[0][1]
    assert _types(events) == ["RunStarted", "UserInput", "ModelResponse", "ToolResult",
                              "ModelResponse", "ToolResult", "ModelResponse"]
    first = events[2]
    assert isinstance(first, ModelResponse)
    assert first.tool_calls == (ToolCall(call_id="oh-1", name="run",
                                         arguments="{\"command\":\"touch LICENSE\"}"),)
    read = events[5]
    assert isinstance(read, ToolResult) and read.call_id == "oh-3" and read.origin == "workspace"


def test_openhands_old_flat_stream_keeps_the_task_text() -> None:
    """A 2024 stream's events are flat (no ``args``), and the user's task is the message's own
    ``content``; it was dropped with the observation keys, so every rebuilt request opened with an
    empty user message."""
    history = [
        {"content": "Please fix the following issue.\nAdd an MIT license.", "images_urls": None,
         "wait_for_response": False, "action": "message", "action_risk": None},
        {"command": "touch LICENSE", "thought": "create it", "keep_prompt": True, "action": "run",
         "is_confirmed": "confirmed", "action_risk": None},
        {"content": "", "command_id": -1, "command": "touch LICENSE", "exit_code": 0,
         "observation": "run"},
        {"outputs": {}, "thought": "Added the licence.", "action": "finish"}]
    events = parse(_b({"history": history}), format="openhands")
    assert _types(events) == ["RunStarted", "UserInput", "ModelResponse", "ToolResult", "ModelResponse"]
    task, call = events[1], events[2]
    assert isinstance(task, UserInput) and task.text == "Please fix the following issue.\nAdd an MIT license."
    assert isinstance(call, ModelResponse)
    assert call.tool_calls[0].arguments == "{\"command\":\"touch LICENSE\"}"  # no content in a call's args
    assert isinstance(events[4], ModelResponse) and events[4].text == "Added the licence."


def test_openhands_finish_keeps_the_replys_text_and_its_final_message() -> None:
    """A ``finish`` whose reply had text (``args.thought``, the response's content) and a final
    message (``final_thought``, the call's argument): only the final message was kept, so the
    last assistant turn lacked what the model wrote."""
    words = "The fix is in parser.c.\n\nLet's provide a final message to the user."
    call = {"id": "toolu_23", "type": "function",
            "function": {"name": "finish", "arguments": "{\"message\": \"Fixed; not verified.\"}"}}
    finish = {"id": 10, "source": "agent", "message": words, "action": "finish",
              "args": {"final_thought": "Fixed; not verified.", "task_completed": "partial",
                       "outputs": {}, "thought": words},
              "tool_call_metadata": {"function_name": "finish", "tool_call_id": "toolu_23",
                                     "total_calls_in_response": 1,
                                     "model_response": {"id": "r9", "choices": [{"message": {
                                         "content": words, "role": "assistant", "tool_calls": [call]}}]}}}
    last = parse(_b([*OPENHANDS[:2], finish]), format="openhands")[-1]
    assert isinstance(last, ModelResponse) and last.text == f"{words}\n\nFixed; not verified."
    for args, text in (({"final_thought": "Done.", "thought": "Done."}, "Done."),  # said once
                       ({"final_thought": "", "thought": "Only words."}, "Only words."),
                       ({"final_thought": "Only the message."}, "Only the message.")):
        bare = {"id": 10, "source": "agent", "action": "finish", "args": args}
        last = parse(_b([*OPENHANDS[:2], bare]), format="openhands")[-1]
        assert isinstance(last, ModelResponse) and last.text == text, args


def test_openhands_error_answering_no_call_is_a_runtime_note() -> None:
    """The runtime refused a malformed call (no action, so no call): its ``error`` observation
    (source agent, no ``cause``) is the runtime speaking, not the user's newest input."""
    refused = {"id": 29, "source": "agent", "observation": "error",
               "message": "Parameter 'command' is expected to be one of ['view', 'create'].",
               "content": "Parameter 'command' is expected to be one of ['view', 'create'].",
               "extras": {"error_id": ""}}
    events = parse(_b([*OPENHANDS[:2], refused]), format="openhands")
    assert _types(events) == ["RunStarted", "PolicySet", "UserInput", "RuntimeNote"]
    assert events[-1] == RuntimeNote(text=refused["content"], is_error=True,
                                     source_ref="openhands://error/29")


def test_openhands_bad_line_fails_whole_import() -> None:
    good = {"history": OPENHANDS}
    data = _lines(good, {"nohistory": 1}, good)
    with pytest.raises(ImportFormatError, match="history") as info:
        list(iter_runs(data, format="openhands", source="o.jsonl"))
    assert info.value.location == "o.jsonl:2"


def test_openhands_fields_of_the_wrong_type_are_typed_errors_or_ignored() -> None:
    """Not TypeErrors: a list where the importer iterates or an object where it keys by id."""
    def edited(index: int, edit: Any) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = json.loads(json.dumps(OPENHANDS))
        edit(events[index])
        return events

    for events in (edited(1, lambda e: e["args"].update(image_urls=5)),
                   edited(3, lambda e: e["extras"].update(microagent_knowledge=5)),
                   edited(4, lambda e: e["tool_call_metadata"]["model_response"]["choices"][0][
                       "message"].update(tool_calls=5))):
        assert _types(parse(_b(events), format="openhands"))[:3] == ["RunStarted", "PolicySet", "UserInput"]
    old = [{"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"}},
           {"id": 2, "source": "agent", "observation": "run", "cause": 1, "content": "x"}]
    for key, at in (("id", 0), ("cause", 1)):
        bad = json.loads(json.dumps(old))
        bad[at][key] = {"n": 1}
        with pytest.raises(ImportFormatError, match="expected an event id"):
            parse(_b(bad), format="openhands")


# ---------------------------------------------------------------- canonical events

def test_events_jsonl_round_trip_and_errors() -> None:
    original = parse(_b(CHAT), format="openai-chat")
    data = b"\n".join(event_to_json(e) for e in original) + b"\n"
    assert parse(data, format="events") == original
    without_start = b"\n".join(event_to_json(e) for e in original[1:])
    assert parse(without_start, format="events") == original[1:]  # a log is imported as it is
    for odd in (b'{"type": "run_started", "v": {}}', b'{"type": ["run_started"], "v": 1}'):
        _located(odd, "events", "invalid event")  # not a TypeError from the upcaster's lookup
    broken = data + b'{"type": "user_input", "content": 3}\n'
    err = _located(broken, "events", "invalid event")
    assert err.location == f"in.json:{len(original) + 1}"


# ---------------------------------------------------------------- detection

@pytest.mark.parametrize(("data", "fmt"), [
    (_b(CHAT), "openai-chat"),
    (_lines(*CHAT), "openai-chat"),
    (_b([{"task_id": 1, "traj": CHAT}]), "openai-chat"),
    (_b(ANTHROPIC), "anthropic"),
    (_b(ANTHROPIC["messages"]), "anthropic"),
    (_b(OPENHANDS), "openhands"),
    (_lines({"history": OPENHANDS}, {"history": OPENHANDS}), "openhands"),
    (_b({"input": "hi"}), "openai-responses"),
    (_b({"contents": []}), "gemini"),
    (b"\n".join(event_to_json(e) for e in parse(_b(CHAT), format="openai-chat")), "events"),
])
def test_detect_format(data: bytes, fmt: str) -> None:
    assert fmt in FORMATS
    assert detect_format(data) == fmt


def test_guess_format_is_none_for_json_of_no_known_shape_and_refuses_what_is_not_json() -> None:
    assert guess_format(b"[1, 2]") is None
    assert guess_format(_b({"django-1": {"model_patch": ""}})) is None  # SWE-agent's preds.json
    assert guess_format(_b(CHAT)) == "openai-chat"
    with pytest.raises(ImportFormatError, match=r"^x\.traj:"):  # a trace cut off mid-write
        guess_format(_b({"history": []})[:-3], source="x.traj")


def test_detect_format_gives_up_with_a_typed_error() -> None:
    with pytest.raises(ImportFormatError, match="cannot detect"):
        detect_format(b"[1, 2]")
    # a "type" that is an array or an object is not a known type (not a TypeError: unhashable)
    with pytest.raises(ImportFormatError, match="cannot detect"):
        detect_format(_b([{"type": {"a": 1}, "v": 1}]))
    assert detect_format(_b({"messages": [{"role": "user", "content": [{"type": [1]}]}]})) == "openai-chat"

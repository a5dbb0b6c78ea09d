"""Anthropic Messages -> events.

Accepted shapes: a request body ``{"system": str | [blocks], "messages": [...]}``
(``model`` is kept), a bare messages array, or JSONL with one message per line.

Mapping:

- the body's client ``tools`` (no ``type``, or ``custom``) -> one :class:`ToolsRegistered` right
  after :class:`RunStarted`; Anthropic's own tools (web search, code execution, ...) are not
  registered: the body holds no schema of theirs (see :mod:`._tools`).
- ``system`` -> :class:`PolicySet` (text blocks joined).
- user message: ``tool_result`` blocks -> :class:`ToolResult` (``is_error``
  kept; string or block content: text joined into ``content``, images and
  documents into ``blocks``, other blocks such as ``tool_reference`` kept as
  their compact JSON in the text so nothing is lost). Other blocks -> one
  :class:`UserInput` per run of consecutive non-result blocks, in order.
- assistant message -> one :class:`ModelResponse`: text blocks (joined with
  newlines; a block after a call or a server tool's block is where it stood: the response's
  ``text_breaks``), ``tool_use`` as tool calls. ``thinking`` and ``redacted_thinking``
  blocks, and the blocks of Anthropic's server tools (``server_tool_use`` and its
  ``web_search_tool_result``, ``code_execution_tool_result``...:
  :data:`~contextfold.domain.reasoning.ANTHROPIC_SERVER_BLOCKS`), are kept verbatim, in
  order, as the response's :class:`AnthropicReasoning` (each with the number of calls
  before it): Anthropic needs them back unchanged in the next request (thinking in a
  tool-use loop; a server call and its result in the turn that made them, or a server
  call without its result, which it runs when the turn is sent back). A server tool's
  use is no call for the runtime to run or answer, and no other provider reads it. The
  beta MCP connector's ``mcp_tool_use`` is a tool call, and its ``mcp_tool_result`` in
  the same message a :class:`ToolResult` right after the response (content: the result's
  compact JSON; ``return_code`` becomes ``exit_code``). A ``compaction`` block (the server's
  summary of what precedes it) -> :class:`HistoryCompacted` over the messages before it (see
  :func:`_compaction`), never the reply's words.

Media: URL sources stay URLs; ``base64`` sources become ``data:`` URLs (see
:func:`~contextfold.importers._common.media_block`); ``file`` sources become
``anthropic-file://<file_id>``; a ``container_upload`` block becomes a text
note naming its file id.
"""

from __future__ import annotations

from typing import Any

from contextfold.domain.events import (
    AnthropicReasoning,
    AnyEvent,
    CompactionSummary,
    ContentBlock,
    HistoryCompacted,
    ModelResponse,
    PolicySet,
    ReasoningItem,
    RuntimeNote,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
    UserInput,
)
from contextfold.domain.reasoning import ANTHROPIC_SERVER_BLOCKS
from contextfold.domain.text_breaks import joined_text
from contextfold.importers._common import (
    RunBuilder,
    build,
    get_list,
    get_obj,
    get_str,
    media_block,
    require_obj,
    spelled_json,
)
from contextfold.importers._condensation import whole_groups
from contextfold.importers._json import Bad, Doc, JsonPath
from contextfold.importers._tools import anthropic_tools

__all__ = ["assistant_events", "parse_doc", "parse_messages"]


def _media(block: dict[str, Any], kind: str, path: JsonPath) -> ContentBlock:
    src = get_obj(block, "source", path)
    sp = (*path, "source")
    stype = get_str(src, "type", sp)
    title = block.get("title") if isinstance(block.get("title"), str) else None
    match stype:
        case "url":
            return media_block(kind, path, url=get_str(src, "url", sp), title=title)
        case "base64":
            return media_block(kind, path, data=get_str(src, "data", sp), title=title,
                               media_type=get_str(src, "media_type", sp))
        case "file":
            return media_block(kind, path, url=f"anthropic-file://{get_str(src, 'file_id', sp)}",
                               title=title)
        case "text":
            return TextBlock(text=get_str(src, "data", sp))
        case _:
            raise Bad((*sp, "type"), f"unsupported {kind} source type {stype!r}")


def _user_block(block: dict[str, Any], path: JsonPath) -> ContentBlock:
    kind = get_str(block, "type", path)
    match kind:
        case "text":
            return TextBlock(text=get_str(block, "text", path))
        case "image" | "document":
            return _media(block, kind, path)
        case "container_upload":
            return TextBlock(text=f"[container_upload file_id={get_str(block, 'file_id', path)}]")
        case "search_result" | "tool_reference":
            return TextBlock(text=spelled_json(block))
        case _:
            raise Bad((*path, "type"), f"unsupported user content block {kind!r}")


def _tool_result(block: dict[str, Any], path: JsonPath) -> ToolResult:
    cid = get_str(block, "tool_use_id", path)
    content = block.get("content", "")
    texts: list[str] = []
    media: list[ContentBlock] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for j, raw in enumerate(content):
            bp = (*path, "content", j)
            inner = _user_block(require_obj(raw, bp, "a content block"), bp)
            if isinstance(inner, TextBlock):
                texts.append(inner.text)
            else:
                media.append(inner)
    else:
        raise Bad((*path, "content"), "expected tool_result 'content' to be a string or an array")
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise Bad((*path, "is_error"), "expected 'is_error' to be a boolean")
    return build(ToolResult, path, call_id=cid, content="\n".join(texts), blocks=tuple(media),
                 is_error=is_error)


def _server_result(block: dict[str, Any], path: JsonPath) -> ToolResult:
    cid = get_str(block, "tool_use_id", path)
    content = block.get("content")
    exit_code: int | None = None
    is_error = block.get("is_error") is True
    if isinstance(content, dict):
        rc = content.get("return_code")
        if isinstance(rc, int) and not isinstance(rc, bool):
            exit_code = rc
            is_error = is_error or rc != 0
        ctype = content.get("type")
        if isinstance(ctype, str) and ctype.endswith("_error"):
            is_error = True
    text = content if isinstance(content, str) else spelled_json(content)
    return build(ToolResult, path, call_id=cid, content=text, is_error=is_error,
                 exit_code=exit_code)


_THINKING = frozenset({"thinking", "redacted_thinking"})

COMPACTION_SUMMARIZER = "anthropic"
"""The ``summarizer`` an imported ``compaction`` block's ``HistoryCompacted`` names."""


def _compaction(summary: str, first: int, path: JsonPath, run: RunBuilder) -> None:
    """The server's summary of the conversation before it (a ``compaction`` block: the API drops
    what precedes it when it is sent back), kept apart from the reply's words.

    Why: glued onto the response's text, the model was shown having said the server's summary,
    and the reply read "<summary>\nHello!". Like an OpenHands condensation
    (:mod:`._condensation`), it becomes a :class:`HistoryCompacted` over the messages before it
    (log positions ``first`` .. now), an inference, when they are a legal cover (every call in
    it answered in it); otherwise (nothing before it in this body, or a split tool group) a
    :class:`RuntimeNote` that names it the server's summary."""
    hi = len(run.events)
    if hi >= first and whole_groups(run.events[first - 1:hi]):
        run.add(HistoryCompacted(summary=CompactionSummary(inferences=(summary.strip(),)),
                                 covers_from=first, covers_to=hi, strategy="summary",
                                 summarizer=COMPACTION_SUMMARIZER), path)
    else:
        run.add(RuntimeNote(text="Summary of the earlier conversation, by the server's compaction:\n"
                                 + summary, source_ref="anthropic://compaction"), path)


def _assistant(msg: dict[str, Any], path: JsonPath, run: RunBuilder, first: int) -> None:
    content = msg.get("content", "")
    if isinstance(content, str):
        run.add(build(ModelResponse, path, text=content), path)
        return
    if not isinstance(content, list):
        raise Bad((*path, "content"), "expected 'content' to be a string or an array of blocks")
    texts: list[tuple[int, str]] = []  # each with the number of calls and verbatim blocks before it
    calls: list[ToolCall] = []
    verbatim: list[ReasoningItem] = []  # thinking and server tool blocks, in order
    server_results: list[tuple[ToolResult, JsonPath]] = []
    for j, raw in enumerate(content):
        bp = (*path, "content", j)
        block = require_obj(raw, bp, "a content block")
        kind = get_str(block, "type", bp)
        if kind == "text":
            texts.append((len(calls) + len(verbatim), get_str(block, "text", bp)))
        elif kind in ANTHROPIC_SERVER_BLOCKS or kind in _THINKING:
            verbatim.append(build(ReasoningItem, bp, before_call=len(calls), raw=block))
        elif kind in ("tool_use", "mcp_tool_use"):
            args = block.get("input", {})
            calls.append(build(ToolCall, bp, call_id=get_str(block, "id", bp),
                               name=get_str(block, "name", bp),
                               arguments=args if isinstance(args, str) else spelled_json(args)))
        elif kind == "mcp_tool_result":
            server_results.append((_server_result(block, bp), bp))
        elif kind == "compaction":
            summary = block.get("content")
            if isinstance(summary, str) and summary.strip():
                _compaction(summary, first, bp, run)
        else:
            raise Bad((*bp, "type"), f"unsupported assistant content block {kind!r}")
    reasoning = build(AnthropicReasoning, path, items=tuple(verbatim)) if verbatim else None
    text, breaks = joined_text(texts, "\n", sum(1 for item in verbatim if item.before_call == 0))
    run.add(build(ModelResponse, path, text=text, tool_calls=tuple(calls),
                  **({"reasoning": reasoning} if reasoning is not None else {}),
                  **({"text_breaks": breaks} if breaks else {})), path)
    for result, bp in server_results:
        run.add(result, bp)


def assistant_events(msg: dict[str, Any], path: JsonPath) -> list[AnyEvent]:
    """The events of ONE assistant message read on its own (a Messages API response): its
    :class:`ModelResponse` and the results of its server-side calls, as :func:`parse_messages`
    reads it in a history (without the run's :class:`RunStarted`). A ``compaction`` block has no
    earlier message to cover here: it is the :class:`RuntimeNote` naming the server's summary."""
    run = RunBuilder()
    _assistant(msg, path, run, len(run.events) + 1)
    return run.events[1:]


def _user(msg: dict[str, Any], path: JsonPath, run: RunBuilder) -> None:
    if "content" not in msg:
        raise Bad(path, "missing field 'content'")
    content = msg["content"]
    if isinstance(content, str):
        run.add(build(UserInput, path, content=(TextBlock(text=content),)), path)
        return
    if not isinstance(content, list):
        raise Bad((*path, "content"), "expected 'content' to be a string or an array of blocks")
    pending: list[ContentBlock] = []
    pending_path = path

    def flush() -> None:
        if pending:
            run.add(build(UserInput, pending_path, content=tuple(pending)), pending_path)
            pending.clear()

    for j, raw in enumerate(content):
        bp = (*path, "content", j)
        block = require_obj(raw, bp, "a content block")
        if block.get("type") == "tool_result":
            flush()
            run.add(_tool_result(block, bp), bp)
        else:
            if not pending:
                pending_path = bp
            pending.append(_user_block(block, bp))
    flush()


def parse_messages(messages: list[Any], path: JsonPath, *, system: Any = None,
                   model: str | None = None, tools: list[ToolSpec] | None = None) -> list[AnyEvent]:
    run = RunBuilder(model=model, tools=tools or ())
    if system is not None:
        sp = ("system",)
        if isinstance(system, str):
            text = system
        elif isinstance(system, list):
            parts = []
            for j, raw in enumerate(system):
                block = require_obj(raw, (*sp, j), "a system text block")
                parts.append(get_str(block, "text", (*sp, j)))
            text = "\n".join(parts)
        else:
            raise Bad(sp, "expected 'system' to be a string or an array of text blocks")
        run.add(build(PolicySet, sp, text=text), sp)
    first = len(run.events) + 1  # the first message's position: a compaction covers from here
    for i, raw in enumerate(messages):
        p = (*path, i)
        msg = require_obj(raw, p, "a message object")
        role = get_str(msg, "role", p)
        match role:
            case "user":
                _user(msg, p, run)
            case "assistant":
                _assistant(msg, p, run, first)
            case _:
                raise Bad((*p, "role"), f"unknown role {role!r} (expected 'user' or 'assistant')")
    return run.events


def parse_doc(doc: Doc) -> list[tuple[str, list[AnyEvent]]]:
    value = doc.value
    if isinstance(value, dict) and not doc.jsonl:
        if "role" in value:
            return [("", parse_messages([value], ()))]
        model = value.get("model") if isinstance(value.get("model"), str) else None
        return [("", parse_messages(get_list(value, "messages", ()), ("messages",),
                                    system=value.get("system"), model=model,
                                    tools=anthropic_tools(value, ())))]
    if not isinstance(value, list):
        raise Bad((), "expected an array of messages or an object with 'messages'")
    return [("", parse_messages(value, ()))]

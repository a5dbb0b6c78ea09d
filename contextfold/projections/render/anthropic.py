"""Anthropic Messages request body from a :class:`Conversation`.

Shape (``POST /v1/messages``)::

    {"model": ..., "max_tokens": N, "system": [text blocks],
     "messages": [{"role": "user"|"assistant", "content": [blocks]}...],
     "tools": [{"name", "description", "input_schema"}]}

Rules this renderer keeps (the API rejects requests that break them):

- Roles strictly alternate, starting with ``user``. Consecutive messages of
  the same role are merged into one. An assistant message with neither text
  nor calls has no legal rendering (empty content is rejected) and is left out;
  its neighbours then merge.
- The results of one parallel batch are ``tool_result`` blocks in ONE user
  message, first in it, one per ``tool_use`` id, in call order. A user message
  that follows the results is merged into that same message *after* them.
- ``tool_use.input`` is the parsed arguments object; arguments that are not a
  JSON object are sent verbatim as ``{"unparsed_arguments": text}``, never guessed at
  (``render._shared.parse_arguments``).
- Provider reasoning (``thinking`` with its ``signature``, ``redacted_thinking`` with its ``data``)
  of an assistant turn made by Anthropic goes back verbatim, first in the turn (interleaved
  thinking before the call it preceded), with the blocks of the server tools it used
  (``server_tool_use`` and its ``web_search_tool_result``..., as they stood among the thinking);
  another provider's is not sent (``projections.reasoning``: which turns, and why). Replies
  merged into one message carry the thinking of the newest one that thinks, first; an earlier
  one's is left out (``_merge_turn``).
- ``is_error: true`` on results with status error, lost or cancelled; the
  runtime header in the content says which. Such a result takes text only: the media a failed
  call returned follow the batch's results, under a runtime line (``_tool_result_block``).
- Text blocks that are empty or only whitespace are rejected by the API ("text content
  blocks must contain non-whitespace text"), so none are emitted: a user turn left with
  nothing says :data:`EMPTY_USER_TEXT`, an assistant one is left out as if empty.
- A request that ends with an assistant message is a prefill, and the API rejects one whose
  text ends in whitespace: the last text block of a final assistant message is sent
  right-stripped (a run whose last event is the model's ``"Done.\\n"``). The 4.6 generation
  and later (``claude-opus-4-6``, ``claude-sonnet-4-6``, ...) refuse any prefill: for them such
  a request is a ``RenderError`` before it is sent or recorded (``protocol.refuses_prefill``).

A medium a transcript named by an Anthropic Files API id (logged as ``anthropic-file://<id>``)
goes back as ``{"type": "file", "file_id": ...}``, whatever type the log could give it; the API
reads such a source only with the ``anthropic-beta: files-api-2025-04-14`` header, which is
the caller's to send (a body cannot carry it). Another provider's file id is a note
(``media_limits``).

Prompt caching: ``cache_control: {"type": "ephemeral"}`` breakpoints end the
stable prefix - on the last tool, the last system block and the last block of
the ``stable_prefix_messages`` leading messages - and the conversation: the last
block of the final message (not a thinking block, which takes none). Four at most,
the API's limit. Anthropic caches tools, then system, then messages, so each
breakpoint caches everything before it, and it reads a cache only at a breakpoint
(or up to 20 blocks before one). Why the fourth: with the stable prefix's alone, a
run's history - most of a long agent request, and kept byte-identical from turn to
turn for this (``layout``, ``reasoning``) - was never cached and was billed in full
every turn (tau-bench airline, 40 runs at a 200k window: 56% of the input bytes read
from the cache, 91% with it; ``scripts/measure_prefix_reuse.py --anthropic-cache``).
The next turn's final breakpoint finds this one's by the 20-block lookback. A turn
whose history changed near its start (a cut of older messages) pays Anthropic's 25%
cache-write surcharge on what it writes there and reads nothing; that is the price of
the documented multi-turn pattern, and the cut's own cost.

``max_tokens`` is required by this API: the caller's value, else
:data:`DEFAULT_ANTHROPIC_MAX_TOKENS`.
"""

from __future__ import annotations

from typing import Any, assert_never

from contextfold.domain.conversation import (
    AssistantMessage,
    Conversation,
    DataPart,
    InstructionPart,
    MediaPart,
    ToolResultPart,
    ToolResults,
    UserMessage,
    UserPart,
)
from contextfold.domain.errors import RenderError
from contextfold.domain.event_values import media_type_key
from contextfold.domain.events import AnthropicReasoning
from contextfold.domain.reasoning import ANTHROPIC_SERVER_BLOCKS
from contextfold.projections.media_limits import PDF_ONLY, file_ref
from contextfold.projections.render._shared import (
    DEFAULT_ANTHROPIC_MAX_TOKENS,
    parse_arguments,
    refused_media_note,
    shown_media,
    system_texts,
    turn_in_order,
)
from contextfold.projections.render.data_blocks import ERROR_MEDIA_NOTE, media_caption, render_data
from contextfold.projections.render.runtime_lines import media_follows_line, runtime_header
from contextfold.projections.render.tool_schemas import sent_schema

__all__ = ["CACHE_CONTROL", "EMPTY_USER_TEXT", "MAX_CACHE_BREAKPOINTS", "PROVIDER", "render_anthropic",
           "unsent_thinking"]

PROVIDER = "anthropic"
CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
MAX_CACHE_BREAKPOINTS = 4
EMPTY_USER_TEXT = "(empty message)"
"""What a user turn of only whitespace says (the layout's words for an empty one): dropping the
turn would merge its neighbours or end the request with the model's own message."""


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text.strip() else []


def _source(part: MediaPart) -> dict[str, Any]:
    ref = file_ref(part.url)
    if ref is not None:  # a file of Anthropic's Files API (another's is a note: media_limits)
        return {"type": "file", "file_id": ref[1]}
    if part.data_base64 is not None:
        return {"type": "base64", "media_type": part.media_type, "data": part.data_base64}
    if part.url is not None:
        return {"type": "url", "url": part.url}
    raise RenderError(
        PROVIDER,
        f"media part {part.fragment_id!r} has neither inline data nor a URL "
        "(load the artifact bytes before rendering)",
    )


def _media_blocks(part: MediaPart) -> list[dict[str, Any]]:
    note = refused_media_note(part, PROVIDER)  # over a size limit, an inline type it does not take
    if note is not None:
        return _text(media_caption(part, note))
    blocks: list[dict[str, Any]] = []
    if part.trust in ("workspace", "external"):
        blocks.extend(_text(media_caption(part)))
    match part.kind:
        case "image":
            blocks.append({"type": "image", "source": _source(part)})
        case "document":
            if media_type_key(part.media_type) != "application/pdf" and file_ref(part.url) is None:
                note = f"document ({part.media_type}) {shown_media(part)}: not attached, {PDF_ONLY}"
                return _text(media_caption(part, note))
            blocks.append({"type": "document", "source": _source(part)})
        case _:
            assert_never(part.kind)
    return blocks


def _user_blocks(parts: tuple[UserPart, ...]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        match part:
            case InstructionPart():
                blocks.extend(_text(part.text))
            case DataPart():
                blocks.extend(_text(render_data(part)))
            case MediaPart():
                blocks.extend(_media_blocks(part))
            case _:
                assert_never(part)
    return blocks


_THINKING = frozenset({"thinking", "redacted_thinking"})


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    """Thinking first (a thinking turn's message must start with it), the text, the calls; a
    block of interleaved thinking goes back before the call it preceded, and so do the blocks of
    the server tools the response used (``server_tool_use`` and its result, in their order: a
    turn of them alone is a turn, as a ``pause_turn`` reply is); text the model wrote after a
    call or a server tool's result goes back after it (``turn_in_order``). Another provider's
    reasoning is not sent (``projections.reasoning``)."""
    reasoning = message.reasoning
    calls = len(message.tool_calls)
    served = isinstance(reasoning, AnthropicReasoning) and any(
        item.raw.get("type") in ANTHROPIC_SERVER_BLOCKS for item in reasoning.items)
    if not calls and not served and not _text(message.text):
        return []  # nothing to say: left out, with its thinking (a turn of thinking alone is no turn)
    sent = reasoning.items if isinstance(reasoning, AnthropicReasoning) else ()
    blocks: list[dict[str, Any]] = []
    for entry in turn_in_order(message, sent):
        match entry:
            case ("text", text):
                blocks.extend(_text(text))
            case ("item", raw):
                blocks.append(raw)
            case ("call", call):
                blocks.append({"type": "tool_use", "id": call.shown_id(PROVIDER), "name": call.name,
                               "input": parse_arguments(call)})
    return blocks


def _merge_turn(content: list[dict[str, Any]], blocks: list[dict[str, Any]]) -> None:
    """Append the assistant turn ``blocks`` to the assistant message ``content`` (two replies in a
    row are one message: roles alternate). The message carries the thinking of one response: the
    newest turn that thinks, its leading thinking first; an earlier turn's thinking is left out.

    Why: Anthropic refuses a message with thinking that does not start with it ("If an assistant
    message contains any thinking blocks, the first block must be thinking or redacted_thinking"),
    and checks the thinking of the latest assistant message against the response that made it
    ("`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified.
    These blocks must remain as they were in the original response."): two responses' signed
    blocks spliced into one message, or one response's thinking placed after another's text, is a
    sequence no response produced (the earlier turn's thinking first, the newer one's after its
    text, as before). Only the newest turn's thinking can be needed: the earlier turns of a merge
    make no calls (a call is always followed by its results, which end the message), so it is the
    newest turn whose calls the tool-use loop continues ("a final assistant message must start
    with a thinking block (preceding the lastmost set of tool_use and tool_result blocks)"), and
    thinking of a finished turn is dropped by the API itself (docs.claude.com, extended thinking:
    thinking blocks from previous turns are stripped from the context). The left-out thinking is
    still priced in its turn's fragment (``projections.reasoning``): the manifest then counts more
    than is sent, never less."""
    lead = 0
    while lead < len(blocks) and blocks[lead]["type"] in _THINKING:
        lead += 1
    if lead:
        content[:] = [*blocks[:lead], *(b for b in content if b["type"] not in _THINKING)]
        blocks = blocks[lead:]
    content.extend(blocks)


def unsent_thinking(conversation: Conversation) -> dict[str, str]:
    """The replies whose Anthropic thinking the Messages body leaves out, by fragment id, with why:
    the render's own merge (:func:`_merge_turn`) run over its own blocks, so the manifest cannot
    say "sent verbatim" of thinking the body does not carry. A reply with nothing to say is left
    out with its thinking; a reply merged into one message with a later one that thinks gives way
    to that one's."""
    owner: dict[int, str] = {}  # id of a thinking block -> the reply it is from
    why: dict[str, str] = {}
    turns: list[list[dict[str, Any]]] = []
    turn: list[dict[str, Any]] | None = None
    for message in conversation.messages:
        if not isinstance(message, AssistantMessage):
            if not isinstance(message, ToolResults) or message.results:  # it renders: a user turn
                turn = None
            continue
        blocks = _assistant_blocks(message)
        if isinstance(message.reasoning, AnthropicReasoning) and any(
                item.raw.get("type") in _THINKING for item in message.reasoning.items):
            why[message.fragment_id] = ("it shares one assistant message with a later reply, whose "
                                        "thinking the message carries (a message holds one "
                                        "response's thinking)" if blocks else
                                        "its reply has no text or call to carry it")
            owner.update((id(b), message.fragment_id) for b in blocks if b["type"] in _THINKING)
        if not blocks:
            continue
        if turn is None:
            turn = list(blocks)
            turns.append(turn)
        else:
            _merge_turn(turn, blocks)
    sent = {owner[id(b)] for t in turns for b in t if id(b) in owner}
    return {fid: reason for fid, reason in why.items() if fid not in sent}


def _tool_result_block(result: ToolResultPart) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``tool_result`` block of ``result``, and the blocks that go after the batch's results.

    A failed result's media go after them: Anthropic takes text only in a ``tool_result`` with
    ``is_error: true`` ("all content must be type 'text' if 'is_error' is true"), and a failed
    browser call's screenshot inside one made every build of the run fail while it was in the
    window. The result keeps its text and names each medium (:data:`ERROR_MEDIA_NOTE`); the
    media follow the results under the runtime's line naming the call, as OpenAI Chat does for
    every tool's media (``media_plan`` prices both)."""
    content: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []
    header = runtime_header(result)
    if header is not None:
        content.extend(_text(header))
    for part in result.content:
        match part:
            case DataPart():
                content.extend(_text(render_data(part)))
            case MediaPart() if result.is_error:
                content.extend(_text(media_caption(part, ERROR_MEDIA_NOTE)))
                moved.extend(_media_blocks(part))
            case MediaPart():
                content.extend(_media_blocks(part))
            case _:
                assert_never(part)
    if not content:
        content = _text("[runtime] the tool returned no output.")
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.shown_id(PROVIDER),
                             "content": content}
    if result.is_error:
        block["is_error"] = True
    if moved:
        moved.insert(0, {"type": "text", "text": media_follows_line(result.call_id, result.name)})
    return block, moved


def _result_blocks(message: ToolResults) -> list[dict[str, Any]]:
    """The batch's ``tool_result`` blocks first (the API's rule), then the media moved out of them."""
    blocks: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []
    for result in message.results:
        block, moved = _tool_result_block(result)
        blocks.append(block)
        after.extend(moved)
    return blocks + after


def render_anthropic(conversation: Conversation, *, max_tokens: int | None = None
                     ) -> dict[str, Any]:
    """The Messages body for ``conversation`` (not validated; see ``render``)."""
    messages: list[dict[str, Any]] = []
    prefix_end: dict[str, Any] | None = None
    for index, message in enumerate(conversation.messages):
        role: str
        match message:
            case UserMessage():
                role, blocks = "user", _user_blocks(message.parts) or _text(EMPTY_USER_TEXT)
            case AssistantMessage():
                role, blocks = "assistant", _assistant_blocks(message)
            case ToolResults():
                role, blocks = "user", _result_blocks(message)
            case _:
                assert_never(message)
        if blocks:
            if messages and messages[-1]["role"] == role:
                if role == "assistant":
                    _merge_turn(messages[-1]["content"], blocks)
                else:
                    messages[-1]["content"].extend(blocks)
            else:
                messages.append({"role": role, "content": blocks})
        if index + 1 == conversation.stable_prefix_messages and messages:
            prefix_end = messages[-1]["content"][-1]  # the block itself: a later merge may move it
    if messages and messages[-1]["role"] == "assistant" and messages[-1]["content"][-1]["type"] == "text":
        last = messages[-1]["content"][-1]
        last["text"] = last["text"].rstrip()  # not empty: _text kept only non-whitespace text
    # the conversation's end (module docstring: the history is cached from turn to turn); the
    # blocks are this render's own, so the mark cannot stay on a message of a later request
    final = next((b for b in reversed(messages[-1]["content"]) if b["type"] not in _THINKING),
                 None) if messages else None
    if final is not None:
        final["cache_control"] = dict(CACHE_CONTROL)

    body: dict[str, Any] = {}
    if conversation.model is not None:
        body["model"] = conversation.model
    body["max_tokens"] = max_tokens if max_tokens is not None else DEFAULT_ANTHROPIC_MAX_TOKENS
    system: list[dict[str, Any]] = [
        {"type": "text", "text": text} for text in system_texts(conversation, PROVIDER) if text.strip()
    ]
    if system:
        system[-1]["cache_control"] = dict(CACHE_CONTROL)
        body["system"] = system
    # a thinking block takes no cache_control (ThinkingBlockParam has none), and a merge may
    # have left the prefix's last one out of the message
    if prefix_end is not None and prefix_end["type"] not in _THINKING:
        prefix_end["cache_control"] = dict(CACHE_CONTROL)
    body["messages"] = messages
    if conversation.tools:
        tools: list[dict[str, Any]] = []
        for spec in conversation.tools:
            tool: dict[str, Any] = {"name": spec.name}
            if spec.description:
                tool["description"] = spec.description
            tool["input_schema"] = sent_schema(spec.parameters)
            if spec.strict:
                tool["strict"] = True
            tools.append(tool)
        tools[-1]["cache_control"] = dict(CACHE_CONTROL)
        body["tools"] = tools
    return body

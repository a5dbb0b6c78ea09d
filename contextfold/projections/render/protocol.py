"""The protocol rules a provider enforces at request time but no type expresses.

Why a module of its own: these rules walk a rendered *body* (not the Conversation), so they
hold for a body that was edited or imported as well; :mod:`.validate` runs them before the
official SDK request types, and the render modules name the providers from here. Rules:
every tool call answered exactly once and right after it (OpenAI Responses: after the rest of its
turn, the turn's other calls and the reasoning items before them), call ids the provider takes
(Anthropic: ``^[a-zA-Z0-9_-]+$`` and unique in the request; OpenAI Responses: unique in the
request and at most 64 characters; Gemini: unique in the request; OpenAI chat: at most 40 characters),
tool names it takes and object schemas for tool parameters (:mod:`.tool_checks`, which reads only
the body's ``tools``), at most 128 calls in a message (OpenAI chat: a build splits a reply of
more, ``openai_chat``), role alternation, ``tool_result`` placement, text only in an Anthropic
``tool_result`` with ``is_error``, Anthropic images of at most 5 MB, Gemini media of the types
it takes (:mod:`..media_limits`), tools declared for every tool name used in history, at most
four Anthropic cache breakpoints, a request with something to answer (a message, an input item,
a content). Each failure is a :class:`RenderError` naming the message.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from itertools import repeat
from typing import Any, Literal, TypeAlias, assert_never, get_args

from contextfold.domain.errors import RenderError
from contextfold.domain.reasoning import HOSTED_RESPONSES_ITEMS
from contextfold.projections.call_ids import ANTHROPIC_ID, MAX_CHAT_ID_LENGTH, MAX_RESPONSES_ID_LENGTH
from contextfold.projections.media_limits import (
    ANTHROPIC_MAX_IMAGE_BASE64,
    GEMINI_MEDIA_TYPES,
    file_ref,
)
from contextfold.projections.model_family import claude_version
from contextfold.projections.render.tool_checks import (
    MAX_CHAT_TOOL_CALLS,
    anthropic_tools,
    chat_tools,
    declared_tool_names,
    gemini_tools,
    refused_tool_names,
    refused_tool_schemas,
    responses_tools,
)
from contextfold.projections.request_json import all_remembered, is_remembered, on_clear

__all__ = ["PROVIDERS", "Provider", "check_protocol", "check_protocol_noting", "parse_provider",
           "refused_tool_names", "refused_tool_schemas", "refuses_prefill"]

Provider: TypeAlias = Literal["openai-chat", "openai-responses", "anthropic", "gemini"]

PROVIDERS: tuple[Provider, ...] = get_args(Provider)


def parse_provider(provider: str) -> Provider:
    """``provider`` as a :data:`Provider`, or a RenderError listing the known ones."""
    for known in PROVIDERS:
        if provider == known:
            return known
    raise RenderError(provider, f"unknown provider; expected one of {', '.join(PROVIDERS)}")


def _fail(provider: str, message: str, index: int | None = None, detail: Any = None) -> None:
    raise RenderError(provider, message, index=index, detail=detail)


def _list(provider: str, body: Mapping[str, Any], key: str) -> list[Any]:
    value = body.get(key)
    if not isinstance(value, list):
        raise RenderError(provider, f"'{key}' must be a list")
    if not all(map(isinstance, value, repeat(dict))):  # (in C: a build's body has every item checked)
        i = next(i for i, item in enumerate(value) if not isinstance(item, dict))
        raise RenderError(provider, f"{key}[{i}] must be an object", index=i)
    return value


def _declared(provider: str, names: AbstractSet[Any], name: Any, index: int) -> None:
    if name not in names:
        _fail(provider, f"tool {name!r} is used in history but not declared in 'tools'", index)


_PASSED_GROUPS: dict[int, tuple[dict[str, Any], tuple[dict[str, Any], ...], frozenset[Any]]] = {}
"""id of an openai-chat assistant message with tool calls -> (that message, the tool messages
that answered it, the tool names it used), for groups of remembered (immutable) dicts that
passed :func:`_check_openai_chat`. A long run's bodies hold the same ~100 groups build after
build; walking them again was most of an openai-chat second build's protocol check."""
_GROUPS_LIMIT = 50_000
on_clear(_PASSED_GROUPS.clear)
_PASSED_PLAIN: dict[int, dict[str, Any]] = {}
"""id -> a remembered openai-chat message that passed with no call open and opens none (system,
developer or user, or assistant without tool calls): it changes nothing the walk carries, so a
run of them is skipped in one C-level scan. Most of a tau-bench request's ~11 messages."""
on_clear(_PASSED_PLAIN.clear)


def _check_openai_chat(p: str, body: Mapping[str, Any]) -> bool:
    """The walk over the messages. A group (an assistant message with tool calls and the tool
    messages answering it) that passed before is taken whole when it is the same remembered
    dicts and its tool names are still declared: at a group's start and end no call is open,
    and what the walk checks inside it depends only on its dicts and the declared names. A
    message that opens no call and passed before is skipped when no call is open.

    Returns whether every message is a remembered dict: what is skipped is (only such are
    kept as passed), so only the messages walked are looked up."""
    declared = declared_tool_names(p, body.get("tools") or [], chat_tools)
    messages = _list(p, body, "messages")
    if not messages:  # "Invalid 'messages': empty array. Expected an array with minimum length 1"
        _fail(p, "at least one message is required" + _NOTHING_TO_SEND)
    plain = list(map(operator.is_, map(_PASSED_PLAIN.get, map(id, messages)), messages))
    pending: list[str] = []
    asked_at = -1
    names: set[Any] = set()
    remembered = True
    i, n = 0, len(messages)
    while i < n:
        if not pending and plain[i]:
            try:
                i = plain.index(False, i)
            except ValueError:
                break
            continue
        msg = messages[i]
        if not pending and (known := _PASSED_GROUPS.get(id(msg))) is not None and known[0] is msg:
            answers = known[1]
            after = messages[i + 1:i + 1 + len(answers)]
            if known[2] <= declared and len(after) == len(answers) and all(map(operator.is_, after, answers)):
                i += 1 + len(answers)
                continue
        remembered = remembered and is_remembered(msg)
        role = msg.get("role")
        if pending:
            if role == "tool":
                call_id = msg.get("tool_call_id")
                if call_id not in pending:
                    _fail(p, f"tool message answers {call_id!r}, which is not an open call of "
                          f"assistant message {asked_at} (duplicate or unknown id)", i)
                pending.remove(call_id)
                if not pending:
                    _keep_group(messages[asked_at:i + 1], frozenset(names))
                i += 1
                continue
            _fail(p, f"assistant message {asked_at} has unanswered tool calls "
                  f"{pending}: its tool messages must follow it immediately, but "
                  f"message {i} is a {role!r} message", asked_at)
        if role == "tool":
            _fail(p, f"tool message for {msg.get('tool_call_id')!r} does not follow an "
                  "assistant message that called it", i)
        elif role == "assistant":
            ids = [c.get("id") for c in msg.get("tool_calls") or []]
            if len(ids) > MAX_CHAT_TOOL_CALLS:
                _fail(p, f"assistant message makes {len(ids)} tool calls and this API takes at most "
                      f"{MAX_CHAT_TOOL_CALLS} in one message", i)
            if len(set(ids)) != len(ids):
                _fail(p, f"assistant message repeats a tool call id: {ids}", i)
            for call_id in ids:
                if not isinstance(call_id, str) or len(call_id) > MAX_CHAT_ID_LENGTH:
                    _fail(p, f"tool call id {call_id!r} is not a string of at most "
                          f"{MAX_CHAT_ID_LENGTH} characters", i)
            names = set()
            for call in msg.get("tool_calls") or []:
                names.add(name := call.get("function", {}).get("name"))
                _declared(p, declared, name, i)
            pending, asked_at = list(ids), i
            if not ids:
                _keep_plain(msg)
        elif role not in ("system", "developer", "user"):
            _fail(p, f"unknown role {role!r}", i)
        else:
            _keep_plain(msg)
        i += 1
    if pending:
        _fail(p, f"assistant message {asked_at} has unanswered tool calls {pending}", asked_at)
    return remembered


def _keep_plain(message: dict[str, Any]) -> None:
    if is_remembered(message):
        if len(_PASSED_PLAIN) >= _GROUPS_LIMIT:
            _PASSED_PLAIN.clear()
        _PASSED_PLAIN[id(message)] = message


def _keep_group(group: list[dict[str, Any]], names: frozenset[Any]) -> None:
    """Remember a group that passed, if all its dicts are remembered (immutable)."""
    if all_remembered(group):
        if len(_PASSED_GROUPS) >= _GROUPS_LIMIT:
            _PASSED_GROUPS.clear()
        _PASSED_GROUPS[id(group[0])] = (group[0], tuple(group[1:]), names)


_LED_TO = HOSTED_RESPONSES_ITEMS | {"function_call", "message"}
"""The items a reasoning item between a turn's calls and their outputs may lead to."""


def _check_openai_responses(p: str, body: Mapping[str, Any]) -> None:
    """Each ``function_call_output`` after its ``function_call`` (found by ``call_id`` alone, so
    ids are unique), every call answered, and nothing but the open turn's own output between its
    calls and their outputs: its calls, and a reasoning item right before the call it led to.

    Why a reasoning item: a turn's output may be [reasoning, call, reasoning, call], and the API
    takes it back in that order with the outputs after it (what a client appending
    ``response.output`` and then its outputs sends; a reasoning item must come before the item it
    preceded). The renderer sends it so (``ReasoningItem.before_call``); refusing it made such a
    run unbuildable for its own provider. A hosted tool's item (a ``web_search_call`` the model
    made after its ``function_call``), or its message written after a call (``text_breaks``), is
    the turn's own output too, sent back where it stood, as a client appending
    ``response.output`` whole (OpenAI's function-calling loop) sends it. A reasoning item after the
    turn's last call and item led to nothing, and another role's message before the outputs
    breaks the tool loop: both stay refused."""
    declared = declared_tool_names(p, body.get("tools") or [], responses_tools)
    open_calls: dict[str, int] = {}
    seen: set[Any] = set()
    items = _list(p, body, "input")
    if not items:  # nothing for the model to answer, as in a chat request with no message
        _fail(p, "at least one input item is required" + _NOTHING_TO_SEND)
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "function_call":
            call_id = item.get("call_id")
            if call_id in seen:
                _fail(p, f"function_call {call_id!r} repeats an id: call_id must be unique in "
                      "the input (an output finds its call by id alone)", i)
            if not isinstance(call_id, str) or len(call_id) > MAX_RESPONSES_ID_LENGTH:
                _fail(p, f"function_call id {call_id!r} is not a string of at most "
                      f"{MAX_RESPONSES_ID_LENGTH} characters", i)
            _declared(p, declared, item.get("name"), i)
            open_calls[call_id] = i
            seen.add(call_id)
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if call_id not in open_calls:
                _fail(p, f"function_call_output for {call_id!r} has no open function_call "
                      "before it (orphan or duplicate)", i)
            del open_calls[call_id]
        elif open_calls and kind not in HOSTED_RESPONSES_ITEMS and not (
                kind == "message" and item.get("role") == "assistant") and not (
                kind == "reasoning" and i + 1 < len(items)
                and items[i + 1].get("type") in _LED_TO):
            first = min(open_calls.values())
            _fail(p, f"function_call(s) {sorted(open_calls)} are not answered before item {i} "
                  f"({kind})", first)
    if open_calls:
        _fail(p, f"function_call(s) {sorted(open_calls)} have no function_call_output",
              min(open_calls.values()))


def _blocks(p: str, msg: dict[str, Any], i: int) -> list[dict[str, Any]]:
    content = msg.get("content")
    if isinstance(content, str):
        if not content:
            _fail(p, "message content is empty", i)
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        _fail(p, "message content must be a non-empty list of blocks", i)
    assert isinstance(content, list)
    return content


def _count_cache_control(body: Mapping[str, Any]) -> int:
    count = sum(1 for t in body.get("tools") or [] if "cache_control" in t)
    system = body.get("system")
    if isinstance(system, list):
        count += sum(1 for b in system if isinstance(b, dict) and "cache_control" in b)
    for msg in body.get("messages") or []:
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict) and "cache_control" in b)
    return count


def _blank_text(blocks: list[Any]) -> bool:
    """Whether a text block of ``blocks`` (or of a tool_result's content in them) holds only
    whitespace: the Messages API refuses it ("text content blocks must contain non-whitespace
    text"), wherever it is."""
    for b in blocks:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text" and not str(b.get("text", "")).strip():
            return True
        inner = b.get("content") if b.get("type") == "tool_result" else None
        if isinstance(inner, list) and _blank_text(inner):
            return True
    return False


def refuses_prefill(model: object) -> bool:
    """Whether Anthropic refuses a request ending with an assistant message for ``model``: the
    4.6 generation and later answer 400 "This model does not support assistant message prefill.
    The conversation must end with a user message." Older ids (``claude-3-5-sonnet-...``,
    ``claude-sonnet-4-5``) and names we cannot read keep the prefill they accept."""
    version = claude_version(model) if isinstance(model, str) else None  # any spelling: model_family
    return version is not None and (version.major, version.minor) >= (4, 6)


_NOTHING_TO_SEND = (": the request holds none. A build makes none while the run, up to this turn, holds "
                    "nothing sent as a message: no user input, evidence or answered tool call (a call "
                    "still in flight at a past turn's point is left out), only system content")


def _check_anthropic_user_blocks(p: str, blocks: list[Any], i: int) -> None:
    """The rules of a user message's blocks, in one pass over them and their tool_results' content
    (a long request is mostly such messages): no text block of whitespace only (``_blank_text``);
    a ``tool_result`` with ``is_error`` holds text only ("all content must be type 'text' if
    'is_error' is true"); an inline image is at most 5 MB of base64 ("image exceeds 5 MB
    maximum"); a URL source does not name a file id (``media_limits.file_ref``: the API fetches
    no such URL)."""
    for b in blocks:
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            if not str(b.get("text", "")).strip():
                _fail(p, "text content blocks must contain non-whitespace text", i)
        elif kind == "tool_result":
            inner = b.get("content")
            if not isinstance(inner, list):
                continue
            for c in inner:
                if isinstance(c, dict) and c.get("type") == "text":
                    if not str(c.get("text", "")).strip():
                        _fail(p, "text content blocks must contain non-whitespace text", i)
                    continue
                if b.get("is_error") is True:
                    _fail(p, f"tool_result {b.get('tool_use_id')!r} has is_error true and content that "
                          "is not text: all content must be type 'text' if 'is_error' is true", i)
                if isinstance(c, dict):
                    _check_anthropic_source(p, c, i)
        elif kind == "image" or kind == "document":
            _check_anthropic_source(p, b, i)


def _check_anthropic_source(p: str, block: dict[str, Any], i: int) -> None:
    source = block.get("source")
    if not isinstance(source, dict):
        return
    url = source.get("url") if source.get("type") == "url" else None
    if isinstance(url, str) and file_ref(url) is not None:
        _fail(p, f"{block.get('type')} source {url!r} names a file id, not a URL the API can fetch: a "
              "file is {\"type\": \"file\", \"file_id\": ...}", i)
    data = source.get("data")
    if (block.get("type") == "image" and source.get("type") == "base64" and isinstance(data, str)
            and len(data) > ANTHROPIC_MAX_IMAGE_BASE64):
        _fail(p, f"image of {len(data)} base64 characters exceeds Anthropic's 5 MB maximum "
              f"({ANTHROPIC_MAX_IMAGE_BASE64})", i)


def _check_anthropic(p: str, body: Mapping[str, Any]) -> None:
    declared = declared_tool_names(p, body.get("tools") or [], anthropic_tools)
    messages = _list(p, body, "messages")
    if not messages:
        _fail(p, "at least one message is required" + _NOTHING_TO_SEND)
    system = body.get("system")
    if (isinstance(system, list) and _blank_text(system)) or (isinstance(system, str) and system
                                                               and not system.strip()):
        _fail(p, "system: text content blocks must contain non-whitespace text")
    expected: list[Any] = []
    asked_at = -1
    previous = None
    used_ids: set[Any] = set()
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role not in ("user", "assistant"):
            _fail(p, f"role must be 'user' or 'assistant', not {role!r}", i)
        if i == 0 and role != "user":
            _fail(p, "the first message must be a user message", i)
        if role == previous:
            _fail(p, f"two {role} messages in a row: roles must alternate", i)
        previous = role
        blocks = _blocks(p, msg, i)
        if role == "assistant" and _blank_text(blocks):
            _fail(p, "text content blocks must contain non-whitespace text", i)
        if role == "user":
            _check_anthropic_user_blocks(p, blocks, i)
        if role == "assistant":
            ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            if len(set(ids)) != len(ids) or not used_ids.isdisjoint(ids):
                _fail(p, f"tool_use ids must be unique in the request: {ids}", i)
            used_ids.update(ids)
            for call_id in ids:
                if not isinstance(call_id, str) or not ANTHROPIC_ID.fullmatch(call_id):
                    _fail(p, f"tool_use id {call_id!r} does not match ^[a-zA-Z0-9_-]+$", i)
            for b in blocks:
                if b.get("type") == "tool_use":
                    _declared(p, declared, b.get("name"), i)
                    if not isinstance(b.get("input"), dict):
                        _fail(p, f"tool_use {b.get('id')!r} input must be an object", i)
            expected, asked_at = ids, i
            continue
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        leading = 0
        while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
            leading += 1
        if leading != len(results):
            _fail(p, "tool_result blocks must come first in the user message, before any "
                  "other content", i)
        if len(set(results)) != len(results):
            _fail(p, f"user message answers a tool_use id twice: {results}", i)
        if set(results) != set(expected):
            missing = [x for x in expected if x not in results]
            extra = [x for x in results if x not in expected]
            if missing:
                _fail(p, f"tool_use ids {missing} of assistant message {asked_at} are not "
                      "answered by tool_result blocks in the next user message", i)
            _fail(p, f"tool_result blocks {extra} answer no tool_use of the previous "
                  "assistant message", i)
        expected = []
    if expected:
        _fail(p, f"tool_use ids {expected} have no tool_result: the request ends with them",
              asked_at)
    final = _blocks(p, messages[-1], len(messages) - 1)[-1]
    if messages[-1].get("role") == "assistant" and final.get("type") == "text" \
            and str(final.get("text", "")) != str(final.get("text", "")).rstrip():
        _fail(p, "final assistant content cannot end with trailing whitespace (a request that "
              "ends with an assistant message is a prefill)", len(messages) - 1)
    if messages[-1].get("role") == "assistant" and refuses_prefill(body.get("model")):
        _fail(p, f"model {body.get('model')!r} does not support assistant message prefill: the "
              "conversation must end with a user message (Claude Opus and Sonnet 4.6 and later). "
              "The run's last event is the model's own message: append the next user input (or a "
              "runtime instruction) before building", len(messages) - 1)
    breakpoints = _count_cache_control(body)
    if breakpoints > 4:
        _fail(p, f"{breakpoints} cache_control breakpoints; the API allows at most 4")


_GEMINI_MEDIA_KEYS = frozenset({"inlineData", "fileData"})


def _check_gemini_media(p: str, parts: list[Any], i: int) -> None:
    """Gemini refuses a medium of a type it does not take ("Unsupported MIME type"), and reads
    no other provider's file id (``media_limits``)."""
    for pt in parts:
        media = pt.get("inlineData") or pt.get("fileData")
        if isinstance(media, dict) and media.get("mimeType") not in GEMINI_MEDIA_TYPES:
            _fail(p, f"media of type {media.get('mimeType')!r}: Gemini refuses it (\"Unsupported "
                  "MIME type\"); it takes the types media_limits.GEMINI_MEDIA_TYPES lists", i)
        if isinstance(media, dict) and file_ref(media.get("fileUri")) is not None:
            _fail(p, f"fileUri {media.get('fileUri')!r} names another provider's file id", i)


def _check_gemini(p: str, body: Mapping[str, Any]) -> None:
    declared = declared_tool_names(p, body.get("tools") or [], gemini_tools)
    expected: list[tuple[Any, Any]] = []
    seen: set[Any] = set()
    asked_at = -1
    contents = _list(p, body, "contents")
    if not contents:
        _fail(p, "at least one content is required" + _NOTHING_TO_SEND)
    for i, content in enumerate(contents):
        role = content.get("role")
        parts = content.get("parts")
        if role not in ("user", "model"):
            _fail(p, f"role must be 'user' or 'model', not {role!r}", i)
        if not isinstance(parts, list) or not parts:
            _fail(p, "content parts must be a non-empty list", i)
        assert isinstance(parts, list)
        if not all(map(_GEMINI_MEDIA_KEYS.isdisjoint, parts)):  # (a C-level scan: most parts are text)
            _check_gemini_media(p, parts, i)
        calls = [pt["functionCall"] for pt in parts if "functionCall" in pt]
        answers = [pt["functionResponse"] for pt in parts if "functionResponse" in pt]
        if expected:
            got = [(a.get("id"), a.get("name")) for a in answers]
            if role != "user" or sorted(map(str, got)) != sorted(map(str, expected)):
                _fail(p, f"functionCall(s) {expected} of content {asked_at} must be answered "
                      f"by functionResponse parts in the next content; content {i} has {got}", i)
        elif answers:
            _fail(p, "functionResponse parts answer no functionCall of the previous content", i)
        if calls and role != "model":
            _fail(p, "functionCall parts must be in a model content", i)
        for call in calls:
            _declared(p, declared, call.get("name"), i)
            call_id = call.get("id")
            if isinstance(call_id, str):
                if call_id in seen:
                    _fail(p, f"functionCall id {call_id!r} repeats an id: Gemini documents a call's "
                          "id as unique (a functionResponse is for the call with its id)", i)
                seen.add(call_id)
        expected = [(c.get("id"), c.get("name")) for c in calls]
        asked_at = i
    if expected:
        _fail(p, f"functionCall(s) {expected} have no functionResponse: the request ends with "
              "them", asked_at)


def check_protocol(provider: str, body: Mapping[str, Any]) -> None:
    """Raise :class:`RenderError` if ``body`` breaks a rule the provider enforces."""
    check_protocol_noting(provider, body)


def check_protocol_noting(provider: str, body: Mapping[str, Any]) -> bool | None:
    """:func:`check_protocol`, returning whether the history list is remembered dicts only
    (``request_json``) where the walk tells that without a pass of its own (openai-chat), else
    None. For ``validate_request``, which keeps a verdict only for bodies of such dicts."""
    name = parse_provider(provider)
    match name:
        case "openai-chat":
            return _check_openai_chat(name, body)
        case "openai-responses":
            _check_openai_responses(name, body)
        case "anthropic":
            _check_anthropic(name, body)
        case "gemini":
            _check_gemini(name, body)
        case _:
            assert_never(name)
    return None

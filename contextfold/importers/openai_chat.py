"""OpenAI Chat Completions messages -> events.

Accepted shapes: a JSON array of messages; an object with ``messages`` (a
request body; its ``model`` becomes the run's model); JSONL with one message
per line. Multi-run files: a JSON array of ``{"traj": [...]}`` records (the
tau-bench layout, one run per ``task_id``/``trial``) or JSONL whose lines each
hold ``messages`` or ``traj``.

A body's (or a record's) ``tools`` of type ``function`` and legacy ``functions`` -> one
:class:`ToolsRegistered` right after :class:`RunStarted` (see :mod:`._tools`); each record
registers its own.

Mapping, one message -> one event (so ``len(events) == len(messages) + 1``,
the extra one being :class:`RunStarted`, and one more when the body declares tools):

- ``system`` / ``developer`` -> :class:`PolicySet` (runtime trust)
- ``user`` -> :class:`UserInput` (text parts, ``image_url``, ``input_audio``, ``file``)
- ``assistant`` -> :class:`ModelResponse` (text, then a message-level ``refusal``, +
  ``tool_calls``; legacy ``function_call`` becomes one tool call)
- ``tool`` -> :class:`ToolResult` by ``tool_call_id``; legacy ``function``
  -> :class:`ToolResult` answering the oldest open legacy call of that name.

Legacy ``function_call`` carries no id. We synthesize ``fc-<N>`` where N is
the 0-based index of the assistant message in the run: stable across imports
of the same history and unique within the run (a live completion read on its
own, ``read_response``, is ``fc-<its id>``: unique across the run's responses).
"""

from __future__ import annotations

from typing import Any

from contextfold.domain.event_values import is_data_url
from contextfold.domain.events import (
    AnyEvent,
    ContentBlock,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolSpec,
    UserInput,
)
from contextfold.importers._common import (
    RunBuilder,
    build,
    get_list,
    get_obj,
    get_str,
    media_block,
    openai_parts,
    opt_str,
    require_obj,
    spelled_json,
    text_only,
)
from contextfold.importers._json import Bad, Doc, JsonPath
from contextfold.importers._tools import chat_tools

__all__ = ["assistant_response", "media_part", "parse_doc", "parse_messages", "tool_calls"]

_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def media_part(kind: str, part: dict[str, Any], p: JsonPath) -> ContentBlock:
    """Chat Completions media parts: image_url, input_audio, file (SWE-agent's history uses them too)."""
    if kind == "image_url":
        img = part.get("image_url")
        if isinstance(img, str):
            img = {"url": img}
        img = require_obj(img, (*p, "image_url"), "'image_url' to be an object")
        return media_block("image", p, url=get_str(img, "url", (*p, "image_url")),
                           detail=opt_str(img, "detail", (*p, "image_url")))
    if kind == "input_audio":
        audio = get_obj(part, "input_audio", p)
        fmt = opt_str(audio, "format", (*p, "input_audio")) or "wav"
        return media_block("document", p, data=get_str(audio, "data", (*p, "input_audio")),
                           media_type=f"audio/{fmt}")
    if kind == "file":
        f = get_obj(part, "file", p)
        fp = (*p, "file")
        data = opt_str(f, "file_data", fp)
        file_id = opt_str(f, "file_id", fp)
        title = opt_str(f, "filename", fp)
        if data is not None:
            return media_block("document", fp, url=data if is_data_url(data) else None,
                               data=None if is_data_url(data) else data, title=title)
        if file_id is not None:
            return media_block("document", fp, url=f"openai-file://{file_id}", title=title)
        raise Bad(fp, "file part without 'file_data' or 'file_id'")
    raise Bad(p, f"unsupported content part type {kind!r}")


def _parts(content: Any, path: JsonPath) -> tuple[ContentBlock, ...]:
    """User/system content: a string or a list of content parts."""
    return openai_parts(content, path, media_part)


def _text(content: Any, path: JsonPath) -> str:
    """Assistant/tool/system content flattened to text (text and refusal parts only)."""
    return "" if content is None else text_only(_parts(content, path), path)


def _reply_text(msg: dict[str, Any], path: JsonPath) -> str:
    """An assistant message's text: its content, then its message-level ``refusal``.

    Why: when the model refuses, Chat Completions returns ``content: null`` and the refusal's
    words in ``refusal`` (not as a content part). Read from ``content`` alone, the turn imported
    empty: rebuilt, the model was shown having said nothing, and for Anthropic the empty turn
    vanished and the user turns around it merged."""
    content = msg.get("content")
    text = _text(content, (*path, "content"))
    audio = msg.get("audio")
    if not text and isinstance(audio, dict) and isinstance(audio.get("transcript"), str):
        text = audio["transcript"]  # a spoken reply (see :func:`assistant_response`)
    refusal = opt_str(msg, "refusal", path)
    parts = content if isinstance(content, list) else []
    if not refusal or {"type": "refusal", "refusal": refusal} in parts:  # a part already carried it
        return text
    return f"{text}\n{refusal}" if text else refusal


def tool_calls(msg: dict[str, Any], path: JsonPath, index: int | str) -> list[ToolCall]:
    """An assistant message's ``tool_calls`` (and legacy ``function_call``, id ``fc-<index>``)."""
    calls: list[ToolCall] = []
    raw_calls = msg.get("tool_calls")
    if raw_calls is not None:
        if not isinstance(raw_calls, list):
            raise Bad((*path, "tool_calls"), "expected 'tool_calls' to be an array")
        for j, raw in enumerate(raw_calls):
            p = (*path, "tool_calls", j)
            tc = require_obj(raw, p, "a tool call object")
            cid = get_str(tc, "id", p)
            if tc.get("type", "function") == "custom":
                custom = get_obj(tc, "custom", p)
                calls.append(build(ToolCall, p, call_id=cid, name=get_str(custom, "name", p),
                                   arguments=get_str(custom, "input", (*p, "custom"))))
                continue
            fn = get_obj(tc, "function", p)
            calls.append(build(ToolCall, p, call_id=cid, name=get_str(fn, "name", (*p, "function")),
                               arguments=_arguments(fn, (*p, "function"))))
    legacy = msg.get("function_call")
    if legacy is not None:
        p = (*path, "function_call")
        fn = require_obj(legacy, p, "'function_call' to be an object")
        calls.append(build(ToolCall, p, call_id=f"fc-{index}", name=get_str(fn, "name", p),
                           arguments=_arguments(fn, p)))
    return calls


def assistant_response(msg: dict[str, Any], path: JsonPath, index: int | str) -> ModelResponse:
    """An assistant message (at ``path``, the ``index``-th message of its run, or a live
    completion's id) as the :class:`ModelResponse` it is: its text, then its refusal, and its
    calls. One reading for a history's messages and a live completion's
    (``importers.provider_reply``). A spoken reply (``modalities`` with ``audio``: ``content``
    null) is its ``audio.transcript``; the audio's ``id`` is not kept: it expires
    (``expires_at``), and a later request naming it is refused, where the transcript is what
    was said."""
    return build(ModelResponse, path, text=_reply_text(msg, path),
                 tool_calls=tuple(tool_calls(msg, path, index)))


def _arguments(fn: dict[str, Any], path: JsonPath) -> str:
    args = fn.get("arguments", "{}")
    if isinstance(args, str):
        return args
    if isinstance(args, dict):  # some exporters store parsed arguments
        return spelled_json(args)
    raise Bad((*path, "arguments"), "expected 'arguments' to be a JSON string")


def parse_messages(messages: list[Any], path: JsonPath, *, model: str | None = None,
                   tools: list[ToolSpec] | None = None) -> list[AnyEvent]:
    """Map one run's message list (at ``path`` in the document) to events, after the
    registration of ``tools`` (the body's) when there are any."""
    run = RunBuilder(model=model, tools=tools or ())
    for i, raw in enumerate(messages):
        p = (*path, i)
        msg = require_obj(raw, p, "a message object")
        role = get_str(msg, "role", p)
        event: AnyEvent
        match role:
            case "system" | "developer":
                event = build(PolicySet, p, text=_text(msg.get("content"), (*p, "content")))
            case "user":
                if "content" not in msg:
                    raise Bad(p, "missing field 'content'")
                event = build(UserInput, p, content=_parts(msg["content"], (*p, "content")))
            case "assistant":
                event = assistant_response(msg, p, i)
            case "tool":
                event = build(ToolResult, p, call_id=get_str(msg, "tool_call_id", p),
                              content=_text(msg.get("content"), (*p, "content")),
                              is_error=msg.get("is_error") is True)
            case "function":
                name = get_str(msg, "name", p)
                cid = run.oldest_open(name)
                if cid is None:
                    raise Bad(p, f"'function' message for {name!r} answers no open function_call")
                event = build(ToolResult, p, call_id=cid,
                              content=_text(msg.get("content"), (*p, "content")))
            case _:
                raise Bad((*p, "role"), f"unknown role {role!r} (expected one of {_ROLES})")
        run.add(event, p)
    return run.events


def _run_record(rec: dict[str, Any], path: JsonPath) -> list[AnyEvent]:
    key = "traj" if "traj" in rec else "messages"
    model = rec.get("model") if isinstance(rec.get("model"), str) else None
    return parse_messages(get_list(rec, key, path), (*path, key), model=model,
                          tools=chat_tools(rec, path))


def _suffix(rec: dict[str, Any], n: int) -> str:
    if "task_id" in rec:
        trial = rec.get("trial")
        return f"task-{rec['task_id']}" + (f"-trial-{trial}" if trial is not None else "")
    rid = rec.get("id")
    return str(rid) if isinstance(rid, str | int) else f"run-{n}"


def _is_run_record(v: Any) -> bool:
    return isinstance(v, dict) and ("traj" in v or "messages" in v) and "role" not in v


def parse_doc(doc: Doc) -> list[tuple[str, list[AnyEvent]]]:
    """All runs in ``doc``; ``""`` is the suffix of a single-run source."""
    value = doc.value
    if isinstance(value, dict) and not doc.jsonl:
        if "role" in value:  # a one-line JSONL file
            return [("", parse_messages([value], ()))]
        return [("", _run_record(value, ()))]
    if not isinstance(value, list):
        raise Bad((), "expected a JSON array of messages or an object with 'messages'")
    if value and all(_is_run_record(v) for v in value):
        out: list[tuple[str, list[AnyEvent]]] = []
        seen: set[str] = set()
        for n, rec in enumerate(value):
            suffix = _suffix(rec, n)
            if suffix in seen:
                suffix = f"{suffix}-{n}"
            seen.add(suffix)
            out.append((suffix, _run_record(rec, (n,))))
        return out
    return [("", parse_messages(value, ()))]

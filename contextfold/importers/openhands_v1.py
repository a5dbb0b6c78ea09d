"""OpenHands V1 event streams (the software-agent SDK, ``openhands-sdk``) -> events.

A V1 conversation is kept one event per file (``<conversation>/events/event-00000-<uuid>.json``)
and served by the agent server as lists of the same objects; every event names its ``kind``:

- ``SystemPromptEvent`` -> :class:`PolicySet`: its ``system_prompt`` text, then its
  ``dynamic_context`` (the same system message's second block).
- ``MessageEvent`` from the user -> :class:`UserInput` (text and image parts, then the
  ``extended_content`` the agent appended for the model); from the agent ->
  :class:`ModelResponse` text.
- ``ActionEvent`` -> a tool call with ``tool_call``'s id, name and verbatim arguments. The
  actions of one model response (one ``llm_response_id``) form ONE :class:`ModelResponse` with
  all their calls, emitted at the first of them (its text: that action's ``thought``): a
  parallel batch stays a batch although each action is its own event.
- ``ObservationEvent`` -> :class:`ToolResult` for its ``tool_call_id``: the text (and images) of
  ``observation.content``, then ``extended_content``; ``is_error``; the terminal's exit code.
  A file editor's observations are workspace content, the rest external.
- ``UserRejectObservation`` -> an error result "Action rejected: <reason>", as the model is told.
- ``AgentErrorEvent`` -> an error result for its call (the model sees the error as the call's
  result), or a :class:`RuntimeNote` (``is_error``) when it answers no open call: the runtime
  speaking, not the user (as a user input it became the run's required current input).
- ``Condensation`` with a ``summary`` -> :class:`HistoryCompacted` over the events it and the
  earlier ones forgot (``forgotten_event_ids``), when they are one legal cover (see
  :mod:`contextfold.importers._condensation`); otherwise it is skipped, the events kept whole.
- Bookkeeping (state updates, pauses, interrupts, streaming deltas, token ids, hook runs,
  completion logs, condensation requests and the summary events a view derives) is skipped.

An unknown ``kind`` is an error that names it: nothing is dropped unseen. A
``SystemPromptEvent``'s tools in OpenAI's shape (``{"type": "function", "function": {...}}``, as
some SDK versions list them) are registered (:class:`ToolsRegistered`, right after its
:class:`PolicySet`); the SDK's own tool definitions are not (their dump holds the SDK's classes,
not a schema).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from contextfold.domain.event_times import source_time
from contextfold.domain.events import (
    AnyEvent,
    ContentBlock,
    ModelResponse,
    PolicySet,
    RuntimeNote,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolsRegistered,
    UserInput,
)
from contextfold.importers._common import RunBuilder, build, media_block, require_obj, text_of_blocks
from contextfold.importers._condensation import Condensations
from contextfold.importers._json import Bad, JsonPath
from contextfold.importers._tools import function_shaped_tools

__all__ = ["KINDS", "is_event", "parse_events", "parse_events_timed"]

_SKIPPED = frozenset({
    "ConversationStateUpdateEvent", "ConversationErrorEvent", "PauseEvent", "InterruptEvent",
    "StreamingDeltaEvent", "TokenEvent", "HookExecutionEvent", "LLMCompletionLogEvent",
    "CondensationRequest", "CondensationSummaryEvent", "ACPToolCallEvent",
})
KINDS = frozenset({"SystemPromptEvent", "MessageEvent", "ActionEvent", "ObservationEvent",
                   "UserRejectObservation", "AgentErrorEvent", "Condensation"}) | _SKIPPED
"""The event kinds this importer reads or skips on purpose."""
_WORKSPACE_TOOLS = frozenset({"file_editor", "str_replace_editor", "planning_file_editor"})


def is_event(value: Any) -> bool:
    """Whether ``value`` is a V1 event object (its ``kind`` one this importer knows)."""
    return isinstance(value, dict) and value.get("kind") in KINDS


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _parts(items: Any, path: JsonPath) -> list[ContentBlock]:
    """Text and image content parts (``{"type": "text", "text"}``, ``{"type": "image",
    "image_urls"}``) as blocks; a part of another type is an error."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise Bad(path, "expected a list of content parts")
    blocks: list[ContentBlock] = []
    for i, raw in enumerate(items):
        p = (*path, i)
        part = require_obj(raw, p, "a content part object")
        kind = part.get("type", "text")
        if kind == "text":
            blocks.append(TextBlock(text=_text(part.get("text"))))
        elif kind == "image":
            urls = part.get("image_urls")
            if not isinstance(urls, list):
                raise Bad(p, "an image part without 'image_urls'")
            blocks += [media_block("image", (*p, "image_urls", j), url=u)
                       for j, u in enumerate(urls) if isinstance(u, str)]
        else:
            raise Bad(p, f"unknown content part type {kind!r}")
    return blocks


def _call(e: dict[str, Any], path: JsonPath) -> ToolCall:
    call = e.get("tool_call")
    call = require_obj(call, (*path, "tool_call"), "a tool call object") if call is not None else {}
    arguments = call.get("arguments")
    return build(ToolCall, path, call_id=call.get("id") or e.get("tool_call_id"),
                 name=call.get("name") or e.get("tool_name"),
                 arguments=arguments if isinstance(arguments, str) else "{}")


def _batches(events: list[dict[str, Any]]) -> dict[int, list[int]]:
    """First action of each model response -> the indices of all its actions."""
    first: dict[str, int] = {}
    groups: dict[int, list[int]] = {}
    for i, e in enumerate(events):
        if e.get("kind") != "ActionEvent":
            continue
        rid = e.get("llm_response_id")
        if isinstance(rid, str) and rid in first:
            groups[first[rid]].append(i)
            continue
        if isinstance(rid, str) and rid:
            first[rid] = i
        groups[i] = [i]
    return groups


def _exit_code(observation: dict[str, Any]) -> int | None:
    meta = observation.get("metadata")
    for code in (observation.get("exit_code"), meta.get("exit_code") if isinstance(meta, dict) else None):
        if isinstance(code, int) and not isinstance(code, bool) and code != -1:  # -1: still running
            return code
    return None


def _result(e: dict[str, Any], p: JsonPath, run: RunBuilder) -> None:
    kind = e["kind"]
    cid = e.get("tool_call_id")
    tool = _text(e.get("tool_name"))
    if kind == "ObservationEvent":
        observation = require_obj(e.get("observation"), (*p, "observation"), "an observation object")
        blocks = (_parts(observation.get("content"), (*p, "observation", "content"))
                  + _parts(e.get("extended_content"), (*p, "extended_content")))
        text, media = text_of_blocks(tuple(blocks)), tuple(b for b in blocks if not isinstance(b, TextBlock))
        code = _exit_code(observation)
        error = observation.get("is_error") is True or code not in (None, 0)
        origin = "workspace" if tool in _WORKSPACE_TOOLS else "external"
        run.add(build(ToolResult, p, call_id=cid, content=text, blocks=media, is_error=error,
                      exit_code=code, origin=origin), p)
        return
    text = (f"Action rejected: {_text(e.get('rejection_reason')) or 'User rejected the action'}"
            if kind == "UserRejectObservation" else _text(e.get("error")))
    if isinstance(cid, str) and run.is_open(cid):
        run.add(build(ToolResult, p, call_id=cid, content=text, is_error=True), p)
    else:  # an agent error answering no call (a malformed one was refused): the runtime's words,
        # shown to the model, never the user's current input
        run.add(build(RuntimeNote, p, text=text, is_error=True,
                      source_ref=f"openhands://error/{_text(e.get('id')) or p[-1]}"), p)


def parse_events(events: list[Any], path: JsonPath, *, model: str | None = None,
                 agent: str | None = None) -> list[AnyEvent]:
    """The events of one V1 conversation (``events`` in log order)."""
    return parse_events_timed(events, path, model=model, agent=agent)[0]


def parse_events_timed(events: list[Any], path: JsonPath, *, model: str | None = None,
                       agent: str | None = None) -> tuple[list[AnyEvent], list[datetime | None]]:
    """:func:`parse_events`' events and each one's time: its V1 event's ``timestamp`` (ISO 8601;
    without a zone, UTC), None for the events the import adds and an event without one."""
    objs = [require_obj(e, (*path, i), "an OpenHands event object") for i, e in enumerate(events)]
    run = RunBuilder(model=model, agent=agent)
    batches = _batches(objs)
    condensations = Condensations(run)
    for i, e in enumerate(objs):
        condensations.begin(e, i)
        run.now = source_time(e.get("timestamp"))
        p = (*path, i)
        kind = e.get("kind")
        if kind in _SKIPPED or (kind == "ActionEvent" and i not in batches):
            continue  # bookkeeping, or an action its response's first action carries
        if kind == "Condensation":
            ids = e.get("forgotten_event_ids")
            forgotten = [x for x in ids if isinstance(x, str | int)] if isinstance(ids, list) else []
            condensations.condense(forgotten, e.get("summary"), p)
            continue
        if kind == "SystemPromptEvent":
            prompt = [e.get("system_prompt"), *([e["dynamic_context"]] if e.get("dynamic_context") else [])]
            blocks = _parts(prompt, (*p, "system_prompt"))
            text = "\n\n".join(b.text for b in blocks if isinstance(b, TextBlock))
            run.add(build(PolicySet, p, text=text), p)
            specs = function_shaped_tools(e.get("tools"), (*p, "tools"))
            if specs:
                run.add(ToolsRegistered(tools=tuple(specs)), p)
        elif kind == "MessageEvent":
            message = require_obj(e.get("llm_message"), (*p, "llm_message"), "a message object")
            content = message.get("content")
            blocks = ([TextBlock(text=content)] if isinstance(content, str)
                      else _parts(content, (*p, "llm_message", "content")))
            blocks += _parts(e.get("extended_content"), (*p, "extended_content"))
            if e.get("source") == "user":
                run.add(build(UserInput, p, content=tuple(blocks)), p)
            else:
                run.add(build(ModelResponse, p, text=text_of_blocks(tuple(blocks))), p)
        elif kind == "ActionEvent":
            calls = [_call(objs[j], (*path, j)) for j in batches[i]]
            thought = text_of_blocks(tuple(_parts(e.get("thought"), (*p, "thought"))))
            run.add(build(ModelResponse, p, text=thought, tool_calls=tuple(calls)), p)
        elif kind in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent"):
            _result(e, p, run)
        else:
            raise Bad((*p, "kind"), f"unknown OpenHands event kind {kind!r}")
    return run.events, run.times

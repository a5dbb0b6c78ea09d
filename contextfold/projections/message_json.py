"""A request message's JSON dump written field by field: ``message.model_dump(mode="json")`` for
the messages a tau-bench turn adds (a user's words, a reply with calls, tool results of text).

Why: every new message of a turn is dumped once for the neutral request (``request_json``), and
pydantic's serializer is dear on these small models: a ``ToolResults`` of one short text took 6.1
us, the same dict made here 2.3 us (``timeit``, a loaded machine); a one-part user message 3.0 us
by pydantic. The dict is the same, key for key and in the same order (a model's fields in
their declared order, ``mode="json"``: tuples as lists, a field whose ``exclude_if`` holds left
out).

Only the exact classes below are written here, and only with what their schemas hold today; a
message holding anything else (a medium, provider reasoning, a subclass) answers None and is
dumped by pydantic. The suite (``trusted.CHECKED``) compares each dict made here with pydantic's,
and ``tests/unit/test_message_json.py`` pins each class's fields: a field added to one of these
models fails there until it is written here too.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from contextfold.domain.conversation import (
    AssistantMessage,
    DataPart,
    InstructionPart,
    ToolCallPart,
    ToolResultPart,
    ToolResults,
    UserMessage,
)

__all__ = ["WRITTEN", "message_json"]

WRITTEN: dict[type[BaseModel], tuple[str, ...]] = {
    InstructionPart: ("type", "text", "authority", "fragment_id"),
    DataPart: ("type", "text", "source", "trust", "label", "truncated", "fragment_id"),
    UserMessage: ("role", "parts"),
    ToolCallPart: ("call_id", "alias", "alias_for", "name", "arguments"),
    AssistantMessage: ("role", "text", "tool_calls", "fragment_id", "reasoning", "text_breaks"),
    ToolResultPart: ("call_id", "alias", "alias_for", "name", "status", "content", "exit_code",
                     "fragment_id"),
    ToolResults: ("role", "results"),
}
"""The fields each class written here has, in order: what the functions below write (the test
compares them with the models' own)."""


def _part(p: object) -> dict[str, Any] | None:
    if type(p) is InstructionPart:
        return {"type": p.type, "text": p.text, "authority": p.authority, "fragment_id": p.fragment_id}
    if type(p) is DataPart:
        return {"type": p.type, "text": p.text, "source": p.source, "trust": p.trust, "label": p.label,
                "truncated": p.truncated, "fragment_id": p.fragment_id}
    return None  # a medium (or a subclass): pydantic's


def _ids(part: ToolCallPart | ToolResultPart, out: dict[str, Any]) -> dict[str, Any]:
    """``out`` with the call id, and the alias and its providers where set (``exclude_if``)."""
    out["call_id"] = part.call_id
    if part.alias is not None:
        out["alias"] = part.alias
    if part.alias_for:
        out["alias_for"] = list(part.alias_for)
    return out


def message_json(message: object) -> dict[str, Any] | None:
    """``message.model_dump(mode="json")`` for the messages this module writes, else None."""
    if type(message) is UserMessage:
        parts = []
        for p in message.parts:
            d = _part(p)
            if d is None:
                return None
            parts.append(d)
        return {"role": message.role, "parts": parts}
    if type(message) is AssistantMessage:
        if message.reasoning is not None or message.text_breaks:
            return None
        calls = []
        for c in message.tool_calls:
            if type(c) is not ToolCallPart:
                return None
            d = _ids(c, {})
            d["name"], d["arguments"] = c.name, c.arguments
            calls.append(d)
        return {"role": message.role, "text": message.text, "tool_calls": calls,
                "fragment_id": message.fragment_id}
    if type(message) is ToolResults:
        results = []
        for r in message.results:
            if type(r) is not ToolResultPart:
                return None
            content = []
            for p in r.content:
                if type(p) is not DataPart:
                    return None
                d = _part(p)
                assert d is not None
                content.append(d)
            d = _ids(r, {})
            d["name"], d["status"], d["content"] = r.name, r.status, content
            d["exit_code"], d["fragment_id"] = r.exit_code, r.fragment_id
            results.append(d)
        return {"role": message.role, "results": results}
    return None

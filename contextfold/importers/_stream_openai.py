"""OpenAI's two streams folded: Chat Completions ``chat.completion.chunk`` deltas, and the
Responses API's ``response.*`` events (see :mod:`._stream_fold`).

Chat Completions: a choice's ``delta`` carries pieces of its content, refusal and calls; each
call's pieces name its ``index`` (parallel calls may interleave); ``finish_reason`` ends the choice
and, with ``stream_options.include_usage``, a last chunk of no choices carries the usage. As
``ChatCompletionStreamState`` accumulates them, but for a call's ``id`` and ``type``, which are
set once: servers that repeat them on every chunk had them joined (``call_acall_a``), an id no
result answers.

Responses: ``response.output_item.done`` holds an item whole (a reasoning item's
``encrypted_content`` arrives only there) and ``response.completed`` / ``response.incomplete``
the whole response, whose output, when the event leaves it out, is the done items, as the SDK's
``ResponseStreamState`` rebuilds it. Deltas are folded only for what a cut stream keeps: the text
of a message not done, and a call's arguments (to say it did not finish).
"""

from __future__ import annotations

from typing import Any

from contextfold.importers._common import get_list, require_obj
from contextfold.importers._json import Bad, JsonPath
from contextfold.importers._stream_fold import Fold, Pieces, merged, parses, require_index

__all__ = ["ChatFold", "ResponsesFold"]


class _ChatCall:
    __slots__ = ("arguments", "extra", "id", "name", "type")

    def __init__(self) -> None:
        self.id: str | None = None
        self.type: str | None = None
        self.name = Pieces()
        self.arguments = Pieces()
        self.extra: dict[str, Any] = {}

    def add(self, delta: dict[str, Any], path: JsonPath) -> None:
        for key, value in delta.items():
            if key in ("id", "type"):
                if getattr(self, key) is None and value:
                    setattr(self, key, value)
            elif key == "function":
                fn = require_obj(value, (*path, key), "'function' to be an object")
                if "name" in fn:
                    self.name.add(fn["name"], (*path, key, "name"))
                if "arguments" in fn:
                    self.arguments.add(fn["arguments"], (*path, key, "arguments"))
            elif key != "index":
                self.extra[key] = merged(self.extra.get(key), value)

    def whole(self, finished: bool) -> bool:
        """Its arguments closed; or none at all in a choice that finished (a call of no
        arguments, as some servers send it): a stream cut after a call's first chunk has none yet."""
        arguments = self.arguments.text()
        return parses(arguments) or (finished and not arguments)

    def built(self) -> dict[str, Any]:
        call: dict[str, Any] = {
            **self.extra,
            "type": self.type or "function",
            "function": {"name": self.name.text(), "arguments": self.arguments.text()},
        }
        if self.id is not None:
            call["id"] = self.id
        return call


class _ChatChoice:
    __slots__ = ("calls", "content", "extra", "finish", "refusal", "role")

    def __init__(self) -> None:
        self.role: Any = None
        self.content = Pieces()
        self.refusal = Pieces()
        self.calls: dict[int, _ChatCall] = {}
        self.finish: str | None = None
        self.extra: dict[str, Any] = {}

    def add(self, choice: dict[str, Any], path: JsonPath) -> None:
        delta = require_obj(choice.get("delta", {}), (*path, "delta"), "'delta' to be an object")
        for key, value in delta.items():
            dp = (*path, "delta", key)
            if key == "role":
                self.role = value
            elif key in ("content", "refusal"):
                getattr(self, key).add(value, dp)
            elif key == "tool_calls":
                for j, raw in enumerate(get_list(delta, key, (*path, "delta"))):
                    tc = require_obj(raw, (*dp, j), "a tool call delta")
                    index = require_index(tc, "index", (*dp, j))
                    self.calls.setdefault(index, _ChatCall()).add(tc, (*dp, j))
            else:
                self.extra[key] = merged(self.extra.get(key), value)
        finish = choice.get("finish_reason")
        if finish is not None:
            self.finish = finish

    def finished(self) -> bool:
        """The choice ended with a reason that is not its output limit."""
        return self.finish is not None and self.finish != "length"

    def built(self, index: int, whole: bool) -> dict[str, Any]:
        message: dict[str, Any] = {**self.extra, "role": self.role or "assistant"}
        for key in ("content", "refusal"):
            if pieces := getattr(self, key):
                message[key] = pieces.text()
        calls = [self.calls[i] for i in sorted(self.calls)]
        if whole:
            calls = [c for c in calls if c.whole(self.finished())]
        if calls:
            message["tool_calls"] = [c.built() for c in calls]
        choice: dict[str, Any] = {"index": index, "message": message}
        choice["finish_reason"] = "stop" if whole else self.finish
        return choice


class ChatFold(Fold):
    provider = "openai-chat"
    limits = frozenset({"length"})

    def __init__(self) -> None:
        super().__init__()
        self.top: dict[str, Any] = {}
        self.choices: dict[int, _ChatChoice] = {}
        self.usage: Any = None
        self.usage_asked = False
        """The chunks carry ``"usage": null``: ``stream_options.include_usage`` was asked, and the
        usage comes in a last chunk of no choices (OpenAI: "All other chunks will also include a
        usage field, but with a null value")."""
        self.done_said = False
        """``[DONE]`` came: the server ended the stream (whether or not its usage came)."""

    def add(self, event: dict[str, Any]) -> None:
        if "error" in event:  # an OpenAI-compatible server's error mid-stream
            error = event["error"]
            self.failure = str(error.get("message", error) if isinstance(error, dict) else error)
            return
        tag = event.get("object")
        if tag != "chat.completion.chunk":
            raise Bad(
                ("object",) if "object" in event else (),
                (
                    f"not an openai-chat stream chunk: 'object' is {tag!r}, expected 'chat.completion.chunk'"
                    + (" (a whole response: read it with read_response)" if tag == "chat.completion" else "")
                ),
            )
        for i, raw in enumerate(get_list(event, "choices", ())):
            choice = require_obj(raw, ("choices", i), "a choice object")
            index = require_index(choice, "index", ("choices", i))
            self.choices.setdefault(index, _ChatChoice()).add(choice, ("choices", i))
        for key, value in event.items():
            if key == "usage":
                if value is None:
                    self.usage_asked = True
                else:
                    self.usage = value
            elif key not in ("choices", "object", "obfuscation"):
                self.top[key] = value

    def finished(self) -> bool:
        return bool(self.choices) and all(c.finish is not None for c in self.choices.values())

    def ended(self) -> bool:
        """Every choice finished, and the usage came when it was asked (a stream cut between the
        finish reason and the usage chunk read whole, its usage lost: ``observe_usage`` then had
        nothing to calibrate with), unless the server said ``[DONE]`` without it."""
        return self.finished() and (self.usage is not None or not self.usage_asked or self.done_said)

    def stop(self) -> str | None:
        first = self.choices.get(min(self.choices)) if self.choices else None
        return first.finish if first else None

    def missing(self) -> list[str]:
        out = []
        for index in sorted(self.choices):
            choice = self.choices[index]
            out += [
                f"call {c.id!r} ({c.name.text()}): its arguments did not finish"
                for c in (choice.calls[i] for i in sorted(choice.calls))
                if not c.whole(choice.finished())
            ]
        if not self.finished():
            out.append("the stream's end (a finish_reason)")
        elif not self.ended():
            out.append("the usage chunk after the finish_reason (stream_options.include_usage asked "
                       "for it: every chunk said usage null); err.partial is the whole reply without it")
        return out

    def body(self, whole: bool) -> dict[str, Any]:
        body = {
            **self.top,
            "object": "chat.completion",
            "choices": [self.choices[i].built(i, whole) for i in sorted(self.choices)],
        }
        if self.usage is not None:
            body["usage"] = self.usage
        return body


_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
_CALLS = ("function_call", "custom_tool_call")


class _Item:
    """An output item not done yet: its text and arguments so far."""

    __slots__ = ("arguments", "item", "parts")

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item
        self.parts: dict[int, tuple[dict[str, Any], Pieces]] = {}
        self.arguments = Pieces()

    def built(self) -> dict[str, Any]:
        item = dict(self.item)
        if self.parts:
            item["content"] = [
                {**part, ("refusal" if part.get("type") == "refusal" else "text"): text.text()}
                for part, text in (self.parts[i] for i in sorted(self.parts))
            ]
        if self.arguments:
            item["input" if item.get("type") == "custom_tool_call" else "arguments"] = self.arguments.text()
        return item


class ResponsesFold(Fold):
    provider = "openai-responses"
    limits = frozenset({"max_output_tokens"})

    def __init__(self) -> None:
        super().__init__()
        self.response: dict[str, Any] = {}
        self.terminal: dict[str, Any] | None = None
        self.items: dict[int, _Item] = {}
        self.done: dict[int, dict[str, Any]] = {}

    def add(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "error":
            self.failure = str(event.get("message") or event.get("code") or "an error event")
            return
        if not isinstance(kind, str) or not kind.startswith("response."):
            raise Bad(
                ("type",) if "type" in event else (),
                (
                    f"not an openai-responses stream event: 'type' is {kind!r}, expected 'response.…'"
                    + (
                        " (a whole response: read it with read_response)"
                        if event.get("object") == "response"
                        else ""
                    )
                ),
            )
        if kind in ("response.created", "response.queued", "response.in_progress") or kind in _TERMINAL:
            response = require_obj(event.get("response"), ("response",), "'response' to be an object")
            if kind in _TERMINAL:
                self.terminal = response
                if kind == "response.failed":
                    error = response.get("error")
                    self.failure = str(
                        error.get("message") if isinstance(error, dict) else "the response failed"
                    )
            else:
                self.response = response
            return
        if kind == "response.output_item.added":
            index = require_index(event, "output_index", ())
            self.items[index] = _Item(require_obj(event.get("item"), ("item",), "'item' to be an object"))
        elif kind == "response.output_item.done":
            self.done[require_index(event, "output_index", ())] = require_obj(
                event.get("item"), ("item",), "'item' to be an object"
            )
        elif kind in _DELTAS:
            item = self._item(event)
            if kind == "response.content_part.added":
                part = require_obj(event.get("part"), ("part",), "'part' to be an object")
                text = Pieces(str(part.get("refusal" if part.get("type") == "refusal" else "text", "")))
                item.parts[require_index(event, "content_index", ())] = (part, text)
            elif kind in ("response.output_text.delta", "response.refusal.delta"):
                index = require_index(event, "content_index", ())
                if index not in item.parts:
                    item.parts[index] = (
                        {"type": "refusal" if "refusal" in kind else "output_text"},
                        Pieces(),
                    )
                item.parts[index][1].add(event.get("delta"), ("delta",))
            else:
                item.arguments.add(event.get("delta"), ("delta",))

    def _item(self, event: dict[str, Any]) -> _Item:
        index = require_index(event, "output_index", ())
        if index not in self.items:
            raise Bad(("output_index",), f"an event for output item {index} before its output_item.added")
        return self.items[index]

    def ended(self) -> bool:
        return self.terminal is not None and self.failure is None

    def stop(self) -> str | None:
        if self.terminal is None:
            return None
        details = self.terminal.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        return reason if isinstance(reason, str) else self.terminal.get("status")

    def _output(self) -> list[tuple[dict[str, Any], bool]]:
        """Each output item and whether it arrived whole, in output order."""
        if self.terminal is not None and isinstance(self.terminal.get("output"), list):
            return [
                (item, not (isinstance(item, dict) and item.get("status") == "incomplete"))
                for item in self.terminal["output"]
            ]
        return [
            (self.done[i], True) if i in self.done else (self.items[i].built(), False)
            for i in sorted(self.done.keys() | self.items.keys())
        ]

    def missing(self) -> list[str]:
        out = []
        for item, whole in self._output():
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind in _CALLS and not _whole_call(item, whole):
                out.append(f"call {item.get('call_id')!r} ({item.get('name')}): its arguments did not finish")
            elif not whole and kind != "message":
                out.append(f"{kind} item {item.get('id')!r}: its output_item.done did not arrive")
        if self.terminal is None:
            out.append("the stream's end (response.completed)")
        return out

    def body(self, whole: bool) -> dict[str, Any]:
        body = dict(self.terminal if self.terminal is not None else self.response)
        output = self._output()
        if whole:
            kept = []
            for item, done in output:
                kind = item.get("type") if isinstance(item, dict) else None
                if kind in _CALLS:
                    done = _whole_call(item, done)
                if done or kind == "message":
                    kept.append(item)
            if (
                self.stop() in self.limits
                and kept
                and isinstance(kept[-1], dict)
                and kept[-1].get("type") == "custom_tool_call"
            ):
                kept.pop()  # free text shows no cut: read_response refuses it, so it is no whole part
            body.update(status="completed", output=kept)
            body.pop("incomplete_details", None)
            body.pop("error", None)
        else:
            body["output"] = [item for item, _ in output]
        return body


_DELTAS = (
    "response.content_part.added",
    "response.output_text.delta",
    "response.refusal.delta",
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
)


def _whole_call(item: dict[str, Any], done: bool) -> bool:
    """A call item done (or in the response's output) and not ``incomplete``, whose arguments, if
    any, parse (read_response's test at the output limit)."""
    arguments = item.get("arguments", "")
    return done and (item.get("type") != "function_call" or not arguments or parses(arguments))

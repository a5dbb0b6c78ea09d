"""Anthropic's Messages stream folded (see :mod:`._stream_fold`): ``message_start`` opens the
message, each block is started, filled by deltas (``text_delta``, ``input_json_delta``,
``thinking_delta``, ``signature_delta``, ``citations_delta``) and stopped, ``message_delta`` brings
the stop reason and the final usage, ``message_stop`` closes. As the SDK's ``accumulate_event``,
but a call's input is its streamed JSON parsed once its block stopped: the SDK parses every
prefix leniently (``jiter`` partial mode), so a snapshot of a stream cut inside a call holds
arguments the model never finished, closed and plausible (``{"path": "/tmp/x"}`` of
``{"path": "/tmp/x", "recursive": tr``).

The events the SDK's ``messages.stream()`` helper adds (``text``, ``input_json``, ``thinking``,
``signature``, ``citation``) repeat a raw delta: skipped, so a runtime may feed every event the
helper yields. Unknown event and delta types are skipped, as the SDK does (Anthropic's
versioning policy adds them).
"""

from __future__ import annotations

import json
from typing import Any

from contextfold.importers._common import require_obj
from contextfold.importers._json import Bad
from contextfold.importers._stream_fold import Fold, Pieces, require_index

__all__ = ["HELPER_EVENTS", "AnthropicFold"]

HELPER_EVENTS = frozenset({"text", "input_json", "thinking", "signature", "citation"})
_CALLS = ("tool_use", "server_tool_use", "mcp_tool_use")


class _Block:
    __slots__ = ("block", "citations", "json", "signature", "stopped", "text", "thinking")

    def __init__(self, block: dict[str, Any]) -> None:
        self.block = block
        self.text = Pieces()
        self.thinking = Pieces()
        self.json = Pieces()
        self.signature: str | None = None
        self.citations: list[Any] = []
        self.stopped = False

    @property
    def kind(self) -> Any:
        return self.block.get("type")

    def input(self) -> Any:
        """The call's input: its streamed JSON parsed, the start's own without deltas; None
        while the JSON does not parse (cut)."""
        if not self.json:
            return self.block.get("input", {})
        try:
            return json.loads(self.json.text())
        except ValueError:
            return None

    def whole(self) -> bool:
        if not self.stopped:
            return False
        if self.kind in _CALLS:
            return self.input() is not None
        if self.kind == "thinking":
            return bool(self.signature or self.block.get("signature"))
        return True

    def built(self) -> dict[str, Any]:
        block = dict(self.block)
        if self.text:
            block["text"] = block.get("text", "") + self.text.text()
        if self.thinking:
            block["thinking"] = block.get("thinking", "") + self.thinking.text()
        if self.signature is not None:
            block["signature"] = self.signature
        if self.citations:
            block["citations"] = [*block.get("citations", []), *self.citations]
        if self.kind in _CALLS:
            block["input"] = self.input()
        return block


class AnthropicFold(Fold):
    provider = "anthropic"
    limits = frozenset({"max_tokens", "model_context_window_exceeded"})

    def __init__(self) -> None:
        super().__init__()
        self.message: dict[str, Any] | None = None
        self.usage: dict[str, Any] = {}
        self.blocks: dict[int, _Block] = {}

    def add(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "error":
            error = event.get("error")
            self.failure = (
                f"{error.get('type')}: {error.get('message')}"
                if isinstance(error, dict)
                else "an error event"
            )
            return
        if kind == "message" or not isinstance(kind, str):
            raise Bad(
                ("type",) if "type" in event else (),
                (
                    f"not an anthropic stream event: 'type' is {kind!r}"
                    + (" (a whole response: read it with read_response)" if kind == "message" else "")
                ),
            )
        if kind == "message_start":
            self.message = dict(require_obj(event.get("message"), ("message",), "'message' to be an object"))
            self.usage = dict(self.message.pop("usage", None) or {})
            self.message.pop("content", None)
            return
        if kind in HELPER_EVENTS or kind == "ping" or kind not in _KNOWN:
            return
        if self.message is None:
            raise Bad(("type",), f"a {kind!r} event before message_start")
        if kind == "message_delta":
            delta = require_obj(event.get("delta", {}), ("delta",), "'delta' to be an object")
            self.message.update(delta)
            usage = event.get("usage")
            if isinstance(usage, dict):  # cumulative counts: they replace, as the SDK's do
                self.usage.update(usage)
            return
        if kind == "message_stop":
            return
        index = require_index(event, "index", ())
        if kind == "content_block_start":
            self.blocks[index] = _Block(
                dict(
                    require_obj(
                        event.get("content_block"), ("content_block",), "'content_block' to be an object"
                    )
                )
            )
            return
        block = self.blocks.get(index)
        if block is None:
            raise Bad(("index",), f"a {kind!r} event for block {index} before its content_block_start")
        if kind == "content_block_stop":
            block.stopped = True
            return
        delta = require_obj(event.get("delta"), ("delta",), "'delta' to be an object")
        match delta.get("type"):
            case "text_delta":
                block.text.add(delta.get("text"), ("delta", "text"))
            case "input_json_delta":
                block.json.add(delta.get("partial_json"), ("delta", "partial_json"))
            case "thinking_delta":
                block.thinking.add(delta.get("thinking"), ("delta", "thinking"))
            case "signature_delta":
                block.signature = delta.get("signature")
            case "citations_delta":
                block.citations.append(delta.get("citation"))

    def ended(self) -> bool:
        return self.message is not None and self.message.get("stop_reason") is not None and not self.failure

    def stop(self) -> str | None:
        return self.message.get("stop_reason") if self.message is not None else None

    def missing(self) -> list[str]:
        out = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.whole():
                continue
            if block.kind in _CALLS:
                out.append(
                    f"call {block.block.get('id')!r} ({block.block.get('name')}): its input did not finish"
                )
            elif block.kind == "thinking" and block.stopped:
                out.append(f"thinking block {index}: its signature did not arrive")
            else:
                out.append(f"{block.kind} block {index}: its content_block_stop did not arrive")
        if self.message is None:
            out.append("the stream's start (message_start)")
        elif self.message.get("stop_reason") is None:
            out.append("the stream's end (message_delta with the stop_reason)")
        return out

    def body(self, whole: bool) -> dict[str, Any]:
        blocks = [self.blocks[i] for i in sorted(self.blocks)]
        if whole:
            blocks = [b for b in blocks if b.whole() or b.kind == "text"]
            if self.stop() in self.limits and blocks and blocks[-1].kind in _CALLS:
                blocks.pop()  # read_response refuses the call that ends a cut response: no whole part
        body = {**(self.message or {}), "content": [b.built() for b in blocks]}
        if whole:
            body["stop_reason"] = "end_turn"
        if self.usage:
            body["usage"] = self.usage
        return body


_KNOWN = frozenset(
    {"message_delta", "message_stop", "content_block_start", "content_block_delta", "content_block_stop"}
)

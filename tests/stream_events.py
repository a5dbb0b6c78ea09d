"""A whole provider response (``tests/unit/test_read_response``'s fixtures) as its provider
streams it: the events, in pieces, as each API sends them. Shared by the unit tests (fed to the
SDKs' accumulators and to ``contextfold.StreamReader``) and the integration tests (served as
server-sent events to the SDK clients).

Pieces are cut small and everywhere: inside JSON tokens and keys of the arguments, inside a
``\\u`` escape, between the bytes of no character (a delta is a string) but next to non-ASCII
ones; parallel calls' pieces interleave by index (Chat Completions), and the usage comes last.
"""

from __future__ import annotations

import json
from itertools import zip_longest
from typing import Any

__all__ = ["anthropic_events", "chat_chunks", "gemini_chunks", "pieces", "responses_events", "sse"]


def pieces(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def sse(events: list[Any], *, named: bool = False, done: bool = False) -> bytes:
    """The events as a ``text/event-stream`` body (``event:`` lines for Anthropic and Responses)."""
    out = []
    for data in events:
        line = f"event: {data['type']}\n" if named else ""
        out.append(f"{line}data: {json.dumps(data, ensure_ascii=False)}\n\n")
    if done:
        out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def chat_chunks(body: dict[str, Any], *, size: int = 3, interleave: bool = True) -> list[dict[str, Any]]:
    """A Chat Completions response as ``chat.completion.chunk``s: the role, the content (or the
    refusal) in pieces, every call's id and name, then their arguments' pieces round-robin by
    index, the finish reason, and the usage in a last chunk of no choices (``include_usage``)."""
    base = {
        "id": body["id"],
        "object": "chat.completion.chunk",
        "created": body["created"],
        "model": body["model"],
        "system_fingerprint": "fp_1",
        "usage": None,
    }
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": "" if message.get("content") is not None else None})]
    for key in ("content", "refusal"):
        if message.get(key):
            out += [chunk({key: p}) for p in pieces(message[key], size)]
    calls = message.get("tool_calls") or []
    for n, call in enumerate(calls):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": n,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
        )
    split = [[(n, p) for p in pieces(call["function"]["arguments"], size)] for n, call in enumerate(calls)]
    order = (
        [x for row in zip_longest(*split) for x in row if x] if interleave else [x for s in split for x in s]
    )
    out += [chunk({"tool_calls": [{"index": n, "function": {"arguments": piece}}]}) for n, piece in order]
    out.append(chunk({}, choice["finish_reason"]))
    if body.get("usage"):
        out.append({**base, "choices": [], "usage": body["usage"]})
    return out


def anthropic_events(body: dict[str, Any], *, size: int = 4) -> list[dict[str, Any]]:
    """A Messages response as its stream: message_start, each block started, filled by deltas
    (thinking then its ``signature_delta``, text, a call's input as partial JSON) and stopped;
    blocks that stream no deltas (redacted thinking, a server tool's result) start whole."""
    start = {k: v for k, v in body.items() if k not in ("content", "stop_reason", "stop_sequence", "usage")}
    usage = body.get("usage", {})
    out: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                **start,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {**usage, "output_tokens": 1},
            },
        }
    ]
    for n, block in enumerate(body["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        opened: dict[str, Any]
        if kind == "thinking":
            opened = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(block["thinking"], size)]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            opened = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in pieces(block["text"], size)]
        elif kind in ("tool_use", "server_tool_use"):
            opened = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in pieces(json.dumps(block["input"], ensure_ascii=False), size)
            ]
        else:
            opened = block
        out.append({"type": "content_block_start", "index": n, "content_block": opened})
        out += [{"type": "content_block_delta", "index": n, "delta": d} for d in deltas]
        out.append({"type": "content_block_stop", "index": n})
    out.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage.get("output_tokens", 0)},
        }
    )
    out.append({"type": "message_stop"})
    return out


def responses_events(
    body: dict[str, Any], *, size: int = 4, output_on_end: bool = True
) -> list[dict[str, Any]]:
    """A Responses response as its stream: ``response.created``, each output item added (a
    reasoning item without its ``encrypted_content``, a message without its text, a call without
    its arguments), filled by deltas, done whole, then the terminal event with the response (its
    output left out when ``output_on_end`` is false: the SDK rebuilds it from the done items)."""
    head = {k: v for k, v in body.items() if k not in ("output", "usage")}
    seq = iter(range(10_000))
    out: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "sequence_number": next(seq),
            "response": {**head, "status": "in_progress", "output": [], "incomplete_details": None},
        }
    ]
    for i, item in enumerate(body["output"]):
        added = dict(item)
        if item["type"] == "reasoning":
            added = {"type": "reasoning", "id": item["id"], "summary": []}
        elif item["type"] == "message":
            added = {**item, "content": [], "status": "in_progress"}
        elif item["type"] == "function_call":
            added = {**item, "arguments": "", "status": "in_progress"}
        ids = {"output_index": i, "item_id": item.get("id")}
        out.append(
            {
                "type": "response.output_item.added",
                "sequence_number": next(seq),
                "output_index": i,
                "item": added,
            }
        )
        if item["type"] == "message":
            for c, part in enumerate(item["content"]):
                kind = part["type"]
                key = "refusal" if kind == "refusal" else "text"
                out.append(
                    {
                        "type": "response.content_part.added",
                        "sequence_number": next(seq),
                        **ids,
                        "content_index": c,
                        "part": {**part, key: ""},
                    }
                )
                delta = "response.refusal.delta" if kind == "refusal" else "response.output_text.delta"
                out += [
                    {
                        "type": delta,
                        "sequence_number": next(seq),
                        **ids,
                        "content_index": c,
                        "delta": p,
                        **({} if kind == "refusal" else {"logprobs": []}),
                    }
                    for p in pieces(part[key], size)
                ]
        elif item["type"] == "function_call":
            out += [
                {
                    "type": "response.function_call_arguments.delta",
                    "sequence_number": next(seq),
                    **ids,
                    "delta": p,
                }
                for p in pieces(item["arguments"], size)
            ]
        out.append(
            {
                "type": "response.output_item.done",
                "sequence_number": next(seq),
                "output_index": i,
                "item": item,
            }
        )
    end = "response.incomplete" if body.get("status") == "incomplete" else "response.completed"
    final = body if output_on_end else {k: v for k, v in body.items() if k != "output"}
    out.append({"type": end, "sequence_number": next(seq), "response": final})
    return out


def gemini_chunks(body: dict[str, Any], *, size: int = 4) -> list[dict[str, Any]]:
    """A generateContent response as ``streamGenerateContent`` sends it: a chunk per piece of
    text, a text's signature on an empty text part of its own, a function call whole in a chunk,
    the finish reason on the last chunk; every chunk with the running usage and the model."""
    candidate = body["candidates"][0]
    meta = {k: v for k, v in body.items() if k != "candidates"}
    parts: list[dict[str, Any]] = []
    for part in candidate["content"]["parts"]:
        if "text" in part:
            thought = {"thought": True} if part.get("thought") else {}
            parts += [{"text": p, **thought} for p in pieces(part["text"], size)]
            if "thoughtSignature" in part:
                parts.append({"text": "", **thought, "thoughtSignature": part["thoughtSignature"]})
        else:
            parts.append(part)
    out = []
    for n, part in enumerate(parts):
        chunk_candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        if n == len(parts) - 1:
            chunk_candidate["finishReason"] = candidate["finishReason"]
        out.append({"candidates": [chunk_candidate], **meta})
    return out

"""The tool calls and their answers a request body carries, read from the provider's own shape.

Why one reader: the tests that check pairing from the outside (the run-life machine, the wide
parallel batches, the imports of recorded requests) each walked the four providers' bodies with
their own copy of this; a shape one copy learned (Responses' custom tools, Anthropic's server
tools) the others did not. Read independently of the renderers: a test that reused the
renderer's own notion of a call would agree with it whatever it wrote.
"""

from __future__ import annotations

from typing import Any

__all__ = ["calls_and_answers"]

_RESPONSES_CALLS = ("function_call", "custom_tool_call", "tool_search_call")
_RESPONSES_ANSWERS = ("function_call_output", "custom_tool_call_output", "tool_search_output")


def calls_and_answers(provider: str, body: dict[str, Any]) -> tuple[list[str], list[tuple[str, Any]]]:
    """The call ids of ``body`` in order, and each answer as ``(call id, the item carrying it)``
    in order. ``provider``: ``neutral``, ``openai-chat``, ``openai-responses``, ``anthropic`` or
    ``gemini``. Anthropic's server tools (``server_tool_use`` and its ``*_tool_result``) are no
    call and no answer (the API pairs them inside the turn: an import keeps them verbatim in the
    response's reasoning); the beta MCP connector's ``mcp_tool_use``/``mcp_tool_result`` are. A
    Responses answer with no ``call_id`` answers the call of its position."""
    calls: list[str] = []
    answers: list[tuple[str, Any]] = []
    match provider:
        case "neutral":
            for m in body["messages"]:
                calls += [c["call_id"] for c in m.get("tool_calls", ())]
                answers += [(r["call_id"], r) for r in m.get("results", ())]
        case "openai-chat":
            for m in body["messages"]:
                calls += [c["id"] for c in m.get("tool_calls") or ()]
                answers += [(m["tool_call_id"], m)] if m["role"] == "tool" else []
        case "openai-responses":
            for item in body["input"] if isinstance(body["input"], list) else ():
                if item.get("type") in _RESPONSES_CALLS:
                    calls.append(item.get("call_id") or item["id"])
                elif item.get("type") in _RESPONSES_ANSWERS:
                    answers.append((item.get("call_id") or calls[len(answers)], item))
        case "anthropic":
            for m in body["messages"]:
                for block in m["content"] if isinstance(m["content"], list) else ():
                    kind = block.get("type", "")
                    if kind in ("tool_use", "mcp_tool_use"):
                        calls.append(block["id"])
                    elif kind in ("tool_result", "mcp_tool_result"):
                        answers.append((block["tool_use_id"], block))
        case "gemini":
            for content in body["contents"]:
                for part in content["parts"]:
                    if "functionCall" in part:
                        calls.append(part["functionCall"]["id"])
                    if "functionResponse" in part:
                        answers.append((part["functionResponse"]["id"], part))
        case _:
            raise ValueError(f"no reader for provider {provider!r}")
    return calls, answers

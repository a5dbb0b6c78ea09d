"""Helpers every provider renderer needs and no provider owns.

Kept apart from :mod:`data_blocks` (the trust boundary) so that module stays
about one thing.
"""

from __future__ import annotations

import json
from typing import Any

from contextfold.domain.conversation import Conversation, MediaPart, ToolCallPart
from contextfold.domain.errors import RenderError

__all__ = [
    "DEFAULT_ANTHROPIC_MAX_TOKENS",
    "canonical_schema",
    "data_url",
    "parse_arguments",
    "system_texts",
]

DEFAULT_ANTHROPIC_MAX_TOKENS = 4096
"""Anthropic requires ``max_tokens``; this is used when the caller gives none.

4096 is the largest value every current Claude model accepts, so the default
never makes a request invalid for an older model."""


def canonical_schema(value: Any) -> Any:
    """The JSON value with every object's keys sorted, recursively.

    Tools sit in the stable prefix: a schema whose keys arrive in a different
    order must still render byte-identically, or the prompt cache misses.
    Lists keep their order (``required``, ``enum`` and ``anyOf`` order is meaningful).
    """
    if isinstance(value, dict):
        return {key: canonical_schema(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [canonical_schema(item) for item in value]
    return value


def parse_arguments(provider: str, call: ToolCallPart, index: int) -> dict[str, Any]:
    """Tool-call arguments as the JSON object Anthropic and Gemini require.

    The arguments are kept verbatim as the model produced them; these providers
    want a parsed object. Text that is not a JSON object is an error, never a
    guess. The one exception is empty text, which OpenAI-compatible models emit
    for a parameterless call and which means exactly ``{}``.
    """
    if not call.arguments.strip():
        return {}
    try:
        value = json.loads(call.arguments)
    except json.JSONDecodeError as exc:
        raise RenderError(
            provider,
            f"arguments of tool call {call.call_id!r} ({call.name}) are not valid JSON: {exc}",
            index=index,
            detail=call.arguments,
        ) from exc
    if not isinstance(value, dict):
        raise RenderError(
            provider,
            f"arguments of tool call {call.call_id!r} ({call.name}) are not a JSON object",
            index=index,
            detail=call.arguments,
        )
    return value


def data_url(part: MediaPart, provider: str) -> str:
    """The part's URL, or a ``data:`` URL of its inline bytes."""
    if part.data_base64 is not None:
        return f"data:{part.media_type};base64,{part.data_base64}"
    if part.url is not None:
        return part.url
    raise RenderError(
        provider,
        f"media part {part.fragment_id!r} has neither inline data nor a URL "
        "(load the artifact bytes before rendering)",
    )


def system_texts(conversation: Conversation, provider: str) -> list[str]:
    """The system segments' texts; only runtime authority may sit in the system role."""
    texts: list[str] = []
    for part in conversation.system:
        if part.authority != "runtime":
            raise RenderError(
                provider,
                f"system part {part.fragment_id!r} has {part.authority} authority; "
                "only runtime instructions may be rendered as system",
            )
        texts.append(part.text)
    return texts

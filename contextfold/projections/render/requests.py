"""``render`` and ``render_shared``: a neutral :class:`Conversation` as one provider's request body,
checked (:mod:`.validate`). Re-exported by the package (:mod:`contextfold.projections.render`),
which imports this module, and with it every renderer, when one of these names is first used.
"""

from __future__ import annotations

from typing import Any, assert_never

from contextfold.domain.conversation import Conversation
from contextfold.domain.errors import RenderError
from contextfold.domain.manifest import BUILD_PROVIDERS
from contextfold.projections.render.anthropic import render_anthropic
from contextfold.projections.render.gemini import render_gemini
from contextfold.projections.render.openai_chat import render_openai_chat
from contextfold.projections.render.openai_responses import render_openai_responses
from contextfold.projections.render.output_caps import output_cap
from contextfold.projections.render.validate import PROVIDERS, parse_provider, validate_request
from contextfold.projections.request_json import hand_out

__all__ = ["render", "render_shared"]

if BUILD_PROVIDERS[1:] != PROVIDERS:
    raise AssertionError("the renderers' providers and the providers a build accepts disagree")


_LEAST_OUTPUT_TOKENS = {"anthropic": 1, "openai-responses": 16, "openai-chat": 1, "gemini": 1}
"""Output limits the APIs reject below (Anthropic: ``max_tokens`` >= 1; OpenAI Responses:
"Expected a value >= 16" for ``max_output_tokens``; OpenAI Chat: "integer below minimum value.
Expected a value >= 1"): no SDK type says so. Gemini takes ``maxOutputTokens: 0`` as the field
left unset (proto3's default) and answers at the model's whole output length, past the reserve
the budget kept for it: refused too."""


def render(
    conversation: Conversation,
    provider: str,
    *,
    max_tokens: int | None = None,
    validate: bool = True,
) -> dict[str, Any]:
    """The request body for ``provider``, validated unless ``validate=False``.

    ``max_tokens`` is the output limit under the provider's own name
    (``max_completion_tokens``, ``max_output_tokens``, ``max_tokens``,
    ``generationConfig.maxOutputTokens``); Anthropic requires one and gets a
    documented default, and a model whose API takes less than ``max_tokens`` gets its cap
    (:mod:`.output_caps`: claude-3-haiku 4,096, gpt-4o 16,384...). ``model`` is included
    when the conversation has one (except for Gemini, where the model is part of the URL).
    """
    return hand_out(render_shared(conversation, provider, max_tokens=max_tokens, validate=validate))


def render_shared(
    conversation: Conversation,
    provider: str,
    *,
    max_tokens: int | None = None,
    validate: bool = True,
) -> dict[str, Any]:
    """:func:`render`, but the message dicts are the renderers' own, kept and reused for the same
    message objects by later calls (``request_json``): read-only. For ``build_context``, which
    hashes them from their kept texts and hands out copies."""
    name = parse_provider(provider)
    least = _LEAST_OUTPUT_TOKENS.get(name, 0)
    if max_tokens is not None and max_tokens < least:
        raise RenderError(name, f"the API refuses an output limit below {least} token"
                          f"{'s' if least > 1 else ''}, got {max_tokens} (a build sends its reserve: "
                          "reserve room for the reply)")
    cap = output_cap(conversation.model) if name != "gemini" else None
    if max_tokens is not None and cap is not None and max_tokens > cap:
        max_tokens = cap  # the model's API refuses more (``output_caps``); the reserve still holds it
    body: dict[str, Any]
    match name:
        case "openai-chat":
            body = render_openai_chat(conversation, max_tokens=max_tokens)
        case "openai-responses":
            body = render_openai_responses(conversation, max_tokens=max_tokens)
        case "anthropic":
            body = render_anthropic(conversation, max_tokens=max_tokens)
        case "gemini":
            body = render_gemini(conversation, max_tokens=max_tokens)
        case _:
            assert_never(name)
    if validate:
        validate_request(name, body)
    return body

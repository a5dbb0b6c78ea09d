"""A model response's provider reasoning: opaque, verbatim, tagged with the provider that made it.

Anthropic ``thinking``/``redacted_thinking`` blocks, OpenAI Responses ``reasoning`` items and Gemini
``thoughtSignature`` values are signed or encrypted by their provider, who wants them back unchanged
in the next request of a tool-use loop and refuses another provider's. So they are kept as the
provider's own JSON (never parsed into fields a future API version would outgrow), one model per
provider under a ``provider`` discriminator, and only that provider is ever sent them
(``projections.reasoning``). Re-exported by :mod:`contextfold.domain.events`, where
``ModelResponse.reasoning`` holds one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from contextfold.domain.checked import Integer

__all__ = [
    "REASONING_ADAPTER",
    "AnthropicReasoning",
    "GeminiReasoning",
    "GeminiSignature",
    "OpenAIResponsesReasoning",
    "Reasoning",
    "ReasoningItem",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReasoningItem(_Frozen):
    """One piece of a response's reasoning as the provider returned it, and where it stood.

    ``raw`` is the provider's JSON object, verbatim: it is signed or encrypted (an Anthropic
    ``signature``, an OpenAI ``encrypted_content``), and the provider refuses it edited or cut,
    so nothing here reads, redacts or truncates it. ``before_call`` is the number of the
    response's tool calls that came before it (0: before the first call, with the text):
    interleaved thinking goes back between the calls it stood between."""

    before_call: Integer = Field(default=0, ge=0)
    raw: dict[str, Any]


_ANTHROPIC_REASONING = frozenset({"thinking", "redacted_thinking"})


def _typed(items: tuple[ReasoningItem, ...], types: frozenset[str], provider: str
           ) -> tuple[ReasoningItem, ...]:
    for item in items:
        if item.raw.get("type") not in types:
            raise ValueError(f"an item of {provider} reasoning must have type {' or '.join(sorted(types))}, "
                             f"got {item.raw.get('type')!r}")
    return items


class AnthropicReasoning(_Frozen):
    """Anthropic ``thinking`` (with ``signature``) and ``redacted_thinking`` (with ``data``) blocks.

    With extended thinking on, the blocks of the assistant turn that made the tool calls must be
    sent back unchanged, before its ``tool_use`` blocks, in the following request."""

    provider: Literal["anthropic"] = "anthropic"
    items: tuple[ReasoningItem, ...] = Field(min_length=1)

    @field_validator("items")
    @classmethod
    def _blocks(cls, items: tuple[ReasoningItem, ...]) -> tuple[ReasoningItem, ...]:
        return _typed(items, _ANTHROPIC_REASONING, "anthropic")


class OpenAIResponsesReasoning(_Frozen):
    """OpenAI Responses ``reasoning`` items (id, summary, ``encrypted_content`` when present):
    they go back as input items before the ``function_call`` items of their response."""

    provider: Literal["openai-responses"] = "openai-responses"
    items: tuple[ReasoningItem, ...] = Field(min_length=1)

    @field_validator("items")
    @classmethod
    def _items(cls, items: tuple[ReasoningItem, ...]) -> tuple[ReasoningItem, ...]:
        return _typed(items, frozenset({"reasoning"}), "openai-responses")


class GeminiSignature(_Frozen):
    """A Gemini ``thoughtSignature`` and the part it rode on: the ``call``-th function call of the
    response, or (None) a text, thought or bare part. It is returned on the same part."""

    signature: str = Field(min_length=1)
    call: Integer | None = Field(default=None, ge=0)


class GeminiReasoning(_Frozen):
    """The ``thoughtSignature`` values of a Gemini response's parts, verbatim."""

    provider: Literal["gemini"] = "gemini"
    signatures: tuple[GeminiSignature, ...] = Field(min_length=1)


Reasoning: TypeAlias = Annotated[
    AnthropicReasoning | OpenAIResponsesReasoning | GeminiReasoning, Field(discriminator="provider")
]
"""A response's reasoning, tagged with the provider that made it: only that provider can read it
back (a signature is the provider's own), so a build for another provider leaves it out."""

REASONING_ADAPTER: TypeAdapter[Reasoning] = TypeAdapter(Reasoning)

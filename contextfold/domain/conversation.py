"""The provider-neutral request: what the builder hands to every renderer.

The builder has already selected, deduped, truncated and ordered fragments;
this model fixes *where* each piece goes, independent of any provider:

- ``system``: segments with instruction authority (runtime policy only);
- ``tools``: the exposed tool specs, sorted by name;
- ``messages``: protocol-complete turns. Every assistant tool call is answered
  exactly once by the ``ToolResults`` message that follows it.

Authority is explicit on every part: ``InstructionPart`` (runtime or user
authority) vs ``DataPart`` (workspace or external content, which a renderer
must wrap in a delimited data block, never give a role). Each part keeps the
id of the fragment it came from so the manifest can be traced into the request.

``stable_prefix_messages`` counts the leading messages that belong to the
stable prefix (after ``system`` and ``tools``); renderers place cache
breakpoints there where the provider has them.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from contextfold.domain.canonical import strict_json
from contextfold.domain.events import ArtifactRef, Reasoning, TextBreak, ToolSpec
from contextfold.domain.fragments import Trust

__all__ = [
    "UNPARSED_ARGUMENTS_KEY",
    "AssistantMessage",
    "Conversation",
    "DataPart",
    "InstructionPart",
    "MediaPart",
    "Message",
    "ToolCallPart",
    "ToolResultPart",
    "ToolResults",
    "UserMessage",
    "UserPart",
    "arguments_object",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InstructionPart(_Frozen):
    """Text with authority: runtime (system) or the user's own words."""

    type: Literal["instruction"] = "instruction"
    text: str
    authority: Literal["runtime", "user"]
    fragment_id: str


class DataPart(_Frozen):
    """Workspace or external content: rendered only inside a delimited data block."""

    type: Literal["data"] = "data"
    text: str
    source: str
    trust: Trust
    label: str = ""
    """What the data is (``file``, ``web``, ``memory``, ``summary``...), shown on the block."""
    truncated: bool = False
    fragment_id: str


class MediaPart(_Frozen):
    """An image or a document, inline (artifact bytes loaded by the caller) or by URL."""

    type: Literal["media"] = "media"
    kind: Literal["image", "document"]
    media_type: str
    data_base64: str | None = None
    url: str | None = None
    artifact: ArtifactRef | None = None
    detail: Literal["auto", "low", "high"] = "auto"
    source: str = ""
    trust: Trust = "user"
    fragment_id: str
    unsent: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """Why the provider of this build refuses the medium as it is (``projections.media_limits``):
    the renderer sends a note saying so in its place. Absent (and not in the JSON) otherwise."""


UserPart: TypeAlias = Annotated[InstructionPart | DataPart | MediaPart, Field(discriminator="type")]


class UserMessage(_Frozen):
    role: Literal["user"] = "user"
    parts: tuple[UserPart, ...]


def _absent(value: object) -> bool:
    return value is None or value == ()


class _CallId(_Frozen):
    """A call's logged id, and the id shown instead to the providers that refuse it.

    ``alias`` and ``alias_for`` are set together by the fold (``projections.call_ids``): a
    reused id, or one outside Anthropic's ``[a-zA-Z0-9_-]`` or over OpenAI Chat's 40
    characters, is shown as ``alias`` to the providers in ``alias_for`` and as ``call_id`` to
    the others. Left out of the JSON when absent, so most calls dump as before."""

    call_id: str
    alias: str | None = Field(default=None, exclude_if=_absent)
    alias_for: tuple[str, ...] = Field(default=(), exclude_if=_absent)

    def shown_id(self, provider: str) -> str:
        """The id ``provider``'s request shows for this call or its answer."""
        return self.alias if self.alias is not None and provider in self.alias_for else self.call_id


class ToolCallPart(_CallId):
    name: str
    arguments: str
    """Verbatim JSON text as the model produced it."""


UNPARSED_ARGUMENTS_KEY = "unparsed_arguments"
"""The one member of the object a renderer that needs an arguments object sends for a call
whose arguments are not one (see :func:`arguments_object`): the model's text, verbatim."""


def arguments_object(arguments: str) -> dict[str, Any] | None:
    """A tool call's arguments as the JSON object they encode, or None when they are not one.

    Empty text means ``{}`` (OpenAI-compatible models send it for a parameterless call).
    Anything else that is not a JSON object (text cut off by the model's output limit, an
    array, a bare string) is None: the caller decides how to show it, never by guessing.
    So is an object holding an escaped lone surrogate (``"\\ud83d"``, half an emoji cut off):
    it parses to text that no UTF-8 request body can carry; and one holding ``NaN``,
    ``Infinity`` or a number past a double's range (``1e400``), which Python's parser takes
    and JSON has not: re-emitted bare, they made the Anthropic and Gemini bodies invalid JSON."""
    if not arguments.strip():
        return {}
    try:
        value = strict_json(arguments)
        if "\\u" in arguments and isinstance(value, dict):
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return None
    return value if isinstance(value, dict) else None


class AssistantMessage(_Frozen):
    role: Literal["assistant"] = "assistant"
    text: str = ""
    tool_calls: tuple[ToolCallPart, ...] = ()
    fragment_id: str
    reasoning: Reasoning | None = Field(default=None, exclude_if=_absent)
    """The response's provider reasoning, verbatim: a renderer sends it only to the provider that
    made it (``projections.reasoning``). Left out of the JSON when absent."""
    text_breaks: tuple[TextBreak, ...] = Field(default=(), exclude_if=lambda value: not value)
    """Where the pieces of ``text`` stood among the calls and the reasoning items (as logged:
    ``ModelResponse.text_breaks``): a renderer whose format has an order sends each piece there.
    Left out of the JSON when empty."""


class ToolResultPart(_CallId):
    """One answer. ``status`` lost/cancelled are runtime recovery answers (is_error)."""

    name: str
    status: Literal["ok", "error", "lost", "cancelled"]
    content: tuple[DataPart | MediaPart, ...]
    exit_code: int | None = None
    fragment_id: str

    @property
    def is_error(self) -> bool:
        return self.status != "ok"


class ToolResults(_Frozen):
    """The answers to the immediately preceding assistant message's calls, in call order."""

    role: Literal["tool"] = "tool"
    results: tuple[ToolResultPart, ...]


Message: TypeAlias = Annotated[
    UserMessage | AssistantMessage | ToolResults, Field(discriminator="role")
]


class Conversation(_Frozen):
    model: str | None = None
    system: tuple[InstructionPart, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    messages: tuple[Message, ...] = ()
    stable_prefix_messages: int = 0

"""The value objects events carry: artifact refs, content blocks, tool specs and calls, plan
steps and the compaction summary.

Why a module of its own: :mod:`~contextfold.domain.events` is the event vocabulary, and it had
passed 500 lines; these values are what the events hold, not events. ``events`` re-exports
every name, so ``from contextfold.domain.events import ToolCall`` keeps working.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias
from urllib.parse import unquote_to_bytes

from pydantic import BaseModel, ConfigDict, Field

from contextfold.domain.checked import Integer
from contextfold.domain.items import Items

__all__ = ["ArtifactRef", "CompactionSummary", "ContentBlock", "DocumentBlock", "FrozenModel", "ImageBlock",
           "PlanStep", "StepStatus", "TextBlock", "ToolCall", "ToolSpec", "base64_data_url", "data_url_size",
           "is_base64_data_url", "is_data_url", "is_medium", "media_artifact_block", "media_type_key"]


class FrozenModel(BaseModel):
    """The base of the log's models: frozen, and no field it does not declare."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# ---------------------------------------------------------------- value objects


class ArtifactRef(FrozenModel):
    """A payload kept once in the artifact table, addressed by its blake3 hash."""

    hash: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: Integer = Field(ge=0)
    media_type: str = "text/plain"


class TextBlock(FrozenModel):
    """Text in an event's content (a user input, a tool result's blocks)."""

    type: Literal["text"] = "text"
    text: str


class ImageBlock(FrozenModel):
    """An image in an event's content: stored bytes (``Store.attach_image``) or a URL, one of them
    at least (neither: UnsupportedMediaError). ``detail`` is OpenAI's image detail, sent as given."""

    type: Literal["image"] = "image"
    artifact: ArtifactRef | None = None
    url: str | None = None
    media_type: str
    width: Integer | None = None
    height: Integer | None = None
    detail: Literal["auto", "low", "high"] = "auto"


class DocumentBlock(FrozenModel):
    """A document, audio or video medium in an event's content: stored bytes
    (``Store.attach_document`` for a PDF, its pages counted) or a URL, one of them at least."""

    type: Literal["document"] = "document"
    artifact: ArtifactRef | None = None
    url: str | None = None
    media_type: str = "application/pdf"
    pages: Integer | None = None
    title: str | None = None
    duration_ms: Integer | None = Field(default=None, ge=0, exclude_if=lambda value: value is None)
    """How long an audio or video medium plays, in milliseconds: read from its bytes when it is
    appended (``store.media_duration``), or given by a runtime that knows it (a remote URL's).
    Why: Gemini counts audio and video by their length, and the build, which never reads a
    medium's bytes, had only guesses (a stored video priced at a 600 s fallback was dropped by
    every neutral build under ~180k tokens). None: not known (the price then says so). Left
    out of the JSON when None, so a log written before the field reads and hashes as it did."""


ContentBlock: TypeAlias = Annotated[
    TextBlock | ImageBlock | DocumentBlock, Field(discriminator="type")
]


_TIMED_OR_IMAGE_PREFIXES = ("audio/", "video/", "image/")
"""Media types :func:`is_medium` names by their family, whatever the subtype."""


def media_type_key(media_type: str) -> str:
    """``media_type`` as every rule compares it: its type and subtype in lower case, without
    parameters or blanks (``Audio/MPEG; rate=8000``: ``audio/mpeg``).

    Why: media types are case-insensitive (RFC 2045 §5.1), and a rule that compared them as
    written took ``audio/MPEG`` for no audio and ``Application/PDF`` for no PDF. The log keeps
    the type as it came (its JSON and hashes are the runtime's); the build compares, and names
    to a provider, this spelling."""
    return media_type.partition(";")[0].strip().lower()


def is_data_url(url: str | None) -> bool:
    """Whether ``url`` is an RFC 2397 ``data:`` URL (its medium inline). The scheme in any case:
    RFC 3986 section 3.1 makes it case-insensitive, and ``DATA:image/png;base64,...`` was taken
    for a remote URL (not stored as bytes, sent to Anthropic as a URL to fetch)."""
    return url is not None and url[:5].lower() == "data:"


def base64_data_url(url: str) -> tuple[str, str] | None:
    """``(media type as declared, base64 payload)`` of a base64 ``data:`` URL, else None (another
    URL, or a data: URL of text). The scheme and the ``;base64`` marker in any case, as the WHATWG
    data: URL processor reads them; the type as written (``media_type_key`` compares it)."""
    header, sep, payload = url.partition(",")
    if not sep or not is_data_url(header) or header[-7:].lower() != ";base64":
        return None
    return header[5:-7].partition(";")[0], payload


def is_base64_data_url(url: str) -> bool:
    """Whether ``url`` is a base64 ``data:`` URL (what :func:`base64_data_url` reads), found
    without copying its payload: a document's can be megabytes, and only its header is asked."""
    comma = url.find(",")
    return comma >= 7 and is_data_url(url) and url[comma - 7:comma].lower() == ";base64"


def data_url_size(url: str | None) -> int | None:
    """The bytes a ``data:`` URL's payload decodes to, else None (another URL). A base64 payload
    is three bytes a four characters less its padding; any other (RFC 2397 without ``;base64``)
    is its percent-decoded bytes. Why: the media rules read a provider's size limit and an audio
    clip's longest length from these bytes, and a payload without ``;base64`` was read as base64:
    plain text a quarter short, percent escapes (three characters a byte) 2.25 times over."""
    if url is None or not is_data_url(url):
        return None
    encoded = base64_data_url(url)
    if encoded is not None:
        payload = encoded[1]
        return len(payload) * 3 // 4 - (len(payload) - len(payload.rstrip("=")))
    return len(unquote_to_bytes(url.partition(",")[2]))


def is_medium(media_type: str) -> bool:
    """Whether ``media_type`` names a medium the media rules price by what the log knows of it
    (audio and video by their length, a PDF or an image by its pages or size: ``media_cost``),
    not a text payload (plain text, JSON, a listing) a request shows as text."""
    bare = media_type_key(media_type)
    return bare.startswith(_TIMED_OR_IMAGE_PREFIXES) or bare == "application/pdf"


def media_artifact_block(ref: ArtifactRef) -> ImageBlock | DocumentBlock | None:
    """The media block a tool result's own artifact ``ref`` stands for when it is a medium (an
    image block for an image; a document block for a PDF, audio or video), else None: a text,
    shown as text.

    Why: a tool result's artifact was counted, and shown, as text whatever its type: a 512x512
    PNG screenshot was 1,859 tokens of replacement characters in every request, where the same
    image in a user message is priced by its provider's image rule and sent as an image
    (``tests/integration/test_tool_result_artifact_media.py``). As a block of the result it is
    measured when appended (``store.media``), then priced, planned and rendered as the media a
    tool returns in ``ToolResult.blocks`` are: one path for all."""
    if not is_medium(ref.media_type):
        return None
    if media_type_key(ref.media_type).startswith("image/"):
        return ImageBlock(artifact=ref, media_type=ref.media_type)
    return DocumentBlock(artifact=ref, media_type=ref.media_type)


class ToolSpec(FrozenModel):
    """One tool the runtime can run: its name, description and JSON Schema of its arguments."""

    name: str = Field(min_length=1, max_length=128)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    tags: Items[str] = Items()
    strict: bool | None = Field(default=None, exclude_if=lambda value: value is None)
    """Whether the provider must hold the model's arguments to ``parameters`` exactly (OpenAI's and
    Anthropic's strict tool use, structured outputs): the runtime's choice, sent as it was made.
    None: not said, so each renderer sends its API's non-strict form. Why it is kept: a runtime
    that declared its tools strict and resumed from the log got requests declaring them
    non-strict, so the model's calls were no longer held to their schemas. Left out of the JSON
    when None, so a log written before the field reads and hashes as it did."""


class ToolCall(FrozenModel):
    """One call a model response makes; its ``ToolResult`` (or recovery event) names ``call_id``."""

    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str = "{}"
    """The arguments exactly as the model produced them (a JSON string, kept verbatim)."""


StepStatus: TypeAlias = Literal["pending", "ready", "in_progress", "done", "failed", "blocked", "skipped"]


class PlanStep(FrozenModel):
    """One typed step of a plan: its id (unique in the plan), title, status and dependencies."""

    id: str
    title: str
    status: StepStatus = "pending"
    depends_on: Items[str] = Items()


class CompactionSummary(FrozenModel):
    """The structured summary of the seed's section 5.3.

    ``inferences`` holds statements the summarizer inferred rather than read
    from a typed event; renderers label them as inferences.
    """

    goal: str = ""
    success_contract: Items[str] = Items()
    completed_steps: Items[str] = Items()
    pending_steps: Items[str] = Items()
    decisions: Items[str] = Items()
    constraints: Items[str] = Items()
    tool_calls_and_results: Items[str] = Items()
    evidence_refs: Items[str] = Items()
    side_effects: Items[str] = Items()
    known_failures: Items[str] = Items()
    next_action: str = ""
    inferences: Items[str] = Items()

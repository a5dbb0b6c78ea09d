"""Shared pieces of the format parsers: typed field access and the run builder.

Every accessor takes the JSON path of the value so that a wrong type or a
missing field becomes :class:`~contextfold.importers._json.Bad` at the right
line. :class:`RunBuilder` appends events while checking them against the
same :class:`~contextfold.domain.log.PairingState` the store uses, so an
import that the store would refuse fails here, naming the message.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from contextfold.domain.checked import validation_detail
from contextfold.domain.errors import ProtocolError
from contextfold.domain.event_values import is_data_url
from contextfold.domain.events import (
    AnyEvent,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    ModelResponse,
    RunStarted,
    TextBlock,
    ToolResult,
    ToolResultLost,
    ToolSpec,
    ToolsRegistered,
)
from contextfold.domain.log import PairingState
from contextfold.importers._json import Bad, JsonPath, spelled_json
from contextfold.projections.render.runtime_lines import call_ref

__all__ = [
    "RunBuilder",
    "build",
    "get_list",
    "get_obj",
    "get_str",
    "media_block",
    "openai_parts",
    "opt_str",
    "require_obj",
    "spelled_json",
    "text_of_blocks",
    "text_only",
]

M = TypeVar("M", bound=BaseModel)


def build(cls: type[M], path: JsonPath, **fields: Any) -> M:
    """Construct a domain model; a validation failure becomes :class:`Bad` at ``path``."""
    try:
        return cls(**fields)
    except ValidationError as e:
        raise Bad(path, f"invalid {cls.__name__}: {validation_detail(cls, e)}") from None


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            int: "number", float: "number", type(None): "null"}.get(type(value), "value")


def require_obj(value: Any, path: JsonPath, what: str = "an object") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Bad(path, f"expected {what}, got {_type_name(value)}")
    return value


def get_obj(d: dict[str, Any], key: str, path: JsonPath) -> dict[str, Any]:
    if key not in d:
        raise Bad(path, f"missing field {key!r}")
    return require_obj(d[key], (*path, key), f"{key!r} to be an object")


def get_str(d: dict[str, Any], key: str, path: JsonPath) -> str:
    if key not in d:
        raise Bad(path, f"missing field {key!r}")
    v = d[key]
    if not isinstance(v, str):
        raise Bad((*path, key), f"expected {key!r} to be a string, got {_type_name(v)}")
    return v


def opt_str(d: dict[str, Any], key: str, path: JsonPath) -> str | None:
    v = d.get(key)
    if v is not None and not isinstance(v, str):
        raise Bad((*path, key), f"expected {key!r} to be a string, got {_type_name(v)}")
    return v


def get_list(d: dict[str, Any], key: str, path: JsonPath) -> list[Any]:
    if key not in d:
        raise Bad(path, f"missing field {key!r}")
    v = d[key]
    if not isinstance(v, list):
        raise Bad((*path, key), f"expected {key!r} to be an array, got {_type_name(v)}")
    return v


URL_EXTENSION_TYPES: dict[str, str] = {
    ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
    ".webp": "image/webp", ".heic": "image/heic", ".heif": "image/heif", ".pdf": "application/pdf",
}
"""The media type a URL's file extension names, for a medium imported by URL without one (an
OpenAI ``image_url``, an Anthropic ``url`` source carry none). A fixed table, not ``mimetypes``,
whose answers depend on the machine's files: an import must give the same events anywhere."""


def type_from_url(url: str) -> str | None:
    """The media type the extension of ``url``'s path names (:data:`URL_EXTENSION_TYPES`), or None."""
    path = url.split("#", 1)[0].split("?", 1)[0]
    if "://" in path:
        path = path.split("://", 1)[1].partition("/")[2]
    dot = path.rfind(".")
    return URL_EXTENSION_TYPES.get(path[dot:].lower()) if dot > path.rfind("/") else None


def media_block(
    kind: str, path: JsonPath, *, url: str | None = None, data: str | None = None,
    media_type: str | None = None, title: str | None = None, detail: str | None = None,
) -> ContentBlock:
    """An image or document block from a URL or inline base64 data.

    Inline base64 is kept losslessly as an RFC 2397 ``data:`` URL in the block's
    ``url`` (the importer is pure and cannot write artifacts; the store may move
    it to the artifact table later). A renderer can pass a data URL through
    (OpenAI) or split it back into a base64 source (Anthropic, Gemini).

    A URL given without a type gets the one its extension names (``.../ant.jpg``: image/jpeg),
    else its title's (a file id's ``filename``, ``report.pdf``: application/pdf):
    Gemini needs the type of a ``fileData`` and refuses ``image/*``. Without one, an image keeps
    ``image/*`` (the event requires a type: the log's word for "not known"), which each renderer
    handles (Anthropic and OpenAI send a URL without a type; Gemini gets a note).
    """
    if data is not None:
        mt = media_type or ("image/png" if kind == "image" else "application/octet-stream")
        url = f"data:{mt};base64,{data}"
    elif url is not None and media_type is None and is_data_url(url):
        media_type = url[5:].split(";", 1)[0].split(",", 1)[0] or None
    elif url is not None and media_type is None:
        # (a file id names no extension: its filename may; an image named .pdf, a document
        # named .png: not guessed)
        guessed = type_from_url(url) or (type_from_url(title) if title else None)
        if guessed is not None and guessed.startswith("image/") == (kind == "image"):
            media_type = guessed
    if url is None:
        raise Bad(path, f"{kind} without a URL or inline data")
    if kind == "image":
        return build(ImageBlock, path, url=url, media_type=media_type or "image/*",
                     detail=detail if detail in ("auto", "low", "high") else "auto")
    return build(DocumentBlock, path, url=url, title=title,
                 media_type=media_type or "application/octet-stream")


class RunBuilder:
    """Accumulates the events of one run, checking pairing as it goes.

    The first event is always :class:`RunStarted`; ``tools`` (a request body's) are registered
    right after it, before any response that could call them. ``pending_by_name`` serves
    sources whose results name the tool but not the call (legacy OpenAI
    ``function`` messages, old Gemini payloads): the oldest open call of that
    name is answered first.
    """

    def __init__(self, *, model: str | None = None, agent: str | None = None,
                 tools: list[ToolSpec] | tuple[ToolSpec, ...] = ()) -> None:
        self.events: list[AnyEvent] = [RunStarted(model=model, agent=agent)]
        if tools:
            self.events.append(ToolsRegistered(tools=tuple(tools)))
        self.times: list[datetime | None] = [None] * len(self.events)
        """Each event's time as its source says (:attr:`now` when it was added): None for the ones
        the importer adds (the run's start, a loss it infers) and those of a source without times."""
        self.now: datetime | None = None
        """The time of the source entry being read (a parser that reads times sets it per entry)."""
        self._pairing = PairingState()
        self._names: dict[str, str] = {}

    def add(self, event: AnyEvent, path: JsonPath) -> None:
        if isinstance(event, ModelResponse):
            self._record_lost(event)
        try:
            self._pairing.apply(event, len(self.events) + 1)
        except ProtocolError as e:
            raise Bad(path, f"tool call pairing: {e}") from None
        if isinstance(event, ModelResponse):
            for call in event.tool_calls:
                self._names[call.call_id] = call.name
        elif isinstance(event, ToolResult | ToolResultLost):
            self._names.pop(event.call_id, None)
        self.events.append(event)
        self.times.append(self.now)

    def _record_lost(self, response: ModelResponse) -> None:
        """Record ``ToolResultLost`` for each open call whose id ``response`` re-issues, before it.

        Why here and not refused: an import reads a finished history, and a response that re-uses
        an id while the first call with it has no result (per-response ids: llama.cpp and vLLM
        number each response's calls ``call_0``, Kimi ``functions.x:0``) says that result never
        came. The seed's recovery for a missing result is a ``TOOL_RESULT_LOST`` event; refused,
        the whole history could not be imported. Only re-issued ids are closed here: a call left
        open otherwise is the build's to recover (lost once the run moved on, else in flight).
        (A live append of such a response stays :class:`DuplicateToolCallError`: the runtime
        knows whether the result is coming and records the loss itself.)"""
        reissued = list(dict.fromkeys(c.call_id for c in response.tool_calls
                                      if c.call_id in self._pairing.open))
        position = len(self.events) + len(reissued) + 1  # the response's, after its losses
        for cid in reissued:
            issued = self._pairing.open[cid]
            lost = ToolResultLost(
                call_id=cid, call_position=issued,
                reason=(f"no result recorded for call {call_ref(cid)} (issued at position {issued}) before a "
                        f"later response re-issued its id at position {position}"))
            self._pairing.apply(lost, len(self.events) + 1)
            self._names.pop(cid, None)
            self.events.append(lost)
            self.times.append(None)  # inferred here: the trace does not say when it was lost

    def is_open(self, call_id: str) -> bool:
        return call_id in self._pairing.open

    def open_name(self, call_id: str) -> str | None:
        """The tool name of the open call ``call_id`` (None when no such call is open)."""
        return self._names.get(call_id)

    def oldest_open(self, name: str | None = None) -> str | None:
        """The open call issued first (optionally: with this tool name)."""
        candidates = sorted(self._pairing.open.items(), key=lambda kv: kv[1])
        for cid, _ in candidates:
            if name is None or self._names.get(cid) == name:
                return cid
        return None

    def last_open(self) -> str | None:
        """The most recently issued open call, if any."""
        if not self._pairing.open:
            return None
        return max(self._pairing.open.items(), key=lambda kv: kv[1])[0]


def openai_parts(content: Any, path: JsonPath,
                 media: Callable[[str, dict[str, Any], JsonPath], ContentBlock]) -> tuple[ContentBlock, ...]:
    """OpenAI-style content: a string, or a list of typed parts.

    Chat Completions and Responses share the string form and the text and
    refusal parts; ``media(kind, part, path)`` maps the format's own media
    parts and raises :class:`Bad` for a kind it does not know.
    """
    if isinstance(content, str):
        return (TextBlock(text=content),)
    if not isinstance(content, list):
        raise Bad(path, "expected 'content' to be a string or an array of parts")
    blocks: list[ContentBlock] = []
    for i, raw in enumerate(content):
        p = (*path, i)
        part = require_obj(raw, p, "a content part object")
        kind = get_str(part, "type", p)
        if kind in ("text", "input_text", "output_text"):
            blocks.append(TextBlock(text=get_str(part, "text", p)))
        elif kind == "refusal":
            blocks.append(TextBlock(text=get_str(part, "refusal", p)))
        else:
            blocks.append(media(kind, part, p))
    return tuple(blocks)


def text_of_blocks(blocks: tuple[ContentBlock, ...]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


def text_only(blocks: tuple[ContentBlock, ...], path: JsonPath, sep: str = "") -> str:
    """The text of content that may hold text parts only (a system prompt, a reply), joined by
    ``sep``; a media part is :class:`Bad` at its index under ``path``."""
    for i, block in enumerate(blocks):
        if not isinstance(block, TextBlock):
            raise Bad((*path, i), "only text parts are allowed here")
    return sep.join(b.text for b in blocks if isinstance(b, TextBlock))


"""Media intake: check image and PDF bytes, read their dimensions, keep them as artifacts.

Why here (the store layer): reading a file's header and decoding it is I/O the
pure projections must not do. What is recorded is only what the bytes prove:

- the type is sniffed from magic bytes (PNG, JPEG, GIF, WebP, PDF). A declared
  media type that disagrees with the bytes is replaced by the sniffed one:
  providers reject a request whose declared type does not match the data
  (Anthropic does), and a ``data:`` URL's label is often wrong (``image/*``);
- image pixel dimensions come from Pillow, which also decodes the image once so
  a truncated or corrupt file fails here, at append time, instead of at the
  provider. Pillow, not a hand-written header parser: a header parser would
  read the size of a PNG whose IDAT is garbage and accept it; the limits on
  width/height are checked *before* decoding, so a decompression bomb is never
  expanded;
- PDF page counts come from pypdf. A scan for ``/Type /Page`` would miss every
  page of a PDF 1.5+ file whose page objects sit in compressed object streams
  (the default of most current writers), so it would price them at zero;
- audio and video keep their declared type and their bytes as they came, with the playing time
  their container tells (``DocumentBlock.duration_ms``, :mod:`.media_duration`): Gemini counts
  them by their length, and the build never reads a medium's bytes to price it. From a
  ``data:`` URL they are stored as an artifact too when that sends them as the URL did
  (:func:`_stored_as_sent`); a log that holds them inline reads and builds as it always did;
- limits (:class:`MediaLimits`): bytes per image and per PDF, pixels per side,
  pages. A breach raises :class:`InputLimitError`; an unknown type or corrupt
  bytes raise :class:`UnsupportedMediaError`. Both are raised before anything is
  stored, and :func:`materialize` checks every media block of an append before
  the store writes any artifact, so an append either stores all or nothing.

Inline base64 media that importers keep as RFC 2397 ``data:`` URLs (images, PDFs, audio,
video) become artifacts when the event is appended (:func:`materialize`, called by the event
store): the block then holds an :class:`ArtifactRef` (blake3 hash, size, media
type) plus dimensions, page count or playing time, and the log stays small.
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import blake3
from pydantic import BaseModel, ConfigDict, Field

from contextfold.domain.checked import checked
from contextfold.domain.errors import InputLimitError, InvalidInputError, UnsupportedMediaError
from contextfold.domain.event_values import (
    base64_data_url,
    is_base64_data_url,
    is_data_url,
    media_artifact_block,
    media_type_key,
)
from contextfold.domain.events import (
    AnyEvent,
    ArtifactRef,
    ContentBlock,
    DocumentBlock,
    EvidenceRetrieved,
    ImageBlock,
    ToolResult,
    UserInput,
)
from contextfold.store.media_duration import is_timed_media, media_duration_ms

if TYPE_CHECKING:
    from contextfold.store.event_store import EventStore

__all__ = [
    "IMAGE_TYPES",
    "MediaInfo",
    "MediaLimits",
    "attach_document",
    "attach_image",
    "attach_media",
    "decode_data_url",
    "inspect_document",
    "inspect_image",
    "materialize",
    "sniff_media_type",
]

IMAGE_TYPES: tuple[str, ...] = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The image types every supported provider accepts."""

Blob = tuple[str, int, str, bytes]


class MediaLimits(BaseModel):
    """Intake limits. Defaults follow the strictest common provider limits.

    20 MB per image (OpenAI's and Gemini's inline request limit), 32 MB per PDF
    (Anthropic's request limit for PDFs), 8000 px per side (Anthropic rejects
    larger images), 1000 pages as a sanity bound (providers cap pages per
    request lower; that is a build-time concern, not a property of the file).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_image_bytes: int = Field(default=20 * 1024 * 1024, gt=0)
    max_document_bytes: int = Field(default=32 * 1024 * 1024, gt=0)
    max_image_side: int = Field(default=8000, gt=0)
    max_document_pages: int = Field(default=1000, gt=0)


DEFAULT_LIMITS = MediaLimits()


@dataclass(frozen=True, slots=True)
class MediaInfo:
    """What the bytes proved: type, size and (image) dimensions, (PDF) pages or (audio, video)
    playing time."""

    kind: Literal["image", "document"]
    media_type: str
    size: int
    width: int | None = None
    height: int | None = None
    pages: int | None = None
    duration_ms: int | None = None


def sniff_media_type(data: bytes) -> str | None:
    """The media type the magic bytes announce, or None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:1024].lstrip(b"\x00\t\n\r\x0c ").startswith(b"%PDF-"):
        return "application/pdf"
    return None


def _label(media_type: str | None) -> str:
    return f" (declared {media_type})" if media_type else ""


def inspect_image(data: bytes, *, media_type: str | None = None,
                  limits: MediaLimits = DEFAULT_LIMITS) -> MediaInfo:
    """Check image bytes and read their dimensions; raises before anything is stored."""
    if len(data) > limits.max_image_bytes:
        raise InputLimitError(f"image of {len(data)} bytes{_label(media_type)} exceeds the "
                              f"limit of {limits.max_image_bytes} bytes")
    sniffed = sniff_media_type(data)
    if sniffed is None or sniffed not in IMAGE_TYPES:
        raise UnsupportedMediaError(
            f"not a supported image{_label(media_type)}: the bytes are "
            f"{sniffed or 'of no known type'}; supported: {', '.join(IMAGE_TYPES)}")
    from PIL import Image  # lazy: only media intake needs Pillow

    try:
        with Image.open(io.BytesIO(data)) as probe:
            width, height = probe.size
            if max(width, height) > limits.max_image_side:
                raise InputLimitError(f"image of {width}x{height} px exceeds the limit of "
                                      f"{limits.max_image_side} px per side")
            probe.verify()  # structure and checksums (PNG chunk CRCs), no pixels
        with Image.open(io.BytesIO(data)) as full:
            full.load()  # decode once: truncated or garbled pixel data fails here
    except InputLimitError:
        raise
    except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError... for bad data
        raise UnsupportedMediaError(f"corrupt {sniffed} image{_label(media_type)}: {exc}") from exc
    if width <= 0 or height <= 0:
        raise UnsupportedMediaError(f"{sniffed} image has no pixels ({width}x{height})")
    return MediaInfo("image", sniffed, len(data), width=width, height=height)


def inspect_document(data: bytes, *, media_type: str | None = None,
                     limits: MediaLimits = DEFAULT_LIMITS) -> MediaInfo:
    """Check PDF bytes and count their pages; raises before anything is stored."""
    if len(data) > limits.max_document_bytes:
        raise InputLimitError(f"document of {len(data)} bytes{_label(media_type)} exceeds the "
                              f"limit of {limits.max_document_bytes} bytes")
    if sniff_media_type(data) != "application/pdf":
        raise UnsupportedMediaError(f"not a PDF document{_label(media_type)}: only application/pdf "
                                    "documents are carried as media")
    from pypdf import PdfReader  # lazy: only document intake needs pypdf

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise UnsupportedMediaError("encrypted PDF: providers reject password-protected documents")
        pages = len(reader.pages)
    except UnsupportedMediaError:
        raise
    except Exception as exc:  # pypdf raises PdfReadError, ValueError, KeyError... for bad data
        raise UnsupportedMediaError(f"corrupt PDF document: {exc}") from exc
    if pages < 1:
        raise UnsupportedMediaError("PDF document has no pages")
    if pages > limits.max_document_pages:
        raise InputLimitError(f"PDF of {pages} pages exceeds the limit of {limits.max_document_pages}")
    return MediaInfo("document", "application/pdf", len(data), pages=pages)


def _ref(data: bytes, media_type: str) -> ArtifactRef:
    return ArtifactRef(hash=blake3.blake3(data).hexdigest(), size=len(data), media_type=media_type)


def attach_image(store: EventStore, data: bytes, *, media_type: str | None = None,
                 detail: Literal["auto", "low", "high"] = "auto",
                 limits: MediaLimits = DEFAULT_LIMITS) -> ImageBlock:
    """Check ``data``, store it as a blake3 artifact, return the block to put in an event."""
    data = _as_bytes(data, "image")
    info = inspect_image(data, media_type=media_type, limits=limits)
    _proven("image", blake3.blake3(data).hexdigest(), limits, info)
    # checked before the bytes are stored: a bad ``detail`` is a typed error and stores nothing
    block = checked(ImageBlock, "image", media_type=info.media_type, width=info.width,
                    height=info.height, detail=detail)
    return block.model_copy(update={"artifact": store.put_artifact(data, info.media_type)})


def _as_bytes(data: object, what: str) -> bytes:
    """``data`` as bytes (a bytearray or memoryview is copied), else InvalidInputError: a str or
    a path raised a raw TypeError from inside the checks."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise InvalidInputError(f"{what} data must be bytes (the file's contents), got {type(data).__name__}")


def attach_document(store: EventStore, data: bytes, *, media_type: str | None = None,
                    title: str | None = None, limits: MediaLimits = DEFAULT_LIMITS) -> DocumentBlock:
    """Check PDF ``data``, store it as a blake3 artifact, return the block to put in an event."""
    data = _as_bytes(data, "document")
    info = inspect_document(data, media_type=media_type, limits=limits)
    _proven("document", blake3.blake3(data).hexdigest(), limits, info)
    block = checked(DocumentBlock, "document", media_type=info.media_type, pages=info.pages, title=title)
    return block.model_copy(update={"artifact": store.put_artifact(data, info.media_type)})


def attach_media(store: EventStore, data: bytes, *, media_type: str, title: str | None = None,
                 limits: MediaLimits = DEFAULT_LIMITS) -> DocumentBlock:
    """Check audio or video ``data`` of ``media_type`` (``audio/wav``, ``video/mp4``...), read its
    playing time when its container tells it (``media_duration``: what Gemini prices it by),
    store it as a blake3 artifact and return the block to put in an event.

    Why: a user's voice note or recording reached the log only as a URL (a ``data:`` URL kept
    inline in the event, or a remote one) or through the store's own ``put_artifact``; images
    and PDFs had their public calls. The type is the caller's (the containers do not name one
    type each: an MP4 holds audio or video), checked to be audio or video and not contradicted
    by the bytes (a PNG or a PDF, which have their own calls). Bound by ``max_document_bytes``,
    the per-file limit media other than images have; a request's own limits apply at build."""
    data = _as_bytes(data, "audio or video")
    if not isinstance(media_type, str):
        raise InvalidInputError(f"media_type is a string such as 'audio/wav', got "
                                f"{type(media_type).__name__}")
    bare = media_type_key(media_type)
    if not is_timed_media(bare):
        raise UnsupportedMediaError(f"attach_media stores audio or video (audio/..., video/...), got "
                                    f"{media_type!r}: images go through attach_image, PDFs attach_document")
    if not data:
        raise UnsupportedMediaError(f"{bare}: no bytes to store")
    sniffed = sniff_media_type(data)
    if sniffed is not None:
        call = "attach_image" if sniffed.startswith("image/") else "attach_document"
        raise UnsupportedMediaError(f"the bytes given as {bare} are {sniffed} ({call} stores them)")
    if len(data) > limits.max_document_bytes:
        raise InputLimitError(f"{bare} of {len(data)} bytes exceeds the limit of {limits.max_document_bytes} "
                              "bytes")
    info = _timed_info(data, bare)
    _proven("timed", blake3.blake3(data).hexdigest(), limits, info)  # an append does not read it again
    block = checked(DocumentBlock, "document", media_type=bare, title=title,
                    duration_ms=None if info is None else info.duration_ms)
    return block.model_copy(update={"artifact": store.put_artifact(data, bare)})


def decode_data_url(url: str, *, max_bytes: int) -> tuple[str | None, bytes]:
    """``(declared media type, bytes)`` of a base64 RFC 2397 URL; size checked before decoding."""
    inline = base64_data_url(url)
    if inline is None:
        raise UnsupportedMediaError("only base64 data: URLs can be stored as media")
    declared_type, payload = inline
    if len(payload) * 3 // 4 > max_bytes + 3:
        raise InputLimitError(f"inline media of about {len(payload) * 3 // 4} bytes exceeds the "
                              f"limit of {max_bytes} bytes")
    declared = declared_type or None
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UnsupportedMediaError(f"invalid base64 in a data: URL: {exc}") from exc
    return declared, data


def _check_source(block: ImageBlock | DocumentBlock, where: str) -> None:
    """An image or document with no bytes and no URL, or a document of fewer than one page, is
    refused: the first was priced and listed as sent while the request dropped it, the second
    made every later build fail with a pydantic ValidationError (a negative size)."""
    if block.artifact is None and not block.url:
        article = "an" if block.type == "image" else "a"
        raise UnsupportedMediaError(
            f"{where}: {article} {block.type} block with neither an artifact nor a url carries nothing "
            "to send (Store.attach_image / attach_document store the bytes)")
    if isinstance(block, DocumentBlock) and block.pages is not None and block.pages < 1:
        raise InvalidInputError(f"{where}: a document of {block.pages} pages "
                                "(pages is a count >= 1, or None when unknown)")


Cited = Callable[[ArtifactRef], "bytes | None"]
"""The bytes of an artifact an event cites, or None where they cannot be had (not held: refused
by the caller's own check; made by the same append from a ``data:`` URL: inspected then)."""
_PROVEN: dict[tuple[str, str, MediaLimits], MediaInfo | None] = {}
"""(kind, blake3 hash, limits) -> what those bytes proved (None: a document that is no PDF).
The hash names the bytes, so what they prove holds in any store: an image stored by
:func:`attach_image` then appended is not decoded twice. Bounded: emptied when full."""
_PROVEN_MAX = 4096
_UNKNOWN = "unknown"


def _proven(kind: str, digest: str, limits: MediaLimits, info: MediaInfo | None) -> MediaInfo | None:
    if len(_PROVEN) >= _PROVEN_MAX:
        _PROVEN.clear()
    _PROVEN[(kind, digest, limits)] = info
    return info


def _inspect_cited(block: ImageBlock | DocumentBlock, ref: ArtifactRef, cited: Cited,
                   limits: MediaLimits, where: str) -> ContentBlock:
    """``block`` as the bytes of the artifact it cites prove it, as :func:`attach_image` and
    :func:`attach_document` would have made it; a block whose bytes cannot be had, as it came."""
    timed = isinstance(block, DocumentBlock) and is_timed_media(block.media_type)
    kind = "timed" if timed else block.type  # what is proven of the bytes: a length, or a document
    info = _PROVEN.get((kind, ref.hash, limits), _UNKNOWN)  # one lookup: another thread may empty it
    if isinstance(info, str):
        data = cited(ref)
        if data is None:
            return block
        try:
            if isinstance(block, ImageBlock):
                info = inspect_image(data, media_type=block.media_type, limits=limits)
            elif "application/pdf" in (media_type_key(block.media_type), sniff_media_type(data)):
                info = inspect_document(data, media_type=block.media_type, limits=limits)
            elif timed:  # audio or video: its playing time, when its container tells it
                info = _timed_info(data, block.media_type)
            else:  # a text or office file: kept as it came, as from a data: URL
                info = None
        except (UnsupportedMediaError, InputLimitError) as exc:
            raise type(exc)(f"{where} cites artifact:{ref.hash}: {exc}") from exc
        _proven(kind, ref.hash, limits, info)
    if info is None:
        return block
    if info.duration_ms is not None and isinstance(block, DocumentBlock):
        return block.model_copy(update={"duration_ms": info.duration_ms})
    proven = ref.model_copy(update={"media_type": info.media_type, "size": info.size})
    if isinstance(block, ImageBlock):
        return block.model_copy(update={"artifact": proven, "media_type": info.media_type,
                                        "width": info.width, "height": info.height})
    return block.model_copy(update={"artifact": proven, "media_type": info.media_type, "pages": info.pages})


def _materialize_block(block: ContentBlock, limits: MediaLimits, blobs: list[Blob],
                       where: str, cited: Cited | None = None, as_logged: bool = False) -> ContentBlock:
    if not isinstance(block, ImageBlock | DocumentBlock):
        return block
    _check_source(block, where)
    if block.artifact is not None:  # the bytes are in the store, or carried by an import
        return block if cited is None else _inspect_cited(block, block.artifact, cited, limits, where)
    if block.url is None or not is_data_url(block.url):
        return block
    if isinstance(block, ImageBlock):
        declared, data = decode_data_url(block.url, max_bytes=limits.max_image_bytes)
        info = inspect_image(data, media_type=declared, limits=limits)
        ref = _ref(data, info.media_type)
        blobs.append((ref.hash, ref.size, ref.media_type, data))
        return block.model_copy(update={"artifact": ref, "url": None, "media_type": info.media_type,
                                        "width": info.width, "height": info.height})
    if not is_base64_data_url(block.url):
        return block  # a plain-text data: URL document is text, not media
    declared, data = decode_data_url(block.url, max_bytes=limits.max_document_bytes)
    sniffed = sniff_media_type(data)
    if sniffed != "application/pdf":
        # audio or video with the playing time its bytes tell (priced by it: ``media_cost``)
        timed = _timed_info(data, block.media_type) if is_timed_media(block.media_type) else None
        duration = block.duration_ms if timed is None else timed.duration_ms
        if not as_logged and _stored_as_sent(block, declared, data, sniffed):
            ref = _ref(data, block.media_type)
            blobs.append((ref.hash, ref.size, ref.media_type, data))
            return block.model_copy(update={"artifact": ref, "url": None, "duration_ms": duration})
        # A text or office file sent inline: kept as it came (renderers name it, never drop it)
        return block if timed is None else block.model_copy(update={"duration_ms": duration})
    info = inspect_document(data, media_type=declared, limits=limits)
    ref = _ref(data, info.media_type)
    blobs.append((ref.hash, ref.size, ref.media_type, data))
    return block.model_copy(update={"artifact": ref, "url": None, "media_type": info.media_type,
                                    "pages": info.pages})


def _stored_as_sent(block: DocumentBlock, declared: str | None, data: bytes, sniffed: str | None) -> bool:
    """Whether the audio or video ``data`` of ``block``'s ``data:`` URL is kept as an artifact: the
    request a build makes of it is then the one it made of the URL, the same base64 text under
    the same type (``media_finish`` sends a URL's payload as it is, an artifact's bytes encoded).

    Why move it at all: kept inline, the clip's base64 sat in the event, hashed into the chain,
    read by every fold and shown by ``events``, once per message carrying it, and an event over
    ``max_event_bytes`` was refused where ``Store.attach_media`` stores the same bytes. Kept as
    it came, as before: a text or office file, bytes that are an image (``attach_media`` refuses
    them), a URL whose type is not the block's (a request sent the URL's), and base64 that
    encodes its bytes otherwise than Python does (unused bits set: another text sent). Types are
    compared as RFC 2045 has them, without regard to case: a build names either in lower case."""
    same_type = declared is None or media_type_key(declared) == media_type_key(block.media_type)
    if not (is_timed_media(block.media_type) and same_type and sniffed is None and data
            and block.url is not None):
        return False
    return block.url.partition(",")[2] == base64.b64encode(data).decode("ascii")


def _timed_info(data: bytes, media_type: str) -> MediaInfo | None:
    """What audio or video bytes prove: their playing time (``media_duration``), or None when
    their container does not tell it (the block is then kept as it came, its length unknown)."""
    duration = media_duration_ms(data)
    return None if duration is None else MediaInfo("document", media_type, len(data), duration_ms=duration)


def _blocks(blocks: Iterable[ContentBlock], limits: MediaLimits, blobs: list[Blob], where: str,
            cited: Cited | None, as_logged: bool) -> tuple[ContentBlock, ...]:
    return tuple(_materialize_block(b, limits, blobs, where, cited, as_logged) for b in blocks)


def materialize(event: AnyEvent, limits: MediaLimits = DEFAULT_LIMITS, *, where: str = "an event",
                cited: Cited | None = None, as_logged: bool = False) -> tuple[AnyEvent, list[Blob]]:
    """Move inline ``data:`` media of ``event`` into artifacts: ``(event, blobs to store)``.

    Pure with respect to the store: it returns the blobs and the caller writes
    them (before the event, in the same append). Any invalid medium raises (one with no source,
    a document of fewer than one page, named by ``where``), so a batch with one bad image
    stores nothing. With ``cited``, media that already cite an artifact are checked too, their
    bytes read through it (:mod:`contextfold.store.citations`).

    ``as_logged``: ``event`` is a log's (an events export imported again), so an audio or video
    ``data:`` URL stays in it as the log held it (:func:`_stored_as_sent` is not asked). Why: an
    export written before such clips were moved holds them inline, and the builds its log
    recorded were made from them so; moved, a note standing for a clip names it by its artifact's
    hash, not its URL's, and every recorded turn the clip was in replayed to another
    request_hash (``tests/integration/test_old_export_reimport.py``). Images and PDFs were
    moved by every release, so a log holds none inline, and they are measured as ever.
    """
    blobs: list[Blob] = []
    match event:
        case UserInput():
            if any(isinstance(b, ImageBlock | DocumentBlock) for b in event.content):
                content = _blocks(event.content, limits, blobs, where, cited, as_logged)
                event = event.model_copy(update={"content": content})
        case ToolResult() | EvidenceRetrieved():
            medium = (media_artifact_block(event.artifact)
                      if isinstance(event, ToolResult) and event.artifact is not None else None)
            if medium is not None:  # the tool's own screenshot, recording or PDF: a medium, not a text
                event = event.model_copy(update={"artifact": None, "blocks": (medium, *event.blocks)})
            if event.blocks:
                blocks = _blocks(event.blocks, limits, blobs, where, cited, as_logged)
                event = event.model_copy(update={"blocks": blocks})
        case _:
            pass
    return event, blobs

"""Which media a provider refuses as they are, and the note sent in their place.

Why a module of its own: a medium the provider refuses (a type it does not take, an image over
its size limit) fails the whole request, on every build while the medium is in the window; the
SDK request types do not catch it (Gemini's ``mimeType`` and Anthropic's base64 ``data`` are free
strings). The same rule is read in three places that must agree: the builder prices such a
medium as the note that stands for it (``media_plan.plan_fragment``: no media tokens, the note
as caption text, the manifest's ``not_attached``), ``media_plan.finalize_media`` marks the part
(``MediaPart.unsent``) and the renderers write the note (:func:`unsent_media_note`); the protocol
check refuses a body that still carries one (``render.protocol``). A note names the medium and
why; the medium is never dropped in silence and never made up. Nothing here decodes an image:
sizes come from the artifact's byte count, dimensions from the log.

Rules, each from the provider's documentation:

- Gemini takes the types listed in :data:`GEMINI_MEDIA_TYPES` (ai.google.dev/gemini-api/docs:
  image-understanding, document-processing, audio, video-understanding) and refuses the rest:
  ``400 INVALID_ARGUMENT "Unsupported MIME type: ..."``. An image whose type the log does not
  know (``image/*``: a URL imported without one) is refused too (``fileData.mimeType`` is "the
  IANA standard MIME type of the source data").
- Anthropic (docs.anthropic.com/en/docs/build-with-claude/vision): an image of at most 5 MB
  (the API measures the base64 it receives: "image exceeds 5 MB maximum"), at most 8000 px a
  side, in JPEG, PNG, GIF or WebP when sent inline; and, in a request with more than 20 images,
  at most 2000 px a side (:func:`many_images_notes`, a rule of the whole request, applied by
  ``finalize_media``: the oldest images left out down to 20, or the wide ones, whichever keeps more).
- Per request (:data:`REQUEST_LIMITS`, applied by ``finalize_media`` to the media the request
  would carry, the newest first: the oldest past a limit become notes): Anthropic takes at most
  100 images and 100 PDF pages (build-with-claude/vision, /pdf-support) in a request of at most
  32 MB; Gemini at most 20 MB of request with its inline data (ai.google.dev/gemini-api/docs:
  image-understanding, document-processing: larger media go through the Files API); OpenAI at
  most 500 images and 50 MB of image bytes in a request, 20 MB an image (platform.openai.com/docs
  /guides/images-vision), and "up to 100 pages and 32MB of total content in a single request to
  the API, across multiple file inputs" (/guides/pdf-files), Chat Completions and Responses
  alike. A request's size is read off the base64 its inline media carry, beside its text's bytes
  as the provider's SDK sends them (``request_size``); OpenAI's bytes of images and of file inputs are
  read off their base64 too, what the request carries (the safe reading of "content": a file
  of 24 MB is 32 MB of it).
- OpenAI Chat Completions takes WAV and MP3 audio (``input_audio``) from an audio model's request
  only, and inline only (``model_family.chat_audio_model``): for any other model the whole
  request is refused. Such audio is a note (:data:`NOT_AN_AUDIO_MODEL`, :data:`AUDIO_INLINE_ONLY`),
  priced as one: priced as a PDF page, it had been charged 3,015 tokens for a line of text.
- A document the API takes no such part for (``_document_refusal``, the renderers' rules):
  Anthropic and Chat Completions take PDF documents only (Chat Completions inline only),
  Responses the file inputs of :data:`OPENAI_RESPONSES_FILE_TYPES`; audio and video for them are
  notes (only Gemini takes video; Chat Completions takes audio as above).
- A file a provider's Files API holds (a transcript's ``file_id``, logged as
  ``anthropic-file://`` / ``openai-file://``) goes by id to that provider only; another cannot
  read it (nor OpenAI Chat an image by id).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from contextfold.domain.event_values import media_type_key
from contextfold.projections.media_cost import media_family
from contextfold.projections.model_family import OPENAI_CHAT_AUDIO_FORMATS

__all__ = [
    "ANTHROPIC_IMAGE_TYPES",
    "ANTHROPIC_MANY_IMAGES",
    "ANTHROPIC_MANY_IMAGES_MAX_SIDE",
    "ANTHROPIC_MAX_IMAGE_BASE64",
    "ANTHROPIC_MAX_IMAGE_SIDE",
    "AUDIO_INLINE_ONLY",
    "DOCUMENTS_INLINE_ONLY",
    "FILE_SCHEMES",
    "GEMINI_MEDIA_TYPES",
    "NOT_AN_AUDIO_MODEL",
    "NO_AUDIO",
    "NO_VIDEO",
    "OPENAI_CHAT_FILE_TYPES",
    "OPENAI_MAX_IMAGE_BYTES",
    "OPENAI_RESPONSES_FILE_TYPES",
    "PDF_ONLY",
    "REQUEST_LIMITS",
    "RESPONSES_FILES_ONLY",
    "RequestLimits",
    "base64_length",
    "file_ref",
    "many_images_notes",
    "many_images_refusal",
    "refusal",
    "unsent_media_note",
]

GEMINI_MEDIA_TYPES = frozenset({
    # images
    "image/png", "image/jpeg", "image/webp", "image/heic", "image/heif",
    # documents (PDF, and the text types document-processing lists)
    "application/pdf", "application/x-javascript", "application/x-typescript",
    "application/x-python-code", "application/json", "application/rtf",
    "text/plain", "text/html", "text/css", "text/javascript", "text/x-typescript", "text/csv",
    "text/markdown", "text/x-python", "text/xml", "text/rtf",
    # audio (the Gemini API's list, then Vertex AI's)
    "audio/wav", "audio/mp3", "audio/aiff", "audio/aac", "audio/ogg", "audio/flac",
    "audio/mpeg", "audio/mpga", "audio/mp4", "audio/m4a", "audio/opus", "audio/pcm", "audio/webm",
    # video (likewise)
    "video/mp4", "video/mpeg", "video/mov", "video/avi", "video/x-flv", "video/mpg", "video/webm",
    "video/wmv", "video/3gpp", "video/quicktime", "video/mpegps",
})
"""The media types Gemini's documentation lists as supported inputs (ai.google.dev, and Vertex
AI's Gemini pages for the audio and video types the same models take, such as ``audio/mpeg``)."""

ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The types of an inline (base64) Anthropic image source."""
ANTHROPIC_MAX_IMAGE_BASE64 = 5 * 1024 * 1024
"""Anthropic's per-image limit, on the base64 text of the image (5,242,880 characters)."""
ANTHROPIC_MAX_IMAGE_SIDE = 8000
ANTHROPIC_MANY_IMAGES = 20
"""Above this many images in one request, each side is limited to :data:`ANTHROPIC_MANY_IMAGES_MAX_SIDE`."""
ANTHROPIC_MANY_IMAGES_MAX_SIDE = 2000
OPENAI_MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""OpenAI's per-image limit ("Up to 20MB per image")."""
_MB = 1024 * 1024

NOT_AN_AUDIO_MODEL = ("the request's model takes no audio (Chat Completions takes WAV and MP3 audio on "
                      "audio models only: gpt-4o-audio-preview, gpt-audio and their kin)")
"""Why Chat Completions audio is not attached for a model that is not an audio model."""
AUDIO_INLINE_ONLY = "this API takes audio inline only"
"""Why Chat Completions audio only a remote URL holds is not attached (``input_audio`` takes
base64 data, not a URL)."""


PDF_ONLY = "this API takes PDF documents only"
"""Why Anthropic and Chat Completions do not attach a document that is not a PDF (audio, video,
``octet-stream``, office files): Anthropic's ``document`` block takes a PDF (or text, which never
reaches a renderer as a medium), Chat Completions' ``file`` part a PDF."""
DOCUMENTS_INLINE_ONLY = "this API takes documents inline only"
"""Why Chat Completions does not attach a PDF only a remote URL holds (its ``file`` part takes
``file_data`` or a ``file_id``, no URL)."""
NO_VIDEO = "this API takes no video (only Gemini does)"
"""Why OpenAI's APIs and Anthropic do not attach a video: none of them has a video part."""
NO_AUDIO = "this API takes no audio"
"""Why Anthropic and Responses do not attach audio: neither has an audio input part (Chat
Completions' ``input_audio`` has its own reasons, :data:`NOT_AN_AUDIO_MODEL`)."""
RESPONSES_FILES_ONLY = "this API takes PDF, office, JSON and XML files only"
"""Why Responses does not attach a document that is no ``input_file`` (audio, video)."""

OPENAI_CHAT_FILE_TYPES: dict[str, str] = {"application/pdf": ".pdf"}
"""Media types a Chat Completions ``file`` part carries, with the filename extension.

The SDK's ``File`` part (``file_data``/``file_id``/``filename``) links OpenAI's file-inputs
guide, which says Chat Completions accepts PDF files only (and no ``file_url``)."""

OPENAI_RESPONSES_FILE_TYPES: dict[str, str] = {
    "application/pdf": ".pdf",
    "application/json": ".json",
    "application/xml": ".xml",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "application/vnd.ms-excel": ".xls",
}
"""Non-text media types a Responses ``input_file`` carries (``text/*`` documents are rendered
as text before they reach a renderer), with the filename extension: the document, text and
spreadsheet files OpenAI's file-inputs guide lists. Audio, video and ``octet-stream`` are not
file inputs."""


class RequestLimits(NamedTuple):
    """What one request of a provider may carry in all; None: no documented bound."""

    name: str
    """The provider as a note names it."""
    images: int | None
    pdf_pages: int | None
    inline_bytes: int | None
    """The request's bytes, its inline media's base64 and its text together (Anthropic, Gemini),
    or the images' (OpenAI)."""
    text_counts: bool
    """Whether the request's text counts toward ``inline_bytes`` (a whole-request size)."""
    file_bytes: int | None = None
    """The bytes of the request's file inputs together, apart from ``inline_bytes``: the base64
    of the documents it sends as files (OpenAI's 32 MB)."""


REQUEST_LIMITS: dict[str, RequestLimits] = {
    "anthropic": RequestLimits("Anthropic", 100, 100, 32 * _MB, True),
    "gemini": RequestLimits("Gemini", None, None, 20 * _MB, True),
    "openai": RequestLimits("OpenAI", 500, 100, 50 * _MB, False, 32 * _MB),
}
"""Per provider family: the module docstring's per-request rules."""


def base64_length(size: int) -> int:
    """The length of ``size`` bytes in base64 (padded)."""
    return 4 * math.ceil(size / 3)


FILE_SCHEMES: dict[str, str] = {"anthropic-file://": "anthropic", "openai-file://": "openai"}
"""How the importers log a medium a transcript names by a provider's file id (Anthropic's
``{"type": "file", "file_id": ...}`` source, OpenAI's ``file_id``): a URL of this scheme, and the
family of the provider whose Files API holds it."""


def file_ref(url: str | None) -> tuple[str, str] | None:
    """``(provider family, file id)`` when ``url`` names a file in a provider's Files API
    (:data:`FILE_SCHEMES`), else None."""
    if url is not None:
        for scheme, family in FILE_SCHEMES.items():
            if url.startswith(scheme):
                return family, url[len(scheme):]
    return None


def _file_refusal(provider: str, kind: str, issuer: str) -> str | None:
    """Why ``provider`` cannot take a file ``issuer``'s Files API holds: another provider cannot
    read it (it was never sent as bytes or a URL), and Chat Completions takes files, not images,
    by id (its ``image_url`` needs a URL)."""
    family = media_family(provider)
    if family == "neutral":
        return None
    if family != issuer:
        name = "Anthropic" if issuer == "anthropic" else "OpenAI"
        return f"a file in {name}'s Files API, which this provider cannot read"
    if provider == "openai-chat" and kind == "image":
        return "Chat Completions takes no image by file id"
    return None


def refusal(provider: str, kind: str, media_type: str, *, inline: bool, size: int | None,
            width: int | None, height: int | None, url: str | None = None,
            audio_model: bool | None = None) -> str | None:
    """Why ``provider`` refuses this medium as it is (the tail of its note), or None.

    ``inline``: it is sent as bytes (an artifact or a ``data:`` URL), not by URL; ``size``: its
    byte count when known; ``url``: where it is, for a file a provider's Files API holds
    (:func:`file_ref`: the issuing provider gets it by id whatever its logged type). ``neutral``
    (a build for no provider yet) refuses nothing: its media are priced at the dearest
    provider's price, above any note. ``audio_model``: whether the request's model is an audio
    model (``model_family.chat_audio_model``), None when not known (a conversation rendered
    without a build: the renderer then judges Chat Completions audio itself)."""
    ref = file_ref(url)
    if ref is not None:
        return _file_refusal(provider, kind, ref[0])
    media_type = media_type_key(media_type)  # RFC 2045: audio/MPEG is audio/mpeg
    match media_family(provider):
        case "gemini":
            if media_type not in GEMINI_MEDIA_TYPES:
                return "Gemini does not take this type"
        case "openai" | "anthropic" if kind == "document":
            return _document_refusal(provider, media_type, inline=inline, audio_model=audio_model)
        case "openai" if kind == "image":
            if inline and size is not None and size > OPENAI_MAX_IMAGE_BYTES:
                return f"over OpenAI's 20 MB image limit ({size} bytes)"
        case "anthropic" if kind == "image":
            if inline and media_type not in ANTHROPIC_IMAGE_TYPES:
                return "Anthropic takes JPEG, PNG, GIF and WebP images only"
            if inline and size is not None and base64_length(size) > ANTHROPIC_MAX_IMAGE_BASE64:
                return f"over Anthropic's 5 MB image limit ({size} bytes)"
            if max(width or 0, height or 0) > ANTHROPIC_MAX_IMAGE_SIDE:
                return f"over Anthropic's {ANTHROPIC_MAX_IMAGE_SIDE} px limit ({width}x{height})"
        case _:
            pass
    return None


def _document_refusal(provider: str, media_type: str, *, inline: bool,
                      audio_model: bool | None) -> str | None:
    """Why an OpenAI API or Anthropic does not take a document of ``media_type`` (the renderers'
    own rules, read here so that the build prices the note the renderer sends in its place, not
    a PDF page: a video had been charged 3,888 tokens for Anthropic and 3,015 for gpt-4o, and
    Anthropic's and Responses' audio likewise, for a line of text)."""
    if media_type.startswith("video/"):
        return NO_VIDEO
    if media_type.startswith("audio/") and provider in ("anthropic", "openai-responses"):
        return NO_AUDIO
    if provider == "anthropic":
        return None if media_type == "application/pdf" else PDF_ONLY
    if provider == "openai-responses":
        return None if media_type in OPENAI_RESPONSES_FILE_TYPES else RESPONSES_FILES_ONLY
    if media_type in OPENAI_CHAT_AUDIO_FORMATS:  # a renderer without a build judges audio itself
        if audio_model is None:
            return None
        return NOT_AN_AUDIO_MODEL if not audio_model else None if inline else AUDIO_INLINE_ONLY
    if media_type not in OPENAI_CHAT_FILE_TYPES:
        return PDF_ONLY
    return None if inline else DOCUMENTS_INLINE_ONLY


def many_images_refusal(provider: str, width: int | None, height: int | None) -> str | None:
    """Why ``provider`` refuses this image in a request of more than
    :data:`ANTHROPIC_MANY_IMAGES` images, or None (an image of unknown size is sent: the log
    cannot tell)."""
    side = max(width or 0, height or 0)
    if media_family(provider) == "anthropic" and side > ANTHROPIC_MANY_IMAGES_MAX_SIDE:
        return (f"over Anthropic's {ANTHROPIC_MANY_IMAGES_MAX_SIDE} px limit for a request of more than "
                f"{ANTHROPIC_MANY_IMAGES} images ({width}x{height})")
    return None


def many_images_notes(provider: str, images: list[tuple[str, int | None, int | None]]) -> dict[str, str]:
    """key -> why ``provider`` does not take that image, for the ``images`` (key, width, height;
    the oldest first) a request would carry when they are more than :data:`ANTHROPIC_MANY_IMAGES`.

    Two ways keep a request within Anthropic's rule: leave out the oldest images down to 20 (each
    then may be up to 8000 px), or keep every image of at most 2000 px a side. Whichever keeps more
    images is taken; on a tie the newest 20, as the other per-request limits keep the newest. Why:
    noting every wide image, the only way once, sent none of 21 screenshots of 2400x300 px where
    leaving out the oldest sent 20."""
    if media_family(provider) != "anthropic" or len(images) <= ANTHROPIC_MANY_IMAGES:
        return {}
    wide = {key: why for key, width, height in images
            if (why := many_images_refusal(provider, width, height)) is not None}
    if len(images) - len(wide) > ANTHROPIC_MANY_IMAGES:
        return wide
    past = len(images) - ANTHROPIC_MANY_IMAGES
    return {key: (f"past the {ANTHROPIC_MANY_IMAGES} images Anthropic takes in a request with an image over "
                  f"{ANTHROPIC_MANY_IMAGES_MAX_SIDE} px a side (the newest are sent)")
            for key, _, _ in images[:past]}


def unsent_media_note(kind: str, media_type: str, shown: str, why: str) -> str:
    """The text standing in for a medium the provider refuses: what it is (kind, type, URL or
    fragment id ``shown``) and why it is not attached (the form of
    ``render._shared.unsent_document_note``)."""
    return f"{kind} ({media_type}) {shown}: not attached, {why}"

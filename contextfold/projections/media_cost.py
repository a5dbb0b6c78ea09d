"""What an image or a PDF costs in input tokens, per provider, by the provider's published rule.

Why per provider (and, for OpenAI, per model): the same 1000x1000 screenshot is 765 tokens at
OpenAI's gpt-4o (25,501 at its gpt-4o-mini), about 1334 at Anthropic and 1032 at Gemini. A
builder that prices media one way for every provider overflows one window and wastes another.
The fold keeps one provider-neutral estimate (``fold_content.block_tokens``); the builder
re-prices every media block with :func:`media_cost` for the provider and model it builds for,
and the manifest records each price and the rule that produced it (``rule``).

Rules (each a pure function of what the log knows: type, dimensions, detail, pages):

OpenAI - per model (:mod:`.openai_images`, platform.openai.com/docs/guides/images-vision,
"Calculating costs"): the build's model picks the rule, named in the manifest with its numbers.
    Tile models (``openai-tiles:BASE+TILE``, ``openai-low:BASE``): detail ``low`` costs the base;
    ``high`` scales to fit in 2048x2048 (never up), then so the shortest side is 768 px (never
    up), and costs the base + a tile price per 512-px tile. gpt-4o / gpt-4.1 / gpt-4.5: 85 + 170
    (the guide's worked examples: 1024x1024 high -> 765; 2048x4096 high -> 1105; 4096x8192 low
    -> 85); gpt-4o-mini 2833 + 5667 (1024x1024 high -> 25,501); o1 / o3: 75 + 150; gpt-5: 70 + 140.
    Patch models (``openai-patches:xMULTIPLIER``): 32-px patches (at most 1536) times a
    multiplier, whatever the detail: gpt-4.1-mini 1.62 (1024x1024 -> 1,659), gpt-4.1-nano 2.46,
    o4-mini 1.72.
    detail ``auto`` is priced as ``high``: the model may choose high, and a
    budget must hold for the dearer choice.
    A model the table does not name (or none) is priced by the dearest rule for that image
    (``openai-unknown-model-max:RULE``): an over-count is room unused, an under-count a request
    refused as too long.

Anthropic - ``anthropic-pixels`` (docs.anthropic.com/en/docs/build-with-claude/vision,
"Evaluate image size"): tokens = width * height / 750, after the API's own
downscale of images whose long edge exceeds 1568 px or that exceed about 1.15
megapixels (the guide's largest no-resize sizes: 1092x1092, 951x1268,
896x1344, 819x1456, 784x1568, i.e. <= 1,229,312 px). Example in the guide:
1000x1000 -> ~1334 tokens; 1092x1092 -> ~1590.

Gemini - ``gemini-tiles`` (ai.google.dev/gemini-api/docs/tokens, "Multimodal
tokens", Gemini 2.x): an image with both sides <= 384 px is 258 tokens;
larger images are cropped and scaled into 768x768 tiles, 258 tokens each.

PDFs, by page count:

- ``gemini-pdf-pages``: 258 tokens per page (ai.google.dev/gemini-api/docs/document-processing:
  "each document page is equivalent to 258 tokens").
- ``anthropic-pdf-pages``: Anthropic sends each page as extracted text *and* a page
  image (docs.anthropic.com/en/docs/build-with-claude/pdf-support: "text token
  costs typically 1,500-3,000 tokens per page depending on content density" plus
  the image cost of each page). Estimate: 2,250 (the middle of that range) +
  the page image (a US-letter page at 200 dpi after Anthropic's downscale, 1,638) = 3,888.
- ``openai-pdf-pages:RULE``: OpenAI file inputs likewise put "both the extracted text
  and an image of each page" in context (platform.openai.com/docs/guides/pdf-files).
  Estimate: 2,250 text + a high-detail US-letter page image by the build model's image rule
  (gpt-4o 765: 3,015 a page; gpt-4o-mini 25,501: 27,751; an unknown model the dearest rule's).
  The page image is an image like any other to the model: priced as gpt-4o's for every model,
  a gpt-4o-mini build charged a 10-page PDF 30,150 tokens where the model counts ~277,500.
- A document whose page count is unknown (a remote URL) is priced as one page.

Audio, ``openai-audio`` (OpenAI Chat Completions' ``input_audio``, sent to an audio model only:
any other gets a note, priced as such by ``media_plan``): "Audio tokens in user messages are 1
token per 100 ms of audio" (platform.openai.com/docs/guides/realtime-costs; the audio models
share the tokenizer). Audio whose length is logged (``DocumentBlock.duration_ms``, read from
its bytes at append: ``store.media_duration``) is priced by it; otherwise the price is that of
the longest the bytes can hold: WAV at 8,000 bytes a second (8 kHz, 8-bit, mono: the least
PCM), MP3 at 1,000 (8 kbps, its lowest bitrate). The rule names that bound, so the manifest
says the duration was not known.
Priced as a PDF page, a 10-minute recording (6,000 tokens) was charged 3,015.

Audio, ``gemini-audio`` (any audio Gemini takes, inline or by URL): "Gemini represents each
second of audio as 32 tokens; for example, one minute of audio is represented as 1,920 tokens"
(ai.google.dev/gemini-api/docs/audio, "Technical details about audio"). Priced as a PDF page (258,
what 8 s of audio costs), a 30-second voice note (960) was under-counted almost fourfold. Its
logged length, in whole seconds rounded up, when the log has it; else the same bound as
OpenAI's: the longest the bytes can hold at the least a second of the format takes
(:data:`_GEMINI_AUDIO_LEAST_BYTES_PER_SECOND`: PCM in WAV, AIFF or raw 8,000 bytes, 8 kHz 8-bit mono;
MP3 1,000, its 8 kbps; AAC (``aac``, ``mp4``, ``m4a``) 1,000, HE-AAC's usual least 8 kbps; Ogg,
Opus and WebM 750, Opus's 6 kbps; FLAC 1,000, an assumption: lossless, a compression better than
8:1 over the least PCM, which only near-silence reaches). Audio whose size the log does not
know (a remote URL the build never fetches) or of a type not listed is priced at
:data:`GEMINI_AUDIO_UNKNOWN_SECONDS` (10 minutes: 19,200 tokens), a stated guess that the rule
names (``length unknown``): Gemini's own bound, 9.5 hours a prompt (1,094,400 tokens), is more than
its window, so pricing by it would leave such audio, and the message carrying it, out of every
request. A runtime that wants the exact price logs the audio inline or as an artifact (its
length is then read from it), or gives the length of a remote URL's in ``duration_ms``.

Video, ``gemini-video`` (only Gemini takes video): "video at 263 tokens per second" (ai.google.dev/
gemini-api/docs/tokens; the video guide's 258 tokens a frame at its default 1 frame a second, plus
32 a second of sound), over the logged length in whole seconds rounded up: a minute is 15,780
tokens. Priced as a PDF page (258), a minute of video was under-counted sixtyfold. A video whose
length the log does not know is still priced as one 258-token page, and the rule says the
duration was unknown: any guess of a length is a price no evidence backs, and a generous one (a
600 s fallback, ~158,000 tokens) left such a video out of every neutral build under ~180k tokens.

Unknown image dimensions (a remote URL never fetched) get the provider's
largest price: OpenAI the model's rule for its largest image (gpt-4o high 1445: 2048x768 after
resizing, 8 tiles; a patch model 1536 patches), Anthropic
1640 (the largest image it does not downscale further), Gemini 1032 (4 tiles).

``neutral`` (a build for no provider yet) prices every block at the highest of
the three providers (``max-of-providers``; OpenAI's by the build's model, the dearest rule for
none), so the neutral selection fits whichever provider it is finally rendered for. A video is
the exception that proves the rule: only Gemini takes one, OpenAI's and Anthropic's requests
carry a note in its place ("not attached"), so the highest any request pays for it is Gemini's
``gemini-video`` price, by its logged length (one page when the length is not logged, as Gemini's
build prices it, for the reason above), and the rule says so (:data:`NEUTRAL_VIDEO`). Priced as
the dearest PDF page of the three, a 10 s clip cost a neutral build without a model 27,751 tokens
(gpt-4o-mini's page image), ten times what any provider counts, and was left out of small builds.
Audio likewise (:data:`NEUTRAL_AUDIO`): only Gemini (``gemini-audio``) and OpenAI Chat's audio
models (``openai-audio``, inline WAV and MP3) take it, Anthropic and Responses send a note, so a
neutral build prices it at the dearer of those two, by its logged length; when the length is not
logged, by the longest its bytes can hold, and when its size is not known either (a remote URL),
at Gemini's stated guess (:data:`GEMINI_AUDIO_UNKNOWN_SECONDS`, the rule says ``length unknown``).
Floored at the dearest PDF page, a 10 s voice note (320 tokens at Gemini) cost a neutral build
without a model 27,751.

Reduction (the safe step before dropping, see the builder): only OpenAI
offers a cheaper rendition of the same image, ``detail: low`` (the tile rule's base), and only
for its tile models: a patch model ignores ``detail``, so a reduction there frees nothing and is
not offered (it had freed 680 tokens of the budget that the request still spent).
Anthropic has no detail parameter, Gemini 2.x none per image (Gemini 3's
per-part ``mediaResolution`` uses other token figures and is not modelled),
and no provider offers one for PDFs; there the next step is dropping.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias, TypeGuard

from contextfold.domain.event_values import data_url_size, media_type_key
from contextfold.domain.events import DocumentBlock, ImageBlock
from contextfold.domain.fragments import ToolResultBlock
from contextfold.projections.model_family import OPENAI_CHAT_AUDIO_FORMATS, model_family
from contextfold.projections.openai_images import (
    GPT_4O_IMAGE_RULE,
    OPENAI_IMAGE_RULES,
    OpenAIImageRule,
    openai_image_rule,
)

__all__ = [
    "ANTHROPIC_MAX_PIXELS",
    "ANTHROPIC_MAX_SIDE",
    "ANTHROPIC_PDF_PAGE_TOKENS",
    "GEMINI_AUDIO_TOKENS_PER_SECOND",
    "GEMINI_AUDIO_UNKNOWN_SECONDS",
    "GEMINI_TOKENS_PER_IMAGE",
    "GEMINI_VIDEO_TOKENS_PER_SECOND",
    "MEDIA_PROVIDERS",
    "NEUTRAL_AUDIO",
    "NEUTRAL_VIDEO",
    "OPENAI_AUDIO_TOKENS_PER_SECOND",
    "OPENAI_PDF_PAGE_TOKENS",
    "UNKNOWN_MODEL_RULE",
    "MediaCost",
    "MediaProvider",
    "anthropic_image_tokens",
    "audio_cost",
    "document_cost",
    "gemini_audio_cost",
    "gemini_image_tokens",
    "gemini_timed_cost",
    "gemini_video_cost",
    "image_cost",
    "is_priced_media",
    "media_cost",
    "media_family",
    "openai_image_key",
    "openai_image_tokens",
    "priced_media",
    "reduced_block",
]

MediaProvider: TypeAlias = Literal["openai", "anthropic", "gemini", "neutral"]
MEDIA_PROVIDERS: tuple[MediaProvider, ...] = ("openai", "anthropic", "gemini")

UNKNOWN_MODEL_RULE = "openai-unknown-model-max"
"""The rule prefix of an image priced for an OpenAI model the table does not name (or none)."""
ANTHROPIC_MAX_SIDE = 1568
ANTHROPIC_MAX_PIXELS = 1_229_312
"""784 x 1568, the largest size in Anthropic's no-resize table."""
ANTHROPIC_UNKNOWN_TOKENS = math.ceil(ANTHROPIC_MAX_PIXELS / 750)
GEMINI_TOKENS_PER_IMAGE = 258
GEMINI_SMALL_SIDE = 384
GEMINI_TILE_SIDE = 768
GEMINI_UNKNOWN_TOKENS = 4 * GEMINI_TOKENS_PER_IMAGE
PDF_PAGE_TEXT_TOKENS = 2250
LETTER_PAGE_PX = (1700, 2200)
"""A US-letter page rasterised at 200 dpi: the page image the PDF rules price."""


@dataclass(frozen=True, slots=True)
class MediaCost:
    """The price of one media block and the rule that produced it (shown in the manifest)."""

    tokens: int
    rule: str


NEUTRAL_VIDEO = "only Gemini takes video; OpenAI and Anthropic are sent a note in its place"
"""Why a neutral build prices a video by Gemini's rule alone (module docstring), in its rule."""
NEUTRAL_AUDIO = ("only Gemini and OpenAI Chat (an audio model, inline WAV or MP3) take audio; "
                 "Anthropic and OpenAI Responses are sent a note in its place")
"""Why a neutral build prices audio by the dearer of Gemini's and OpenAI Chat's rules alone, never
as a PDF page (module docstring), in its rule."""


def media_family(provider: str) -> MediaProvider:
    """Which pricing family a build provider belongs to (``openai-chat`` -> ``openai``)."""
    if provider.startswith("openai"):
        return "openai"
    if provider == "anthropic":
        return "anthropic"
    if provider == "gemini":
        return "gemini"
    return "neutral"


def openai_image_tokens(width: int, height: int, detail: str = "high") -> int:
    """GPT-4o's tile arithmetic (85 + 170 per tile): the rule of the guide's worked examples."""
    return GPT_4O_IMAGE_RULE.tokens(width, height, detail)


def anthropic_image_tokens(width: int, height: int) -> int:
    """``w * h / 750`` after Anthropic's downscale (long edge <= 1568, <= ~1.2 MP)."""
    scale = min(1.0, ANTHROPIC_MAX_SIDE / max(width, height),
                math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height)))
    w, h = math.floor(width * scale), math.floor(height * scale)
    return math.ceil(max(1, w) * max(1, h) / 750)


def gemini_image_tokens(width: int, height: int) -> int:
    """258 for an image with both sides <= 384 px, else 258 per 768x768 tile."""
    if width <= GEMINI_SMALL_SIDE and height <= GEMINI_SMALL_SIDE:
        return GEMINI_TOKENS_PER_IMAGE
    tiles = math.ceil(width / GEMINI_TILE_SIDE) * math.ceil(height / GEMINI_TILE_SIDE)
    return GEMINI_TOKENS_PER_IMAGE * tiles


OPENAI_PDF_PAGE_TOKENS = PDF_PAGE_TEXT_TOKENS + openai_image_tokens(*LETTER_PAGE_PX)
"""A page at gpt-4o (its image at high detail: OpenAI does not say at which detail its file
inputs' page images are counted, and ``auto`` may be high). Other models' pages are priced by
their own image rule (:func:`document_cost`)."""
OPENAI_AUDIO_TOKENS_PER_SECOND = 10
"""OpenAI's "1 token per 100 ms" of a user message's audio (module docstring)."""
_AUDIO_LEAST_BYTES_PER_SECOND = {"wav": 8000, "mp3": 1000}
"""The fewest bytes a second of each ``input_audio`` format takes (module docstring)."""
ANTHROPIC_PDF_PAGE_TOKENS = PDF_PAGE_TEXT_TOKENS + anthropic_image_tokens(*LETTER_PAGE_PX)
GEMINI_AUDIO_TOKENS_PER_SECOND = 32
"""Gemini's "each second of audio as 32 tokens" (module docstring)."""
GEMINI_AUDIO_UNKNOWN_SECONDS = 600
"""The length audio of unknown size is priced at for Gemini (module docstring)."""
GEMINI_VIDEO_TOKENS_PER_SECOND = 263
"""Gemini's fixed rate for video: 258 tokens a frame at 1 frame a second, and 32 a second of its
sound (module docstring)."""
_GEMINI_AUDIO_LEAST_BYTES_PER_SECOND = {
    "audio/wav": 8000, "audio/aiff": 8000, "audio/pcm": 8000,
    "audio/mp3": 1000, "audio/mpeg": 1000, "audio/mpga": 1000,
    "audio/aac": 1000, "audio/mp4": 1000, "audio/m4a": 1000,
    "audio/ogg": 750, "audio/opus": 750, "audio/webm": 750,
    "audio/flac": 1000,
}
"""The fewest bytes a second of each audio type Gemini takes (``media_limits.GEMINI_MEDIA_TYPES``)
holds (module docstring)."""


def _openai_image_cost(rule: OpenAIImageRule, width: int | None, height: int | None,
                       detail: str) -> MediaCost:
    kind = "openai-patches" if rule.patches else "openai-low" if detail == "low" else "openai-tiles"
    if not (width and height and width > 0 and height > 0):
        if kind == "openai-low":  # the base, whatever the size
            return MediaCost(rule.base, f"openai-low:{rule.name}")
        return MediaCost(rule.largest(detail), f"openai-unknown-size-max:{rule.name}")
    return MediaCost(rule.tokens(width, height, detail), f"{kind}:{rule.name}")


def image_cost(family: MediaProvider, width: int | None, height: int | None,
               detail: str = "auto", model: str | None = None) -> MediaCost:
    """The price of an image for ``family``; OpenAI's by ``model``'s rule (module docstring)."""
    known = bool(width and height and width > 0 and height > 0)
    match family:
        case "openai":
            rule = openai_image_rule(model)
            if rule is not None:
                return _openai_image_cost(rule, width, height, detail)
            worst = max((_openai_image_cost(r, width, height, detail) for r in OPENAI_IMAGE_RULES),
                        key=lambda c: c.tokens)
            return MediaCost(worst.tokens, f"{UNKNOWN_MODEL_RULE}:{worst.rule}")
        case "anthropic":
            if not known:
                return MediaCost(ANTHROPIC_UNKNOWN_TOKENS, "anthropic-unknown-size-max")
            return MediaCost(anthropic_image_tokens(width or 0, height or 0), "anthropic-pixels")
        case "gemini":
            if not known:
                return MediaCost(GEMINI_UNKNOWN_TOKENS, "gemini-unknown-size")
            return MediaCost(gemini_image_tokens(width or 0, height or 0), "gemini-tiles")
        case "neutral":
            side = _neutral_openai_model(model)
            worst = max((image_cost(f, width, height, detail, side if f == "openai" else model)
                         for f in MEDIA_PROVIDERS), key=lambda c: c.tokens)
            return MediaCost(worst.tokens, f"max-of-providers:{worst.rule}")


def openai_image_key(provider: str, model: str | None) -> str | None:
    """What of ``model`` decides the image prices of a build for ``provider``: the name of its
    OpenAI image rule (``unknown`` for a model the table does not name), None when the provider
    prices no image by OpenAI's rules. A cache of prices is keyed by this, not by the model's
    name: the builds for two models of one rule share it, those for two rules never do."""
    if media_family(provider) not in ("openai", "neutral"):
        return None
    rule = openai_image_rule(_neutral_openai_model(model) if provider == "neutral" else model)
    return "unknown" if rule is None else rule.name


def _neutral_openai_model(model: str | None) -> str | None:
    """The model a neutral build prices its OpenAI side by: ``model``, or gpt-4o for a
    model certainly another vendor's (``model_family``). Such a run's request goes to its own
    vendor, whose price is in the neutral maximum anyway; the dearest OpenAI rule (an unknown
    model's) charged a Claude run's 1024x1024 screenshot ~25,500 tokens. A build for an OpenAI
    provider naming such a model (a gateway's route) still pays the dearest rule."""
    if (model is not None and openai_image_rule(model) is None
            and model_family(model) in ("anthropic", "gemini")):
        return "gpt-4o"  # the rule of the guide's worked examples (GPT_4O_IMAGE_RULE)
    return model


def _openai_pdf_cost(rule: OpenAIImageRule, pages: int) -> MediaCost:
    page = PDF_PAGE_TEXT_TOKENS + rule.tokens(*LETTER_PAGE_PX, "high")
    return MediaCost(page * pages, f"openai-pdf-pages:{rule.name}")


def document_cost(family: MediaProvider, pages: int | None, model: str | None = None) -> MediaCost:
    """The price of a PDF of ``pages`` (one when unknown) for ``family``; OpenAI's page image by
    ``model``'s image rule, the dearest for a model the table does not name (module docstring)."""
    n = pages if pages and pages > 0 else 1
    match family:
        case "openai":
            rule = openai_image_rule(model)
            if rule is not None:
                return _openai_pdf_cost(rule, n)
            worst = max((_openai_pdf_cost(r, n) for r in OPENAI_IMAGE_RULES), key=lambda c: c.tokens)
            return MediaCost(worst.tokens, f"{UNKNOWN_MODEL_RULE}:{worst.rule}")
        case "anthropic":
            return MediaCost(ANTHROPIC_PDF_PAGE_TOKENS * n, "anthropic-pdf-pages")
        case "gemini":
            return MediaCost(GEMINI_TOKENS_PER_IMAGE * n, "gemini-pdf-pages")
        case "neutral":
            side = _neutral_openai_model(model)
            worst = max((document_cost(f, pages, side if f == "openai" else model) for f in MEDIA_PROVIDERS),
                        key=lambda c: c.tokens)
            return MediaCost(worst.tokens, f"max-of-providers:{worst.rule}")


def _media_size(block: DocumentBlock) -> int | None:
    """The bytes of ``block``'s medium: its artifact's size or its ``data:`` URL's decoded length;
    None for a remote URL, which the build never fetches."""
    if block.artifact is not None:
        return block.artifact.size
    return data_url_size(block.url)


def _longest_audio(size: int, rate: int, per_second: int) -> int:
    """Tokens at ``per_second`` over the longest ``size`` bytes can play at ``rate`` bytes a second."""
    return max(1, -(-size * per_second // rate))


def _logged_seconds(block: DocumentBlock) -> int | None:
    """The whole seconds ``block`` plays (its logged ``duration_ms``, rounded up, at least one),
    or None when the log does not know its length."""
    if block.duration_ms is None:
        return None
    return max(1, -(-block.duration_ms // 1000))


def gemini_video_cost(block: DocumentBlock) -> MediaCost | None:
    """What Gemini counts for ``block`` when it is video: 263 tokens a second of its logged length
    (module docstring); one 258-token page, as before, when its length is not logged (the rule
    says so); None for anything but video."""
    if not media_type_key(block.media_type).startswith("video/"):
        return None
    seconds = _logged_seconds(block)
    if seconds is None:
        return MediaCost(GEMINI_TOKENS_PER_IMAGE,
                         f"gemini-video:{GEMINI_VIDEO_TOKENS_PER_SECOND}/s, duration unknown: "
                         f"priced as one {GEMINI_TOKENS_PER_IMAGE}-token page")
    return MediaCost(seconds * GEMINI_VIDEO_TOKENS_PER_SECOND,
                     f"gemini-video:{GEMINI_VIDEO_TOKENS_PER_SECOND}/s, {seconds} s logged")


def gemini_timed_cost(block: DocumentBlock) -> MediaCost | None:
    """What Gemini counts for ``block`` by its length: :func:`gemini_video_cost` of a video,
    :func:`gemini_audio_cost` of audio (a block is one or the other: its media type), else None.
    The build's price (:func:`media_cost`) and the fold's estimate (``fold_content``) both."""
    return gemini_video_cost(block) or gemini_audio_cost(block)


def audio_cost(block: DocumentBlock) -> MediaCost | None:
    """What OpenAI counts for ``block`` sent as ``input_audio``: 10 tokens a second over the
    longest duration its bytes can hold (module docstring), or None when it is not such audio or
    its size is not known (a remote URL, which ``input_audio`` does not take: a note instead)."""
    fmt = OPENAI_CHAT_AUDIO_FORMATS.get(media_type_key(block.media_type))
    size = None if fmt is None else _media_size(block)
    if fmt is None or size is None:
        return None
    if block.duration_ms is not None:  # 1 token per 100 ms of the logged length
        return MediaCost(max(1, -(-block.duration_ms // 100)),
                         f"openai-audio:{OPENAI_AUDIO_TOKENS_PER_SECOND}/s, {block.duration_ms} ms logged")
    rate = _AUDIO_LEAST_BYTES_PER_SECOND[fmt]
    tokens = _longest_audio(size, rate, OPENAI_AUDIO_TOKENS_PER_SECOND)
    return MediaCost(tokens, f"openai-audio:{OPENAI_AUDIO_TOKENS_PER_SECOND}/s, duration not logged: "
                             f"at most {size} bytes / {rate} bytes a second ({fmt})")


def gemini_audio_cost(block: DocumentBlock) -> MediaCost | None:
    """What Gemini counts for ``block`` when it is audio: 32 tokens a second over the longest its
    bytes can hold, or over :data:`GEMINI_AUDIO_UNKNOWN_SECONDS` when its size or its type's least
    bitrate is not known (module docstring); None for anything but audio."""
    if not media_type_key(block.media_type).startswith("audio/"):
        return None
    per_second, guess = GEMINI_AUDIO_TOKENS_PER_SECOND, GEMINI_AUDIO_UNKNOWN_SECONDS
    if (seconds := _logged_seconds(block)) is not None:
        return MediaCost(seconds * per_second, f"gemini-audio:{per_second}/s, {seconds} s logged")
    key = media_type_key(block.media_type)
    size, rate = _media_size(block), _GEMINI_AUDIO_LEAST_BYTES_PER_SECOND.get(key)
    if size is None or rate is None:
        return MediaCost(guess * per_second,
                         f"gemini-audio:{per_second}/s, length unknown: priced as {guess} s")
    return MediaCost(_longest_audio(size, rate, per_second),
                     f"gemini-audio:{per_second}/s, duration not logged: at most {size} bytes / {rate} "
                     f"bytes a second ({key})")


def is_priced_media(block: object) -> TypeGuard[ImageBlock | DocumentBlock]:
    """Images, and documents that are not text payloads (artifact-backed text is counted as text)."""
    if isinstance(block, ImageBlock):
        return True
    return isinstance(block, DocumentBlock) and not media_type_key(block.media_type).startswith("text/")


def priced_media(blocks: Iterable[object]) -> tuple[ImageBlock | DocumentBlock, ...]:
    """The priced media among ``blocks``, and inside any tool result among them, in order."""
    out: list[ImageBlock | DocumentBlock] = []
    for block in blocks:
        inner = block.blocks if isinstance(block, ToolResultBlock) else (block,)
        out.extend(b for b in inner if is_priced_media(b))
    return tuple(out)


def media_cost(provider: str, block: ImageBlock | DocumentBlock, model: str | None = None) -> MediaCost:
    """The price of ``block`` for ``provider`` (a build provider name or a family) and ``model``
    (the one the request is for: OpenAI prices images per model)."""
    family = media_family(provider)
    if isinstance(block, ImageBlock):
        return image_cost(family, block.width, block.height, block.detail, model)
    document = document_cost(family, block.pages, model)
    if family in ("gemini", "neutral") and (timed := gemini_timed_cost(block)) is not None:
        # Gemini sees video and hears audio by their length, never as pages; neutral pays the
        # dearest provider that takes the medium, never a page (NEUTRAL_VIDEO, NEUTRAL_AUDIO).
        if family == "gemini":
            return timed
        if media_type_key(block.media_type).startswith("video/"):
            return MediaCost(timed.tokens, f"max-of-providers:{timed.rule} ({NEUTRAL_VIDEO})")
        return _neutral_audio_cost(block, timed)
    if provider == "openai-chat" and (audio := audio_cost(block)) is not None:
        return audio  # sent as ``input_audio`` (an audio model; any other's note: ``media_plan``)
    return document


def _neutral_audio_cost(block: DocumentBlock, gemini: MediaCost) -> MediaCost:
    """A neutral build's price of audio: the dearer of what Gemini counts (when it takes the type)
    and what OpenAI Chat's ``input_audio`` counts (when it can carry it: WAV or MP3, inline), by
    the logged length, else the longest the bytes can hold (module docstring). Audio neither
    takes (a type Gemini does not list, only a URL holds) is every provider's note; it keeps
    Gemini's price, length unknown: a guess that is never below a note's."""
    openai = audio_cost(block)
    listed = media_type_key(block.media_type) in _GEMINI_AUDIO_LEAST_BYTES_PER_SECOND
    takers = [c for c in (gemini if listed else None, openai) if c is not None]
    worst = max(takers or [gemini], key=lambda c: c.tokens)
    return MediaCost(worst.tokens, f"max-of-providers:{worst.rule} ({NEUTRAL_AUDIO})")


def reduced_block(provider: str, block: ImageBlock | DocumentBlock,
                  model: str | None = None) -> ImageBlock | None:
    """The cheaper rendition ``provider`` offers for ``block`` with ``model``, or None (then: drop).
    ``detail: low`` is offered only where it costs less: a patch model ignores ``detail``."""
    if (media_family(provider) == "openai" and isinstance(block, ImageBlock)
            and block.detail != "low"):
        low = block.model_copy(update={"detail": "low"})
        if media_cost(provider, low, model).tokens < media_cost(provider, block, model).tokens:
            return low
    return None

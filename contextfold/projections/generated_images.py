"""What an OpenAI ``image_generation_call`` item costs when it goes back: its fields, and its image
as an image, not as its base64 text.

Why: the item a Responses reply holds (kept verbatim among its reasoning items, sent back as it
came) carries the generated image whole, base64, in ``result``. Priced as the item's JSON text,
a 1024x1024 PNG (~1.5 MB of base64) counted as ~1 million tokens where the model is shown one
image: the turn was left out of every build, and under a tight budget pushed the rest of the
context out. The image is priced as the fold prices any image (OpenAI's rule for gpt-4o, 85 + 170
per 512-px tile after the high-detail scaling: platform.openai.com/docs/guides/images-vision,
"Calculating costs"), by its size: the item's ``size`` (``"1024x1536"``), else the PNG or WebP
header at the start of ``result``, else the largest image the tool makes (1536x1024: 1,105
tokens). The rest of the item (id, status, revised prompt...) is counted as text. Not per model:
a fragment's price is fixed when folded (``reasoning``), and this is the fold's neutral estimate
for an image (gpt-5's 70 + 140 is below it; a patch model such as gpt-4.1-mini above).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any

from contextfold.domain.canonical import canonical_dumps
from contextfold.projections.openai_images import GPT_4O_IMAGE_RULE

__all__ = ["LARGEST_GENERATED", "generated_image_size", "responses_item_tokens"]

LARGEST_GENERATED = (1536, 1024)
"""The largest size OpenAI's image generation tool makes (``size``: 1024x1024, 1024x1536,
1536x1024 or ``auto``, which picks one of them)."""

_SIZE = re.compile(r"^\s*(\d{1,5})\s*x\s*(\d{1,5})\s*$")
_HEAD_CHARS = 64
"""Base64 characters enough for a PNG's IHDR or a WebP's first chunk header (48 bytes)."""


def responses_item_tokens(raw: dict[str, Any], count: Callable[[str], int]) -> int:
    """The tokens of one reasoning or hosted item as sent: its canonical JSON, but for an
    ``image_generation_call``'s image (``result``), priced as an image."""
    result = raw.get("result")
    if raw.get("type") != "image_generation_call" or not isinstance(result, str) or not result:
        return count(canonical_dumps(raw))
    rest = {key: value for key, value in raw.items() if key != "result"}
    width, height = generated_image_size(raw)
    return count(canonical_dumps(rest)) + GPT_4O_IMAGE_RULE.tokens(width, height, "high")


def generated_image_size(raw: dict[str, Any]) -> tuple[int, int]:
    """The generated image's width and height (see the module): its ``size``, its header, or the
    largest the tool makes."""
    size = raw.get("size")
    if isinstance(size, str) and (found := _SIZE.match(size)) and all(int(n) for n in found.groups()):
        return int(found[1]), int(found[2])
    result = raw.get("result")
    head = _head(result) if isinstance(result, str) else b""
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
        width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
        if width and height:
            return width, height
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        found_size = _webp_size(head)
        if found_size is not None:
            return found_size
    return LARGEST_GENERATED


def _head(result: str) -> bytes:
    chunk = result[:_HEAD_CHARS]
    try:
        return base64.b64decode(chunk + "=" * (-len(chunk) % 4), validate=False)
    except (binascii.Error, ValueError):
        return b""


def _webp_size(head: bytes) -> tuple[int, int] | None:
    """A WebP's canvas size from its first chunk (VP8X, VP8L or VP8), or None."""
    kind = head[12:16]
    if kind == b"VP8X" and len(head) >= 30:
        return 1 + int.from_bytes(head[24:27], "little"), 1 + int.from_bytes(head[27:30], "little")
    if kind == b"VP8L" and len(head) >= 25 and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if kind == b"VP8 " and len(head) >= 30 and head[23:26] == b"\x9d\x01\x2a":
        return int.from_bytes(head[26:28], "little") & 0x3FFF, int.from_bytes(head[28:30], "little") & 0x3FFF
    return None

"""Media pricing checked against the providers' own published worked examples.

Sources (stated where each number comes from):

- OpenAI, platform.openai.com/docs/guides/images-vision "Calculating costs":
  "A 1024 x 1024 square image in detail: high mode costs 765 tokens";
  "A 2048 x 4096 image in detail: high mode costs 1105 tokens";
  "A 4096 x 8192 image in detail: low most costs 85 tokens".
- Anthropic, docs.anthropic.com/en/docs/build-with-claude/vision "Calculate image costs":
  tokens = (width px * height px) / 750; the table lists 200x200 -> ~54,
  1000x1000 -> ~1334, 1092x1092 -> ~1590; images beyond 1568 px on the long
  edge are scaled down first.
- Gemini, ai.google.dev/gemini-api/docs/tokens: "images with both dimensions
  <= 384 pixels are counted as 258 tokens. Images larger in one or both
  dimensions are cropped and scaled as needed into tiles of 768x768 pixels,
  each counted as 258 tokens"; document-processing: "each document page is
  equivalent to 258 tokens".
"""

from __future__ import annotations

import pytest

from contextfold.domain.events import ArtifactRef, DocumentBlock, ImageBlock
from contextfold.projections.media_cost import (
    ANTHROPIC_PDF_PAGE_TOKENS,
    OPENAI_PDF_PAGE_TOKENS,
    anthropic_image_tokens,
    document_cost,
    gemini_image_tokens,
    image_cost,
    media_cost,
    media_family,
    openai_image_tokens,
    reduced_block,
)

REF = ArtifactRef(hash="a" * 64, size=10, media_type="image/png")


@pytest.mark.parametrize(("w", "h", "detail", "tokens"), [
    (1024, 1024, "high", 765),   # OpenAI's first worked example
    (2048, 4096, "high", 1105),  # second worked example: 1024x2048 -> 768x1536 -> 6 tiles
    (4096, 8192, "low", 85),     # third: low detail is flat
    (512, 512, "high", 255),     # one tile: 170 + 85 (no upscaling to 768)
])
def test_openai_worked_examples(w: int, h: int, detail: str, tokens: int) -> None:
    assert openai_image_tokens(w, h, detail) == tokens


@pytest.mark.parametrize(("w", "h", "tokens"), [
    (200, 200, 54),      # Anthropic table: ~54
    (1000, 1000, 1334),  # ~1334
    (1092, 1092, 1590),  # ~1590, the largest square sent unresized
])
def test_anthropic_worked_examples(w: int, h: int, tokens: int) -> None:
    assert anthropic_image_tokens(w, h) == tokens


def test_anthropic_downscales_large_images_before_pricing() -> None:
    # A 4K screenshot is resized to <= 1568 px and ~1.2 MP: never more than ~1640 tokens.
    assert anthropic_image_tokens(3840, 2160) <= 1640
    assert anthropic_image_tokens(3840, 2160) > 1500
    assert anthropic_image_tokens(784, 1568) == 1640  # the tall end of the no-resize table


@pytest.mark.parametrize(("w", "h", "tokens"), [
    (384, 384, 258),     # both sides <= 384: one image, 258
    (200, 300, 258),
    (768, 768, 258),     # one 768 tile
    (1000, 1000, 1032),  # 2 x 2 tiles
    (1920, 1080, 258 * 3 * 2),
])
def test_gemini_per_image_and_tiles(w: int, h: int, tokens: int) -> None:
    assert gemini_image_tokens(w, h) == tokens


def test_pdf_pages_per_provider() -> None:
    assert document_cost("gemini", 10).tokens == 2580  # 258 per page
    assert document_cost("anthropic", 2).tokens == 2 * ANTHROPIC_PDF_PAGE_TOKENS
    assert ANTHROPIC_PDF_PAGE_TOKENS == 2250 + 1638   # text estimate + the page image
    assert OPENAI_PDF_PAGE_TOKENS == 2250 + 765
    assert document_cost("openai", None, "gpt-4o").tokens == OPENAI_PDF_PAGE_TOKENS  # unknown: one page


def test_same_screenshot_costs_differ_by_provider_and_rules_are_named() -> None:
    block = ImageBlock(artifact=REF, media_type="image/png", width=1000, height=1000)
    prices = {p: media_cost(p, block, "gpt-4o")
              for p in ("openai-chat", "openai-responses", "anthropic", "gemini")}
    assert {p: c.tokens for p, c in prices.items()} == {
        "openai-chat": 765, "openai-responses": 765, "anthropic": 1334, "gemini": 1032}
    assert prices["openai-chat"].rule == "openai-tiles:85+170"
    assert prices["anthropic"].rule == "anthropic-pixels"
    assert prices["gemini"].rule == "gemini-tiles"
    neutral = media_cost("neutral", block, "gpt-4o")
    assert neutral.tokens == 1334 and neutral.rule == "max-of-providers:anthropic-pixels"
    # For no model the OpenAI price is the dearest rule's (gpt-4o-mini's tiles), and neutral pays it.
    assert media_cost("neutral", block).tokens == media_cost("openai-chat", block).tokens == 25_501
    assert media_cost("neutral", block).rule == (
        "max-of-providers:openai-unknown-model-max:openai-tiles:2833+5667")


def test_unknown_size_gets_the_dearest_price() -> None:
    assert image_cost("openai", None, None, model="gpt-4o").tokens == 1445  # 8 tiles: the largest image
    assert image_cost("anthropic", None, None).tokens == 1640
    assert image_cost("openai", None, None, "low", model="gpt-4o").tokens == 85
    assert image_cost("openai", None, None, "low", model="gpt-4.1-mini").tokens == 2489  # 1536 patches x 1.62


def test_only_openai_offers_a_cheaper_rendition() -> None:
    block = ImageBlock(artifact=REF, media_type="image/png", width=2048, height=4096, detail="high")
    low = reduced_block("openai-chat", block, "gpt-4o")
    assert low is not None and low.detail == "low" and media_cost("openai-chat", low, "gpt-4o").tokens == 85
    assert reduced_block("openai-chat", low, "gpt-4o") is None
    assert reduced_block("anthropic", block) is None
    assert reduced_block("gemini", block) is None
    pdf = DocumentBlock(artifact=REF, pages=3)
    assert reduced_block("openai-responses", pdf) is None


def test_family() -> None:
    assert [media_family(p) for p in ("openai-chat", "openai-responses", "anthropic", "gemini", "neutral")] \
        == ["openai", "openai", "anthropic", "gemini", "neutral"]

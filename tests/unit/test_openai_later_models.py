"""OpenAI's later models' image rules, and a PDF's page image priced by the build model's rule.

Sources (the module docstring of ``projections.openai_images`` says where each figure is from):
gpt-5.1 keeps gpt-5's 70 + 140; gpt-5.2 to gpt-5.5 count 32-px patches x 1.2 with a budget of
2,500 patches; gpt-5.4-mini x1.62 (the guide as quoted), gpt-5.4-nano x2.46 (above the measured
1.2). A name the table does not name still pays the dearest rule.

OpenAI puts "both the extracted text and an image of each page" of a PDF in context
(platform.openai.com/docs/guides/pdf-files): the page image is an image to the model, so it is
priced by the model's image rule, as standalone images are. It was priced as gpt-4o's for every
model: a gpt-4o-mini build charged a page 3,015 tokens, where its page image alone is 25,501.
"""

from __future__ import annotations

import pytest

from contextfold.domain.events import ArtifactRef, DocumentBlock, ImageBlock
from contextfold.projections.media_cost import (
    OPENAI_PDF_PAGE_TOKENS,
    document_cost,
    image_cost,
    media_cost,
    openai_image_key,
)
from contextfold.projections.openai_images import OPENAI_IMAGE_RULES, openai_image_rule, patch_count

PDF = DocumentBlock(artifact=ArtifactRef(hash="c" * 64, size=10, media_type="application/pdf"), pages=3)
PAGE_TEXT = 2250
LETTER = (1700, 2200)


@pytest.mark.parametrize(("model", "tokens", "rule"), [
    # 1024x1024: 4 tiles after the 768-px side; 32 x 32 = 1024 patches.
    ("gpt-5.1", 70 + 4 * 140, "openai-tiles:70+140"),
    ("gpt-5.1-2025-11-13", 630, "openai-tiles:70+140"),
    ("gpt-5.1-codex", 630, "openai-tiles:70+140"),
    ("gpt-5-codex", 630, "openai-tiles:70+140"),
    ("gpt-5-pro", 630, "openai-tiles:70+140"),
    ("gpt-5.2", 1229, "openai-patches:x1.2@2500"),          # ceil(1024 x 1.2 = 1228.8)
    ("gpt-5.2-2025-12-11", 1229, "openai-patches:x1.2@2500"),
    ("gpt-5.3-codex", 1229, "openai-patches:x1.2@2500"),
    ("gpt-5.4", 1229, "openai-patches:x1.2@2500"),
    ("gpt-5.4-pro", 1229, "openai-patches:x1.2@2500"),
    ("openai/gpt-5.4-2026-03-05", 1229, "openai-patches:x1.2@2500"),
    ("gpt-5.4-mini", 1659, "openai-patches:x1.62"),
    ("gpt-5.4-mini-2026-03-17", 1659, "openai-patches:x1.62"),
    ("gpt-5.4-nano", 2520, "openai-patches:x2.46"),
    ("gpt-4.1-mini-2025-04-14", 1659, "openai-patches:x1.62"),  # a dated snapshot of a named one
    ("gpt-4.1-nano-2025-04-14", 2520, "openai-patches:x2.46"),
    ("o4-mini-2025-04-16", 1762, "openai-patches:x1.72"),
])
def test_later_models_are_priced_by_their_own_rule(model: str, tokens: int, rule: str) -> None:
    got = image_cost("openai", 1024, 1024, "auto", model)
    assert (got.tokens, got.rule) == (tokens, rule)
    assert openai_image_rule(model) is not None


def test_the_larger_models_budget_is_2500_patches() -> None:
    # 1920x1080 is 60 x 34 = 2040 patches: under gpt-5.4's 2,500, scaled down to 1,536 elsewhere.
    assert patch_count(1920, 1080, 2500) == 2040
    assert image_cost("openai", 1920, 1080, "high", "gpt-5.4").tokens == 2448  # 2040 x 1.2
    mini = image_cost("openai", 1920, 1080, "high", "gpt-5.4-mini").tokens
    assert mini == -(-patch_count(1920, 1080) * 162 // 100)
    # unknown size: the most patches the budget allows
    assert image_cost("openai", None, None, "auto", "gpt-5.4").tokens == 3000


@pytest.mark.parametrize("model", ["gpt-5.6", "gpt-7", "gpt-5.1-mini", "gpt-5-codex-mini", "gpt-5.40",
                                   "gpt-5.4-turbo", "my-finetune", None])
def test_a_name_not_in_the_table_still_pays_the_dearest_rule(model: str | None) -> None:
    assert openai_image_rule(model) is None
    got = image_cost("openai", 1024, 1024, "auto", model)
    assert got.tokens == 25_501 and got.rule.startswith("openai-unknown-model-max:")
    assert openai_image_key("openai-chat", model) == "unknown"


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini", "gpt-5", "gpt-4.1-mini", "o4-mini", "gpt-5.4"])
def test_a_pdf_page_image_follows_the_models_image_rule(model: str) -> None:
    page_image = image_cost("openai", *LETTER, "high", model)
    got = document_cost("openai", 3, model)
    assert got.tokens == 3 * (PAGE_TEXT + page_image.tokens)
    assert got.rule == f"openai-pdf-pages:{page_image.rule.split(':', 1)[1]}"
    assert media_cost("openai-responses", PDF, model) == got == media_cost("openai-chat", PDF, model)


def test_gpt_4o_pages_are_priced_as_before_and_gpt_4o_mini_pages_by_its_rule() -> None:
    assert document_cost("openai", 1, "gpt-4o").tokens == OPENAI_PDF_PAGE_TOKENS == 3015
    assert document_cost("openai", 1, "gpt-4o-mini").tokens == PAGE_TEXT + 25_501


def test_an_unknown_models_pdf_pays_the_dearest_page_image() -> None:
    got = document_cost("openai", 2, None)
    dearest = max(r.tokens(*LETTER, "high") for r in OPENAI_IMAGE_RULES)
    assert got.tokens == 2 * (PAGE_TEXT + dearest)
    assert got.rule.startswith("openai-unknown-model-max:openai-pdf-pages:")


def test_neutral_pdf_is_at_least_every_providers() -> None:
    for model in ("gpt-4o-mini", "gpt-4o", None, "claude-sonnet-4-5"):
        neutral = document_cost("neutral", 2, model).tokens
        side = model if model != "claude-sonnet-4-5" else "gpt-4o"
        for family in ("openai", "anthropic", "gemini"):
            assert neutral >= document_cost(family, 2, side).tokens
    # a Claude run's neutral build prices its OpenAI side as gpt-4o (as for images)
    assert "unknown-model" not in document_cost("neutral", 1, "claude-sonnet-4-5").rule


def test_an_image_block_is_unchanged_by_the_pdf_rule() -> None:
    block = ImageBlock(artifact=ArtifactRef(hash="d" * 64, size=10, media_type="image/png"),
                       media_type="image/png", width=1024, height=1024)
    assert media_cost("openai-chat", block, "gpt-4o").tokens == 765

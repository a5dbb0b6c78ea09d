"""An OpenAI model the image table does not name (a newer one: gpt-5.6, gpt-6) pays the dearest
known rule for each image, PDF and size, so it is never priced under any model it may turn out
to be (``openai_images`` docstring). The reference is every rule a known name maps to, read off
the names themselves, so a rule added for a name but left out of ``OPENAI_IMAGE_RULES`` (which
the fallback takes its maximum over) fails here rather than under-pricing unknown models."""

from __future__ import annotations

import pytest

from contextfold.projections.media_cost import document_cost, image_cost, openai_image_key
from contextfold.projections.openai_images import OPENAI_IMAGE_RULES, openai_image_rule

KNOWN = ("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.5", "gpt-4-turbo", "chatgpt-4o-latest", "o1", "o1-pro",
         "o3", "o3-pro", "gpt-5", "gpt-5-pro", "gpt-5-chat-latest", "gpt-5-codex", "gpt-5.1",
         "gpt-5.1-codex-max", "gpt-5.2", "gpt-5.3-codex", "gpt-5.4", "gpt-5.5", "gpt-5.5-pro",
         "gpt-4.1-mini", "gpt-5-mini", "gpt-5.4-mini", "gpt-4.1-nano", "gpt-5-nano", "gpt-5.4-nano",
         "o4-mini", "codex-mini-latest")
NEWER = ("gpt-5.6", "gpt-6", "gpt-5.6-mini", "gpt-5.6-nano", "gpt-5.6-codex", "gpt-5.6-2026-03-01",
         "openai/gpt-6", "azure/gpt-5.6-pro", "o5", "o5-mini", "gpt-5.10", "GPT-6", "gpt-4o-mini-2099-01-01x")
SIZES = ((1024, 1024), (128, 64), (4096, 4096), (1920, 1080), (300, 4000), (512, 8000), (33, 33),
         (2048, 768), (None, None))


def test_every_rule_a_known_name_maps_to_is_one_the_fallback_takes_its_maximum_over() -> None:
    assert {openai_image_rule(m) for m in KNOWN} == set(OPENAI_IMAGE_RULES)


@pytest.mark.parametrize("model", NEWER)
def test_a_newer_model_is_unknown_and_pays_the_dearest_known_price(model: str) -> None:
    assert openai_image_rule(model) is None and openai_image_key("openai-chat", model) == "unknown"
    for w, h in SIZES:
        for detail in ("low", "high", "auto"):
            got = image_cost("openai", w, h, detail, model)
            dearest = max(image_cost("openai", w, h, detail, m).tokens for m in KNOWN)
            assert got.tokens == dearest, (w, h, detail)
            assert got.rule.startswith("openai-unknown-model-max:")
    for pages in (None, 1, 7):
        got = document_cost("openai", pages, model)
        assert got.tokens == max(document_cost("openai", pages, m).tokens for m in KNOWN)
        assert got.rule.startswith("openai-unknown-model-max:")


@pytest.mark.parametrize("model", ["gpt-5.6", "gpt-6"])
def test_a_neutral_build_for_a_newer_openai_model_pays_at_least_its_dearest_openai_price(model: str) -> None:
    for w, h in SIZES:
        assert (image_cost("neutral", w, h, "auto", model).tokens
                >= max(image_cost("openai", w, h, "auto", m).tokens for m in KNOWN))

"""OpenAI's image prices per model, checked against its published rules and measured counts.

Sources:

- platform.openai.com/docs/guides/images-vision, "Calculating costs": tile models cost a base
  (``detail: low``) + a price per 512-px tile (gpt-4o / gpt-4.1 / gpt-4.5 85 + 170, gpt-4o-mini
  2833 + 5667, o1 / o1-pro / o3 75 + 150, gpt-5 / gpt-5-chat-latest 70 + 140); patch models cost
  the 32-px patches covering the image (at most 1536, the image scaled down to fit: "1800 x 2400
  -> 1452") times a multiplier (gpt-4.1-mini and gpt-5-mini 1.62, gpt-4.1-nano and gpt-5-nano
  2.46, o4-mini 1.72), whatever the detail.
- community.openai.com, "Vision: more than one way to send a request": one 128x64 image plus five
  words of text, prompt tokens reported by the API: gpt-4o-mini-2024-07-18 2,845 at low and 8,512
  at high (2833 and 8500 + the text's 12); o4-mini and gpt-4.1-mini 26 at either detail.
"""

from __future__ import annotations

import pytest

from contextfold.domain.events import ArtifactRef, ImageBlock
from contextfold.projections.media_cost import image_cost, media_cost, openai_image_key, reduced_block
from contextfold.projections.openai_images import OPENAI_MAX_PATCHES, openai_image_rule, patch_count

REF = ArtifactRef(hash="b" * 64, size=10, media_type="image/png")

NAMED = ("gpt-4o", "gpt-4o-2024-08-06", "chatgpt-4o-latest", "gpt-4.1", "gpt-4.1-2025-04-14",
         "gpt-4.5-preview", "gpt-4o-mini", "gpt-4o-mini-2024-07-18", "o1", "o1-pro", "o3",
         "o3-2025-04-16", "gpt-5", "gpt-5-chat-latest", "gpt-4.1-mini", "gpt-4.1-nano", "o4-mini",
         "o4-mini-2025-04-16", "gpt-5-mini", "gpt-5-nano", "codex-mini-latest", "gpt-5.1", "gpt-5.4",
         "gpt-5.4-mini", "gpt-5.4-nano")


@pytest.mark.parametrize(("model", "high", "low", "rule"), [
    # 1024x1024: 4 tiles of 512 after the 768-px shortest side; 32 x 32 = 1024 patches.
    ("gpt-4o", 765, 85, "85+170"),                       # the guide's worked example
    ("gpt-4o-2024-08-06", 765, 85, "85+170"),
    ("gpt-4.1", 765, 85, "85+170"),
    ("gpt-4.5-preview", 765, 85, "85+170"),
    ("gpt-4o-mini", 2833 + 4 * 5667, 2833, "2833+5667"),  # 25,501: 33 times gpt-4o's
    ("gpt-4o-mini-2024-07-18", 25_501, 2833, "2833+5667"),
    ("o1", 75 + 4 * 150, 75, "75+150"),
    ("o1-pro", 675, 75, "75+150"),
    ("o3", 675, 75, "75+150"),
    ("gpt-5", 70 + 4 * 140, 70, "70+140"),
    ("gpt-5-chat-latest", 630, 70, "70+140"),
    ("gpt-4.1-mini", 1659, 1659, "x1.62"),                # ceil(1024 x 1.62): detail changes nothing
    ("gpt-5-mini", 1659, 1659, "x1.62"),
    ("gpt-4.1-nano", 2520, 2520, "x2.46"),                # ceil(1024 x 2.46 = 2519.04)
    ("gpt-5-nano", 2520, 2520, "x2.46"),
    ("o4-mini", 1762, 1762, "x1.72"),                     # ceil(1024 x 1.72 = 1761.28)
    ("codex-mini-latest", 1762, 1762, "x1.72"),
    ("openai/gpt-4o-mini", 25_501, 2833, "2833+5667"),    # a gateway's route to the same model
])
def test_a_1024_square_is_priced_by_the_models_rule(model: str, high: int, low: int, rule: str) -> None:
    kind = "openai-patches" if rule.startswith("x") else "openai-tiles"
    assert image_cost("openai", 1024, 1024, "high", model) == image_cost("openai", 1024, 1024, "auto", model)
    got_high = image_cost("openai", 1024, 1024, "high", model)
    got_low = image_cost("openai", 1024, 1024, "low", model)
    assert (got_high.tokens, got_low.tokens) == (high, low)
    assert got_high.rule == f"{kind}:{rule}"
    assert got_low.rule == (f"{kind}:{rule}" if kind == "openai-patches" else f"openai-low:{rule}")


def test_the_measured_128x64_counts() -> None:
    # gpt-4o-mini: 2833 at low, 8500 at high (one tile); the API reported these + 12 of text.
    assert image_cost("openai", 128, 64, "low", "gpt-4o-mini-2024-07-18").tokens == 2845 - 12
    assert image_cost("openai", 128, 64, "high", "gpt-4o-mini-2024-07-18").tokens == 8512 - 12
    # o4-mini / gpt-4.1-mini: 4 x 2 patches, the same at either detail (the API: 26 at both).
    for model, tokens in (("o4-mini", 14), ("gpt-4.1-mini", 13)):
        assert image_cost("openai", 128, 64, "low", model).tokens == tokens
        assert image_cost("openai", 128, 64, "high", model).tokens == tokens


@pytest.mark.parametrize(("w", "h", "patches"), [
    (1024, 1024, 1024),
    (1800, 2400, 1452),   # the guide's example: scaled to 1056x1408, 33 x 44 patches
    (1000, 1000, 1024),   # 31.25 -> 32 patches a side: a patch may reach past the image
    (128, 64, 8),
    (4000, 1474, 1449),   # scaled so a side is a whole number of patches, then covered
    (100_000, 10, 1536),  # the extreme of a strip still holds the cap
])
def test_patch_counts(w: int, h: int, patches: int) -> None:
    assert patch_count(w, h) == patches <= OPENAI_MAX_PATCHES


def test_the_multiplier_is_exact() -> None:
    # 480x320 is 15 x 10 = 150 patches: 150 x 1.62 is 243, where a float made 243.00000000000003
    # and its ceiling 244.
    assert image_cost("openai", 480, 320, "high", "gpt-4.1-mini").tokens == 243


@pytest.mark.parametrize(("w", "h"), [(1024, 1024), (128, 64), (2048, 2048), (1920, 1080), (300, 4000)])
@pytest.mark.parametrize("detail", ["low", "high", "auto"])
@pytest.mark.parametrize("model", [None, "gpt-5.6", "my-finetune", "anthropic/claude-3.5-sonnet",
                                   "gpt-4o-mini-tts"])
def test_an_unknown_model_pays_the_dearest_rule(w: int, h: int, detail: str, model: str | None) -> None:
    got = image_cost("openai", w, h, detail, model)
    dearest = max(image_cost("openai", w, h, detail, m).tokens for m in NAMED)
    assert got.tokens == dearest and got.rule.startswith("openai-unknown-model-max:openai-")
    assert openai_image_rule(model) is None


def test_an_unknown_model_at_low_detail_may_pay_a_patch_rule() -> None:
    # 2048x2048 at low: gpt-4o-mini's base is 2833, gpt-4.1-nano ignores detail (1521 patches x 2.46).
    got = image_cost("openai", 2048, 2048, "low", None)
    assert got.tokens == 3742 and got.rule == "openai-unknown-model-max:openai-patches:x2.46"


@pytest.mark.parametrize(("model", "low"), [("gpt-4o", 85), ("gpt-4o-mini", 2833), ("o3", 75), ("gpt-5", 70),
                                            (None, 2833)])
def test_detail_low_is_offered_where_it_saves(model: str | None, low: int) -> None:
    block = ImageBlock(artifact=REF, media_type="image/png", width=1024, height=1024, detail="auto")
    reduced = reduced_block("openai-responses", block, model)
    assert reduced is not None and reduced.detail == "low"
    assert media_cost("openai-responses", reduced, model).tokens == low
    assert low < media_cost("openai-responses", block, model).tokens


@pytest.mark.parametrize("model", ["gpt-4.1-mini", "gpt-4.1-nano", "o4-mini", "gpt-5-mini", "gpt-5-nano"])
def test_detail_low_is_not_offered_to_a_model_that_ignores_it(model: str) -> None:
    block = ImageBlock(artifact=REF, media_type="image/png", width=1024, height=1024, detail="high")
    assert reduced_block("openai-chat", block, model) is None


def test_the_cache_key_is_the_rule_not_the_name() -> None:
    assert openai_image_key("openai-chat", "gpt-4o") == openai_image_key("openai-responses", "gpt-4.1")
    assert openai_image_key("openai-chat", "gpt-4.1-mini") == openai_image_key("openai-chat", "gpt-5-mini")
    assert openai_image_key("openai-chat", "gpt-4o") != openai_image_key("openai-chat", "gpt-4o-mini")
    assert openai_image_key("neutral", None) == openai_image_key("openai-chat", "gpt-5.6") == "unknown"
    assert openai_image_key("anthropic", "gpt-4o-mini") is None and openai_image_key("gemini", None) is None


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "gemini-2.5-pro"])
def test_a_neutral_build_of_another_vendors_model_prices_its_openai_side_as_gpt_4o(model: str) -> None:
    # The run's request goes to its own vendor (in the neutral maximum anyway): the dearest OpenAI
    # rule charged a Claude run's screenshot ~25,500 tokens. gpt-4o's 765 is below Anthropic's and
    # Gemini's own prices here, so the maximum is theirs.
    got = image_cost("neutral", 1024, 1024, "auto", model)
    assert got.tokens == max(image_cost(f, 1024, 1024, "auto", "gpt-4o").tokens
                             for f in ("openai", "anthropic", "gemini"))
    assert "unknown-model" not in got.rule
    assert openai_image_key("neutral", model) == openai_image_key("openai-chat", "gpt-4o")
    # ... while a build for OpenAI naming it (a gateway's route) and a neutral build of no model
    # still pay the dearest rule: the model they reach is unknown.
    assert image_cost("openai", 1024, 1024, "auto", model).rule.startswith("openai-unknown-model-max:")
    assert image_cost("neutral", 1024, 1024, "auto", None).tokens == 25_501

"""A build for OpenAI prices its images by the model it is for (``projections.openai_images``).

Why: every OpenAI model was charged gpt-4o's 765 tokens for a 1024x1024 image, where gpt-4o-mini
counts 25,501 and gpt-4.1-nano 2,520; and a tight budget was met by reducing the image to
``detail: low`` (85), which a patch-priced model ignores: the request the manifest called within
budget was 680 tokens over it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextfold import ModelResponse, PolicySet, RunStarted, TextBlock, UserInput, open_store
from contextfold.api import Run, Store
from contextfold.domain.errors import RequiredContextExceedsBudgetError
from contextfold.domain.events import ImageBlock
from contextfold.domain.manifest import ContextManifest

PUBLISHED = {  # a 1024x1024 image at detail high, and the rule the manifest names
    "gpt-4o": (765, "openai-tiles:85+170"),
    "gpt-4o-mini": (25_501, "openai-tiles:2833+5667"),
    "o3": (675, "openai-tiles:75+150"),
    "gpt-5": (630, "openai-tiles:70+140"),
    "gpt-4.1-mini": (1659, "openai-patches:x1.62"),
    "gpt-4.1-nano": (2520, "openai-patches:x2.46"),
    "o4-mini": (1762, "openai-patches:x1.72"),
    None: (25_501, "openai-unknown-model-max:openai-tiles:2833+5667"),
}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'images.db'}")


def _shot_run(store: Store, run_id: str, *events: Any) -> Run:
    """An older input with a 1024x1024 screenshot, a reply, and the current input."""
    run = store.run(run_id)
    run.append(*events, PolicySet(text="You look at screenshots."))
    run.append(UserInput(content=(TextBlock(text="what is wrong here?"),
                                  ImageBlock(url="https://example.com/page.png", media_type="image/png",
                                             width=1024, height=1024, detail="high"))))
    run.append(ModelResponse(text="The button is misaligned."))
    run.append(UserInput(content=(TextBlock(text="fix it"),)))
    return run


def _media(manifest: ContextManifest) -> list[tuple[int, str]]:
    return [(m.tokens, m.rule) for f in manifest.fragments for m in f.media]


def _details(request: dict[str, Any]) -> list[str]:
    out = []
    for item in request.get("messages", request.get("input", [])):
        for part in item.get("content", []) if isinstance(item.get("content"), list) else []:
            if part.get("type") == "image_url":
                out.append(part["image_url"].get("detail", "auto"))
            elif part.get("type") == "input_image":
                out.append(part.get("detail", "auto"))
    return out


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses"])
def test_the_manifest_prices_the_image_by_the_models_rule(store: Store, provider: str) -> None:
    """One run built for model after model: the facts cached per build config follow the model."""
    run = _shot_run(store, f"models-{provider}")
    for model in [*PUBLISHED, "gpt-4o", "gpt-4.1-mini"]:  # back to a rule built before: no stale prices
        built = run.build(provider, window=128_000, reserve=8_000, model=model, record=False)
        assert _media(built.manifest) == [PUBLISHED[model]], model
        assert built.manifest.selected_tokens > PUBLISHED[model][0]


def test_the_runs_recorded_model_decides_when_the_build_names_none(store: Store) -> None:
    run = _shot_run(store, "recorded", RunStarted(model="gpt-4o-mini-2024-07-18"))
    built = run.build("openai-chat", window=128_000, reserve=8_000, record=False)
    assert _media(built.manifest) == [PUBLISHED["gpt-4o-mini"]]
    # Built for another model (a hand-off), the named model's rule applies.
    assert _media(run.build("openai-chat", window=128_000, reserve=8_000, model="gpt-4.1-nano",
                            record=False).manifest) == [PUBLISHED["gpt-4.1-nano"]]


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses"])
def test_a_patch_model_is_not_reduced_to_a_detail_it_ignores(store: Store, provider: str) -> None:
    """A budget the full image does not fit: gpt-4o's build sends it at ``detail: low`` (85 tokens);
    gpt-4.1-mini's would gain nothing from that (it counts 1,659 at any detail), so the image is
    left out, and the request holds its budget."""
    run = _shot_run(store, f"tight-{provider}")
    window, reserve = 700, 100
    tiles = run.build(provider, window=window, reserve=reserve, model="gpt-4o", record=False)
    reduced = [t for t in tiles.manifest.truncations if t.strategy == "media_detail_low"]
    assert [(t.original_tokens, t.tokens) for t in reduced] == [(765, 85)]
    assert _details(tiles.request) == ["low"]

    patches = run.build(provider, window=window, reserve=reserve, model="gpt-4.1-mini", record=False)
    m = patches.manifest
    assert not [t for t in m.truncations if t.strategy == "media_detail_low"]
    assert "low" not in _details(patches.request)
    assert _media(m) == [] and {e.id: e.reason for e in m.excluded_items}[reduced[0].id] == "over_budget"
    assert m.selected_tokens <= m.budget_tokens == window - reserve


@pytest.mark.parametrize("provider", ["openai-chat", "neutral"])
def test_a_required_image_priced_for_no_model_says_how_to_price_it(store: Store, provider: str) -> None:
    """Unknown, the model is charged the dearest rule (gpt-4o-mini's): the error that this causes
    says so and names the remedy; the same build for a named model fits."""
    run = store.run(f"required-{provider}")
    run.append(UserInput(content=(TextBlock(text="what is this?"),
                                  ImageBlock(url="https://example.com/p.png", media_type="image/png",
                                             width=1024, height=1024))))
    with pytest.raises(RequiredContextExceedsBudgetError, match=r"dearest rule .*name the OpenAI model"):
        run.build(provider, window=2_500, reserve=500, record=False)
    built = run.build(provider, window=2_500, reserve=500, model="gpt-4o", record=False)
    assert built.manifest.selected_tokens <= built.manifest.budget_tokens

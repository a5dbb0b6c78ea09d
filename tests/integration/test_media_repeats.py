"""The same screenshot in an older user input and in the current one: the request shows it once, at
the older input, and the current input carries a one-line repeat ("the same as the one shown
above"). The repeat was priced as the image: the manifest charged it in full, and under a tight
budget the builder reduced the shown copy to ``detail: low`` to pay for tokens never sent, so the
model saw the user's current screenshot at low detail (``media_repeats``). The selection priced it
so too: a budget that held the request dropped the older input (``selection.Unit.media``)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from contextfold.api import Run, Store, open_store
from contextfold.domain.events import ModelResponse, PolicySet, TextBlock, UserInput
from tests.integration.test_media_build import PROVIDERS, png


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'repeats.db'}")


def _details(request: dict[str, Any]) -> list[str | None]:
    """The ``detail`` of every OpenAI image part of ``request`` (Chat and Responses)."""
    found: list[str | None] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") == "image_url":
                found.append(value["image_url"].get("detail"))
            elif value.get("type") == "input_image":
                found.append(value.get("detail"))
            else:
                for v in value.values():
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(request)
    return found


def _again(store: Store, provider: str, words: int = 300) -> Run:
    run = store.run(f"again-{provider}-{words}")
    image = store.attach_image(png((800, 600), 1))
    run.append(PolicySet(text="Be helpful."))
    run.append(UserInput(content=(TextBlock(text="here is the screenshot " + "blah " * words), image)))
    run.append(ModelResponse(text="I see. " + "more words " * 200))
    run.append(UserInput(content=(TextBlock(text="again the same screenshot"), image)))
    return run


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_manifest_prices_a_repeat_as_its_repeat_line(store: Store, provider: str) -> None:
    built = _again(store, provider).build(provider, window=100_000, reserve=100, record=False)
    lines = {f.id: f for f in built.manifest.fragments}
    [repeat] = lines["e4"].media
    assert repeat.shown_in == "e2" and repeat.rule.endswith("-shown-above") and repeat.tokens < 60
    assert lines["e4"].tokens < 120  # its text, the repeat line and the framing
    assert lines["e2"].media[0].tokens > 200


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses"])
def test_the_shown_copy_of_a_kept_repeat_is_not_reduced_to_pay_for_it(store: Store, provider: str) -> None:
    """The window fits both inputs whole once the repeat is priced as its line (e3 not): the
    selection still priced the repeat as the image, and the room it frees now goes to the shown
    copy, which stays at full detail."""
    run = _again(store, provider)
    full = run.build(provider, window=100_000, reserve=100, model="gpt-4o", record=False).manifest
    shown = next(f for f in full.fragments if f.id == "e2")
    tight = 1_800  # e2 (~1,070 tokens at gpt-4o's price) and e4 fit, not e3 (~400) too
    built = run.build(provider, window=tight, reserve=100, model="gpt-4o", record=False)
    lines = {f.id: f for f in built.manifest.fragments}
    [copy] = lines["e2"].media
    assert copy.reduced_from is None and copy.tokens == shown.media[0].tokens
    assert not lines["e2"].truncated and "reduced" not in (lines["e2"].selection_reason or "")
    assert _details(built.request) and all(d != "low" for d in _details(built.request))
    assert built.manifest.selected_tokens <= tight - 100


@pytest.mark.parametrize("words", [300, 30])
@pytest.mark.parametrize("provider", [*PROVIDERS, "neutral"])
def test_a_budget_that_holds_the_request_keeps_both_inputs(store: Store, provider: str, words: int) -> None:
    """Built at the budget its request needs (the manifest's tokens with room to spare, and the few
    a repeat keeps back for its line's framing) the request is the one built with room to spare:
    both inputs, the image shown once by the older and the current one's repeat line. The
    selection charged the repeat the image's price (481 to 730 tokens more): the older input was
    cut and the reply between them dropped, or, too short to cut (``words=30``), the older input
    was dropped and the current one carried the image."""
    run = _again(store, provider, words)
    roomy = run.build(provider, window=100_000, reserve=100, record=False)
    need = roomy.manifest.selected_tokens
    built = run.build(provider, window=need + 100 + 16, reserve=100, record=False)
    lines = {f.id: f for f in built.manifest.fragments}
    assert {"e2", "e3", "e4"} <= lines.keys()
    assert built.request == roomy.request
    assert built.manifest.selected_tokens == need <= built.manifest.budget_tokens
    [shown], [repeat] = lines["e2"].media, lines["e4"].media
    assert shown.shown_in is None and shown.reduced_from is None and repeat.shown_in == "e2"
    assert not lines["e2"].truncated and not built.manifest.truncations
    if provider != "neutral":  # (the neutral conversation names the artifact, its bytes not loaded)
        image = base64.b64encode(png((800, 600), 1)).decode()
        assert str(built.request).count(image) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_input_holding_the_image_twice_is_priced_as_the_image_and_one_line(store: Store,
                                                                             provider: str) -> None:
    """The request shows the first copy and repeats the second; both were called repeats of the
    input itself, so its manifest line priced the image it sent as a 35-token line."""
    run = store.run(f"twice-{provider}")
    image = store.attach_image(png((800, 600), 1))
    run.append(UserInput(content=(TextBlock(text="two of the same"), image, image)))
    built = run.build(provider, window=100_000, reserve=100, record=False)
    [line] = [f for f in built.manifest.fragments if f.id == "e1"]
    shown, repeat = line.media
    assert shown.shown_in is None and not shown.rule.endswith("-shown-above") and shown.tokens > 200
    assert repeat.shown_in == "e1" and repeat.rule.endswith("-shown-above") and repeat.tokens < 60
    assert line.tokens >= shown.tokens + repeat.tokens
    assert str(built.request).count(base64.b64encode(png((800, 600), 1)).decode()) == 1

"""Media limits of a whole request: past them the oldest media become notes, never a refused request.

Each request here passed the protocol check and the SDK types, and its API refuses it: Anthropic
takes at most 100 images and 100 PDF pages in a request of at most 32 MB, Gemini at most 20 MB
of request with its inline data, OpenAI at most 500 images and 100 PDF pages in a request. A run
whose window held more failed every turn while those media were in it. Now the newest are sent,
each older one is the note that says what it is and why it was left out, and the manifest says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.api import Store, open_store
from contextfold.domain.events import ImageBlock, TextBlock, UserInput
from contextfold.projections.builder import BuildResult
from contextfold.projections.render import validate_sdk_types
from tests.integration.test_media_provider_rules import stored_png
from tests.unit.test_media import image_bytes, minimal_pdf


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'media.db'}")


def _shots(store: Store, count: int) -> tuple[ImageBlock, ...]:
    """``count`` distinct small screenshots (distinct bytes: dedupe would send one)."""
    return tuple(store.attach_image(image_bytes("PNG", (16, 16), (i % 256, i // 256, 7)))
                 for i in range(count))


def _notes(built: BuildResult) -> list[str]:
    return [line for line in json.dumps(built.request).split('"') if "not attached" in line]


def _unsent(built: BuildResult) -> list[str]:
    return [m.not_attached for f in built.manifest.fragments for m in f.media if m.not_attached is not None]


@pytest.mark.parametrize(("provider", "model", "limit", "name"), [
    ("anthropic", "claude-sonnet-4-5", 100, "Anthropic"),
    ("openai-chat", "gpt-4o", 500, "OpenAI"), ("openai-responses", "gpt-4o", 500, "OpenAI")])
def test_images_past_the_providers_count_are_notes_the_oldest_first(store: Store, provider: str, model: str,
                                                                    limit: int, name: str) -> None:
    run = store.run("shots")
    run.append(UserInput(content=(TextBlock(text="first batch"), *_shots(store, 2))))
    run.append(UserInput(content=(TextBlock(text="compare all of these"), *_shots(store, limit + 2)[2:])))
    built = run.preview(provider, model=model, window=1_000_000, reserve=4_000)
    assert validate_sdk_types(provider, built.request)
    body = json.dumps(built.request)
    kind = {"openai-chat": "image_url", "openai-responses": "input_image"}.get(provider, "image")
    assert body.count(f'"type": "{kind}"') == limit
    notes = _notes(built)
    assert len(notes) == 2 and all(f"past {name}'s {limit} images in a request" in n for n in notes)
    first = next(f for f in built.manifest.fragments if f.media and len(f.media) == 2)
    assert [m.not_attached is not None for m in first.media] == [True, True]  # the oldest two
    assert len(_unsent(built)) == 2


@pytest.mark.parametrize(("provider", "model", "kind", "name"), [
    ("anthropic", "claude-sonnet-4-5", "document", "Anthropic"), ("openai-chat", "gpt-4o", "file", "OpenAI"),
    ("openai-responses", "gpt-4o", "input_file", "OpenAI")])
def test_pdf_pages_past_the_providers_100_are_notes_the_oldest_first(store: Store, provider: str, model: str,
                                                                     kind: str, name: str) -> None:
    """Anthropic takes 100 PDF pages in a request, and so does OpenAI ("up to 100 pages and 32MB
    of total content in a single request to the API, across multiple file inputs")."""
    run = store.run("pdfs")
    run.append(UserInput(content=(TextBlock(text="the old spec"), store.attach_document(minimal_pdf(60)))))
    run.append(UserInput(content=(TextBlock(text="the new spec"), store.attach_document(minimal_pdf(61)))))
    built = run.preview(provider, model=model, window=1_000_000, reserve=4_000)
    assert validate_sdk_types(provider, built.request)
    assert json.dumps(built.request).count(f'"type": "{kind}"') == 1
    [note] = _notes(built)
    assert f"past {name}'s 100 PDF pages in a request (60 pages; the newest are sent)" in note
    [record] = _unsent(built)
    assert "(60 pages; the newest are sent)" in record
    gemini = run.preview("gemini", model="gemini-2.5-pro", window=1_000_000, reserve=4_000)
    assert _notes(gemini) == []  # Gemini documents no page count: both go


def test_inline_media_past_geminis_20_mb_request_are_notes_the_oldest_first(store: Store) -> None:
    run = store.run("big")
    shots = [store.attach_image(stored_png(1500, 1400, seed=i)) for i in range(3)]  # ~6.3 MB each
    for i, shot in enumerate(shots):
        run.append(UserInput(content=(TextBlock(text=f"screen {i}"), shot)))
    built = run.preview("gemini", model="gemini-2.5-pro", window=200_000, reserve=4_000)
    assert validate_sdk_types("gemini", built.request)
    assert len(json.dumps(built.request)) < 20 * 1024 * 1024
    [note] = _notes(built)
    assert shots[0].artifact is not None
    assert "past Gemini's 20 MB request" in note and f"({shots[0].artifact.size} bytes" in note
    assert '"screen 0' in json.dumps(built.request)
    claude = run.preview("anthropic", model="claude-sonnet-4-5", window=200_000, reserve=4_000)
    assert all("5 MB image limit" in n for n in _notes(claude))  # per image: each is over it there

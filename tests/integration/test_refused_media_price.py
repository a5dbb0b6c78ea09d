"""Every medium is charged as the request carries it: the medium's own price where the provider
takes it, the tokens of the note sent in its place where it does not.

Why: a video for OpenAI or Anthropic, and audio for Anthropic or OpenAI Responses, were charged
as a PDF page (3,888 tokens for Anthropic, 3,015 for gpt-4o) while the renderers sent a one-line
note ("not attached, this API takes PDF documents only"): the manifest charged what the request
did not hold. Each provider x medium (image, PDF, audio, video; stored and by URL) is built
through the store (SQLite), its body checked against the official SDK's types, and the charge
compared with what was rendered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextfold.api import Store, open_store
from contextfold.domain.events import DocumentBlock, ImageBlock, PolicySet, RunStarted, TextBlock, UserInput
from contextfold.domain.manifest import ContextManifest
from contextfold.projections.render import validate_sdk_types
from contextfold.projections.tokens import get_counter
from tests.unit.test_media import image_bytes, minimal_pdf
from tests.unit.test_media_duration import mp4, wav

BUILDS = [("openai-chat", "gpt-4o"), ("openai-chat", "gpt-audio"), ("openai-responses", "gpt-4o"),
          ("anthropic", "claude-sonnet-4-5"), ("gemini", "gemini-2.5-flash")]
MEDIA = ["image", "pdf", "audio", "video"]
SOURCES = ["stored", "url"]

CARRIED: dict[str, set[str]] = {
    # provider (model) -> the media its request carries as themselves, stored / by URL
    "openai-chat gpt-4o stored": {"image", "pdf"},
    "openai-chat gpt-4o url": {"image"},
    "openai-chat gpt-audio stored": {"image", "pdf", "audio"},
    "openai-chat gpt-audio url": {"image"},
    "openai-responses gpt-4o stored": {"image", "pdf"},
    "openai-responses gpt-4o url": {"image", "pdf"},
    "anthropic claude-sonnet-4-5 stored": {"image", "pdf"},
    "anthropic claude-sonnet-4-5 url": {"image", "pdf"},
    "gemini gemini-2.5-flash stored": {"image", "pdf", "audio", "video"},
    "gemini gemini-2.5-flash url": {"image", "pdf", "audio", "video"},
}
"""What each API takes (the renderers' own rules): Chat Completions files and audio inline only,
audio for an audio model only; only Gemini takes video, and Anthropic and Responses no audio."""

MEDIA_MARKS = {"openai-chat": ("image_url", "file", "input_audio"),
               "openai-responses": ("input_image", "input_file"),
               "anthropic": ("image", "document"),
               "gemini": ("inlineData", "fileData", "inline_data", "file_data")}


def _block(store: Store, medium: str, source: str) -> ImageBlock | DocumentBlock:
    if source == "url":
        url, media_type = {"image": ("https://example.com/shot.png", "image/png"),
                           "pdf": ("https://example.com/spec.pdf", "application/pdf"),
                           "audio": ("https://example.com/note.wav", "audio/wav"),
                           "video": ("https://example.com/clip.mp4", "video/mp4")}[medium]
        if medium == "image":
            return ImageBlock(url=url, media_type=media_type, width=640, height=480)
        return DocumentBlock(url=url, media_type=media_type)
    if medium == "image":
        return store.attach_image(image_bytes("PNG", (640, 480)))
    if medium == "pdf":
        return store.attach_document(minimal_pdf(2))
    data, media_type = (wav(3.0), "audio/wav") if medium == "audio" else (mp4(10), "video/mp4")
    return DocumentBlock(artifact=store.events.put_artifact(data, media_type), media_type=media_type)


def _build(store: Store, run_id: str, provider: str, model: str,
           content: tuple[Any, ...]) -> tuple[ContextManifest, dict[str, Any]]:
    run = store.run(run_id)
    run.append(RunStarted(model=model), PolicySet(text="Look at what the user sends."),
               UserInput(content=content))
    built = run.build(provider, model=model, window=200_000, reserve=1_000, record=False)
    assert validate_sdk_types(provider, built.request)
    return built.manifest, built.request


def _user_fragment_tokens(manifest: ContextManifest) -> int:
    return next(f.tokens for f in manifest.fragments if f.kind == "user_input")


def _media_types_sent(provider: str, request: dict[str, Any]) -> set[str]:
    """The media-carrying part types in the body (a note is a text part)."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            kind = node.get("type")
            if isinstance(kind, str) and kind in MEDIA_MARKS[provider]:
                found.add(kind)
            for key, value in node.items():
                if provider == "gemini" and key in MEDIA_MARKS[provider]:
                    found.add(key)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(request)
    return found


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("medium", MEDIA)
@pytest.mark.parametrize(("provider", "model"), BUILDS)
def test_a_medium_is_charged_as_the_request_carries_it(tmp_path: Path, provider: str, model: str,
                                                       medium: str, source: str) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'media.db'}")
    question = TextBlock(text="What is in this?")
    manifest, request = _build(store, "with", provider, model, (question, _block(store, medium, source)))
    bare, _ = _build(store, "bare", provider, model, (question,))
    (record,) = [m for f in manifest.fragments for m in f.media]
    body = json.dumps(request, ensure_ascii=False)
    sent = _media_types_sent(provider, request)
    charged = _user_fragment_tokens(manifest) - _user_fragment_tokens(bare)
    if medium in CARRIED[f"{provider} {model} {source}"]:
        assert sent, body
        assert record.not_attached is None and not record.rule.endswith("-not-attached")
        assert record.tokens > 0 and charged >= record.tokens
        return
    assert not sent, body  # a note, never the medium
    assert record.not_attached is not None and record.not_attached in body
    assert record.tokens == 0 and record.rule.endswith("-not-attached"), record
    reason = {"video": "this API takes no video (only Gemini does)",
              "audio": "takes no audio" if provider != "openai-chat" or model == "gpt-4o"
              else "this API takes audio inline only",
              "pdf": "this API takes documents inline only"}[medium]
    assert reason in record.not_attached  # the reason says why the note stands in its place
    note = next(t for t in _texts(request) if record.not_attached in t)
    # the charge is the note as the renderer emits it (with the part it takes), not a page's price
    assert charged == get_counter(manifest.encoding).count(note), (charged, note)


def _texts(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [t for key, value in node.items()
                for t in ([value] if key == "text" and isinstance(value, str) else _texts(value))]
    if isinstance(node, list):
        return [t for value in node for t in _texts(value)]
    return []

"""Media types are compared without regard to case (RFC 2045 §5.1: type, subtype and parameter
names are case-insensitive): ``audio/MPEG``, ``Video/MP4``, ``Application/PDF``, ``IMAGE/PNG``
or a ``data:AUDIO/wav;base64,...`` URL are the media their lower-case spelling names.

Why: every rule keyed on a media type compared it as written. A clip logged as ``audio/MPEG``
was not timed media (no playing time read, priced as a PDF's pages by Gemini's rule), a
``data:AUDIO/wav`` voice note stayed inline in the event, Chat Completions' audio model got a
note "PDF only" in its place, and Anthropic refused a PDF logged as ``Application/PDF``. The log
keeps the type as it came (its JSON and hashes are the runtime's); the build names it in lower
case, the spelling every provider's API lists.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import blake3
import pytest

from contextfold.api import render_request
from contextfold.domain.event_values import is_medium, media_type_key
from contextfold.domain.events import DocumentBlock, ImageBlock, TextBlock, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import parse
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.render import validate_sdk_types
from contextfold.store.event_store import EventStore
from contextfold.store.media_duration import is_timed_media
from tests.integration.test_media_build import pdf, png
from tests.unit.test_media_duration import mp4, wav

CLIP = wav(1.5)
VIDEO = mp4(4)
B64 = base64.b64encode(CLIP).decode("ascii")
BUILDS = [("openai-chat", "gpt-4o-audio-preview"), ("openai-chat", "gpt-4o"), ("gemini", "gemini-2.5-flash"),
          ("anthropic", "claude-sonnet-4-5"), ("openai-responses", "gpt-4o"), ("neutral", None)]


def _data(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def _blocks(case: str) -> tuple[Any, ...]:
    """One input's media, their types spelled in ``case`` ("lower" or "mixed")."""
    def t(lower: str, mixed: str) -> str:
        return lower if case == "lower" else mixed
    return (
        TextBlock(text="What do these say?"),
        DocumentBlock(url=_data(t("audio/wav", "AUDIO/wav"), CLIP), media_type=t("audio/wav", "Audio/WAV"),
                      duration_ms=1_500),
        DocumentBlock(url=_data(t("video/mp4", "Video/MP4"), VIDEO), media_type=t("video/mp4", "Video/MP4"),
                      duration_ms=4_000),
        DocumentBlock(url="https://example.com/report.pdf",
                      media_type=t("application/pdf", "Application/PDF"), pages=2),
        DocumentBlock(url=_data(t("application/pdf", "application/PDF"), pdf(1)),
                      media_type=t("application/pdf", "APPLICATION/pdf"), pages=1),
        ImageBlock(url=_data(t("image/png", "IMAGE/PNG"), png((40, 30), 1)),
                   media_type=t("image/png", "Image/Png"), width=40, height=30),
        DocumentBlock(url="https://example.com/talk.mp3", media_type=t("audio/mpeg", "audio/MPEG"),
                      duration_ms=60_000),
    )


def _body(case: str, provider: str, model: str | None) -> tuple[bytes, list[str]]:
    """The request body and the manifest's media lines built from ``_blocks(case)``; a note names
    a ``data:`` URL by the hash of its text, which its spelling changes: named as the lower-case
    URL's here, so that only what the type decides is compared."""
    events = [UserInput(content=_blocks(case))]
    state = fold([RecordedEvent("r1", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    built = build_context(state, BuildConfig(provider=provider, model=model, window=200_000, reserve=2_000),
                          render=render_request)
    if provider != "neutral":
        assert validate_sdk_types(provider, built.request)
    rules = "\n".join(f"{r.tokens} {r.rule} {r.not_attached}" for f in built.manifest.fragments
                      for r in f.media or ())
    body = built.body_bytes.decode()
    for spelt, lower in zip(_blocks(case), _blocks("lower"), strict=True):
        if getattr(spelt, "url", None) and spelt.url.startswith("data:"):
            named, as_lower = (blake3.blake3(b.url.encode()).hexdigest()[:12] for b in (spelt, lower))
            body, rules = body.replace(named, as_lower), rules.replace(named, as_lower)
    return body.encode(), rules.split("\n")


def test_media_type_rules_ignore_case() -> None:
    assert is_timed_media("audio/MPEG") and is_timed_media("Video/MP4") and is_timed_media("AUDIO/wav")
    assert not is_timed_media("Application/PDF")
    assert media_type_key(" Audio/MPEG; Rate=8000") == "audio/mpeg"
    assert is_medium("Application/PDF") and is_medium("IMAGE/png")


@pytest.mark.parametrize("provider, model", BUILDS)
def test_a_mixed_case_media_type_builds_as_its_lower_case_spelling(provider: str, model: str | None) -> None:
    """The same request, and the same prices and notes in the manifest, as the log that spells
    its types in lower case."""
    mixed, mixed_rules = _body("mixed", provider, model)
    lower, lower_rules = _body("lower", provider, model)
    assert mixed_rules == lower_rules
    assert mixed == lower


def test_a_mixed_case_audio_data_url_is_stored_as_an_artifact_with_its_length(store: EventStore) -> None:
    """As its lower-case spelling is (``test_inline_timed_media``): moved out of the event, its
    playing time read; and a build sends the same request as from the URL."""
    url = f"data:AUDIO/wav;base64,{B64}"
    asked = UserInput(content=(DocumentBlock(url=url, media_type="Audio/WAV"),))
    store.append("r1", [asked])
    [block] = [b for r in store.read("r1") if isinstance(r.event, UserInput) for b in r.event.content
               if isinstance(b, DocumentBlock)]
    assert block.url is None and block.artifact is not None and block.duration_ms == 1_500
    assert store.artifact(block.artifact) == CLIP
    cfg = BuildConfig(provider="openai-chat", model="gpt-4o-audio-preview", window=100_000, reserve=2_000)
    built = build_context(fold(store.read("r1")), cfg, render=render_request, load_bytes=store.artifact)
    assert {"type": "input_audio", "input_audio": {"data": B64, "format": "wav"}} in [
        p for m in built.request["messages"] if isinstance(m["content"], list) for p in m["content"]]
    inline = build_context(fold([RecordedEvent("r1", 1, asked, f"{1:064x}")]), cfg, render=render_request)
    assert built.body_bytes == inline.body_bytes


def test_a_gemini_part_of_an_upper_case_image_type_is_imported_as_an_image() -> None:
    """Gemini's importer told images from documents by ``mimeType``'s prefix as written: an
    ``IMAGE/PNG`` part became a document, priced and sent as a file no provider reads."""
    body = {"contents": [{"role": "user", "parts": [
        {"inlineData": {"mimeType": "IMAGE/PNG", "data": base64.b64encode(png((8, 8), 2)).decode()}},
        {"fileData": {"mimeType": "Image/Jpeg", "fileUri": "gs://bucket/a.jpg"}}]}]}
    [user] = [e for e in parse(json.dumps(body).encode(), format="gemini") if isinstance(e, UserInput)]
    assert [type(b).__name__ for b in user.content] == ["ImageBlock", "ImageBlock"]

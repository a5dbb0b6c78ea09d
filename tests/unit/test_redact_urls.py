"""Credentials in media URLs: replaced in the manifest's ``media[].ref``, the URL kept valid."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from contextfold.api import render_request
from contextfold.domain.events import (
    AnyEvent,
    DocumentBlock,
    ImageBlock,
    ModelResponse,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.redact_urls import REDACTED_IN_URL, shown_url
from contextfold.projections.state import RunState

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@pytest.mark.parametrize(("url", "shown"), [
    ("https://bob:hunter2@img.example/a.png", "https://bob:{r}@img.example/a.png"),
    (f"https://img.example/a.png?w=3&token={TOKEN}", "https://img.example/a.png?w=3&token={r}"),
    ("https://b.s3.amazonaws.com/a.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAZ7Q3B4N5K6L7M8P9"
     "%2F20240101%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=ab12cd34",
     "https://b.s3.amazonaws.com/a.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={r}"
     "&X-Amz-Signature={r}"),
    (f"https://{TOKEN}@github.com/o/r/raw/a.png", "https://{r}@github.com/o/r/raw/a.png"),
    (f"https://img.example/a.png?u={TOKEN}", "https://img.example/a.png?u={r}"),
    ("https://cb.example/#access_token=abc123&state=x", "https://cb.example/#access_token={r}&state=x"),
    ("https://img.example/a%20b.png?size=3&sha=abc#p2", "https://img.example/a%20b.png?size=3&sha=abc#p2"),
    ("https://user@img.example/a.png", "https://user@img.example/a.png"),
    ("data:image/png;base64,iVBORw0KGgo=", "data:image/png;base64,iVBORw0KGgo="),
])
def test_a_media_url_is_shown_without_its_credentials(url: str, shown: str) -> None:
    got = shown_url(url)
    assert got == shown.format(r=REDACTED_IN_URL)
    parts = urlsplit(got)
    assert (parts.scheme, parts.hostname) == (urlsplit(url).scheme, urlsplit(url).hostname)


def _folded(events: list[AnyEvent]) -> RunState:
    return fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])


def test_credentials_in_media_urls_stay_out_of_the_manifest() -> None:
    """An image URL's password, a ``?token=`` and a presigned document URL's credential went
    into the manifest's ``media[].ref`` as written (its first 80 characters)."""
    password = "Zq8fK2mN9pL4xR7tW3b"
    events: list[AnyEvent] = [
        ToolsRegistered(tools=(ToolSpec(name="fetch", description="fetch"),)),
        UserInput("look"),
        ModelResponse(tool_calls=(ToolCall(call_id="c1", name="fetch", arguments="{}"),
                                  ToolCall(call_id="c2", name="fetch", arguments="{}"))),
        ToolResult(call_id="c1", content="ok", blocks=(
            ImageBlock(url=f"https://bob:{password}@img.example/a.png", media_type="image/png"),
            ImageBlock(url=f"https://img.example/b.png?token={TOKEN}", media_type="image/png"))),
        ToolResult(call_id="c2", content="ok", blocks=(DocumentBlock(
            url="https://d.example/a.pdf?X-Amz-Credential=AKIAZ7Q3B4N5K6L7M8P9%2F20240101",
            media_type="application/pdf"),)),
        UserInput("next")]
    state = _folded(events)
    for provider in ("openai-chat", "anthropic", "gemini"):
        built = build_context(state, BuildConfig(provider=provider, window=60_000), render=render_request)
        manifest = json.dumps(built.manifest.model_dump(mode="json"))
        refs = [m.ref for f in built.manifest.fragments for m in f.media]
        assert len(refs) == 3 and all(REDACTED_IN_URL in ref for ref in refs), (provider, refs)
        for secret in (password, TOKEN[:20], "AKIAZ7Q3B4N5K6L7M8P9"):
            assert secret not in manifest, (provider, secret)


def test_a_document_not_attached_is_named_without_its_credentials() -> None:
    """A document a provider cannot take is named in a note ("document (...) URL: not attached"):
    the provider fetches nothing from that URL, so its password only leaked into the request."""
    password = "Zq8fK2mN9pL4xR7tW3b"
    url = f"https://bob:{password}@d.example/table.xlsx"
    events: list[AnyEvent] = [
        ToolsRegistered(tools=(ToolSpec(name="fetch", description="fetch"),)), UserInput("look"),
        ModelResponse(tool_calls=(ToolCall(call_id="c1", name="fetch", arguments="{}"),)),
        ToolResult(call_id="c1", content="ok",
                   blocks=(DocumentBlock(url=url, media_type="application/vnd.ms-excel"),)),
        UserInput("next")]
    state = _folded(events)
    for provider in ("anthropic", "openai-chat"):
        body = build_context(state, BuildConfig(provider=provider, window=60_000),
                             render=render_request).body_bytes.decode()
        assert "not attached" in body and password not in body, provider
        assert shown_url(url) in body, provider

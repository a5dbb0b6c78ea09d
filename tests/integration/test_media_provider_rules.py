"""Media a provider refuses where contextfold put it: each request here was accepted by the
protocol check and the SDK types, and refused by the API.

- Anthropic: a ``tool_result`` with ``is_error: true`` takes text only ("all content must be
  type 'text' if 'is_error' is true"). A failed browser call's screenshot went inside it, and
  every build failed while the result was in the window.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from contextfold.api import Store, open_store
from contextfold.cli import main
from contextfold.domain.errors import RenderError
from contextfold.domain.events import (
    DocumentBlock,
    ImageBlock,
    ModelResponse,
    TextBlock,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.importers import parse
from contextfold.projections.render import validate_sdk_types
from contextfold.projections.render.validate import validate_request
from contextfold.projections.tokens import get_counter
from tests.unit.test_media import image_bytes


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'media.db'}")


def _failed_screenshot_run(store: Store) -> None:
    run = store.run("r")
    shot = store.attach_image(image_bytes("PNG", (40, 30), (200, 10, 10)))
    run.append(UserInput(content=(TextBlock(text="open the login page"),)))
    run.append(ModelResponse(tool_calls=[
        ToolCall(call_id="c1", name="browser_open", arguments='{"url": "http://localhost"}'),
        ToolCall(call_id="c2", name="browser_open", arguments='{"url": "http://localhost/b"}')]))
    run.append(ToolResult(call_id="c1", content="Navigation failed: 500", blocks=(shot,), is_error=True))
    run.append(ToolResult(call_id="c2", content="ok"))
    run.append(UserInput("what went wrong?"))


def test_anthropic_error_result_keeps_text_and_its_media_follow_the_results(store: Store) -> None:
    _failed_screenshot_run(store)
    built = store.run("r").preview("anthropic", model="claude-sonnet-4-5", window=100_000, reserve=1_000)
    assert validate_sdk_types("anthropic", built.request)
    message = built.request["messages"][-1]["content"]
    kinds = [b["type"] for b in message]
    assert kinds[:2] == ["tool_result", "tool_result"]
    failed = message[0]
    assert failed["is_error"] is True and {c["type"] for c in failed["content"]} == {"text"}
    assert "Navigation failed: 500" in "".join(c["text"] for c in failed["content"])
    # after the results: the runtime's line naming the call, the screenshot with its caption (a
    # tool's output is data), then the question
    assert kinds[2:] == ["text", "text", "image", "text"]
    assert message[2]["text"].startswith("[runtime] media returned by call c1 (browser_open)")
    assert message[3]["text"].startswith("<data ")
    assert message[-1]["text"] == "what went wrong?"


def _error_result_with_image() -> dict[str, Any]:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    return {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "shot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "is_error": True,
                                      "content": [{"type": "text", "text": "failed"}, image]}]}],
        "tools": [{"name": "shot", "input_schema": {"type": "object", "properties": {}}}]}


def test_anthropic_validation_refuses_an_error_result_holding_an_image() -> None:
    body = _error_result_with_image()
    with pytest.raises(RenderError, match="is_error"):
        validate_request("anthropic", body)
    body["messages"][2]["content"][0]["is_error"] = False  # a successful result may hold an image
    validate_request("anthropic", body)


def test_the_anthropic_build_of_a_failed_screenshot_is_recorded_and_replayed(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'b.db'}") as store:
        _failed_screenshot_run(store)
        run = store.run("r")
        built = run.build("anthropic", model="claude-sonnet-4-5", window=100_000, reserve=1_000)
        assert run.replay(built.manifest.turn).ok


DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def test_import_reads_an_image_urls_type_from_its_extension(tmp_path: Path) -> None:
    chat = [{"role": "user", "content": [
        {"type": "text", "text": "what are these?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a/ant.JPG?w=2"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/render?id=3"}}]}]
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(chat))
    db = f"sqlite:///{tmp_path / 'i.db'}"
    assert main(["--store", db, "import", str(src), "--run", "r", "--format", "openai-chat"]) == 0
    with open_store(db) as store:
        event = next(e.event for e in store.run("r").events() if isinstance(e.event, UserInput))
        assert [b.media_type for b in event.content if isinstance(b, ImageBlock)] == ["image/jpeg", "image/*"]
        built = store.run("r").preview("gemini", model="gemini-2.5-flash", window=50_000, reserve=1_000)
    parts = built.request["contents"][0]["parts"]
    assert parts[1] == {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/a/ant.JPG?w=2"}}
    # the image of unknown type is a note: Gemini refuses fileData without an IANA type
    assert set(parts[2]) == {"text"} and "not attached" in parts[2]["text"]
    assert "image/*" not in json.dumps([p.get("fileData") for p in parts])


def _docx_run(store: Store) -> None:
    doc = DocumentBlock(url=f"data:{DOCX};base64," + base64.b64encode(b"PK\x03\x04 not really").decode(),
                        media_type=DOCX)
    run = store.run("d")
    run.append(UserInput(content=(TextBlock(text="summarise the spec"), doc)))


def test_gemini_gets_a_note_for_an_office_file_and_the_manifest_says_so(store: Store) -> None:
    _docx_run(store)
    built = store.run("d").preview("gemini", model="gemini-2.5-flash", window=50_000, reserve=1_000)
    assert validate_sdk_types("gemini", built.request)
    parts = built.request["contents"][0]["parts"]
    assert all("inlineData" not in p and "fileData" not in p for p in parts)
    note = parts[1]["text"]
    assert f"document ({DOCX})" in note and "not attached, Gemini does not take this type" in note
    [record] = [m for f in built.manifest.fragments for m in f.media]
    assert record.tokens == 0 and record.rule == "gemini-not-attached" and record.not_attached
    assert record.not_attached in note
    # the same run still sends the file where it is taken
    responses = store.run("d").preview("openai-responses", model="gpt-4.1", window=50_000, reserve=1_000)
    assert any(i.get("type") == "input_file" for i in responses.request["input"][0]["content"])
    assert all(m.not_attached is None for f in responses.manifest.fragments for m in f.media)


@pytest.mark.parametrize("part", [
    {"inlineData": {"mimeType": DOCX, "data": "AAAA"}},
    {"fileData": {"mimeType": "image/*", "fileUri": "https://example.com/x"}},
])
def test_gemini_validation_refuses_a_type_gemini_does_not_take(part: dict[str, Any]) -> None:
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "look"}, part]}]}
    with pytest.raises(RenderError, match="Unsupported MIME type"):
        validate_request("gemini", body)
    media = part.get("inlineData") or part["fileData"]
    media["mimeType"] = "image/png"
    validate_request("gemini", body)


def stored_png(width: int, height: int, seed: int = 0) -> bytes:
    """A PNG of incompressible pixels stored uncompressed: about ``width * height * 3`` bytes."""
    rows = random.Random(seed).randbytes
    raw = b"".join(b"\x00" + rows(width * 3) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 0))
            + chunk(b"IEND", b""))


def test_anthropic_gets_a_note_for_an_image_over_5_mb(store: Store) -> None:
    big = stored_png(1500, 1400)  # ~6.3 MB: under attach_image's 20 MB and 8000 px
    run = store.run("big")
    run.append(UserInput(content=(TextBlock(text="what is in this screenshot?"), store.attach_image(big))))
    built = run.preview("anthropic", model="claude-sonnet-4-5", window=200_000, reserve=4_000)
    content = built.request["messages"][0]["content"]
    assert [b["type"] for b in content] == ["text", "text"]
    assert "not attached, over Anthropic's 5 MB image limit" in content[1]["text"]
    assert len(json.dumps(built.request)) < 10_000  # the bytes were not loaded
    [record] = [m for f in built.manifest.fragments for m in f.media]
    assert (record.tokens, record.rule) == (0, "anthropic-not-attached")
    assert record.not_attached is not None and record.not_attached in content[1]["text"]
    chat = run.preview("openai-chat", model="gpt-4o", window=200_000, reserve=4_000)  # OpenAI takes it
    assert any(p.get("type") == "image_url" for p in chat.request["messages"][0]["content"])


def test_anthropic_validation_refuses_an_image_over_5_mb() -> None:
    source = {"type": "base64", "media_type": "image/png", "data": "A" * (5 * 1024 * 1024 + 4)}
    image = {"type": "image", "source": source}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}]}
    with pytest.raises(RenderError, match="5 MB"):
        validate_request("anthropic", body)
    source["data"] = "A" * 1024
    validate_request("anthropic", body)


@pytest.mark.parametrize("count", [20, 21])
def test_anthropic_sends_wide_images_only_in_requests_of_at_most_20(store: Store, count: int) -> None:
    """More than 20 images in one request: Anthropic refuses any with a side over 2000 px ("At
    least one of the image dimensions exceed max allowed size for many-image requests"). Two
    wide strips among ``count`` small images: with more than 20 small ones, keeping all of those
    sends more than leaving out the oldest images down to 20 (below)."""
    run = store.run(f"strips{count}")
    strips = tuple(store.attach_image(stored_png(2100, 2, seed=i)) for i in range(2))
    small = tuple(store.attach_image(image_bytes("PNG", (50, 50), (200, 10, i))) for i in range(count))
    run.append(UserInput(content=(TextBlock(text="compare these panorama strips"), *strips, *small)))
    built = run.preview("anthropic", model="claude-sonnet-4-5", window=200_000, reserve=4_000)
    content = built.request["messages"][0]["content"]
    images = [b for b in content if b["type"] == "image"]
    records = [m for f in built.manifest.fragments for m in f.media]
    notes = [b["text"] for b in content if b["type"] == "text" and "not attached" in b["text"]]
    assert len(images) == max(count, 20) and len(notes) == count + 2 - len(images)
    if count <= 20:  # the oldest two (the strips) left out: each image may be up to 8000 px
        assert all("past the 20 images Anthropic takes in a request with an image over 2000 px" in n
                   for n in notes)
        return
    assert all("2000 px limit for a request of more than 20 images (2100x2)" in n for n in notes)
    unsent = [r for r in records if r.not_attached is not None]
    assert len(unsent) == 2  # priced as the notes sent (below)
    assert all((r.tokens, r.rule) == (0, "anthropic-not-attached") for r in unsent)


def test_anthropic_leaves_out_the_oldest_images_rather_than_every_wide_one(store: Store) -> None:
    """21 screenshots of 2400x300 px: all 21 were notes ("over Anthropic's 2000 px limit for a
    request of more than 20 images") and the model saw none, where leaving out the oldest brings
    the request to 20 images, each then allowed 8000 px a side. Each note names its image."""
    run = store.run("wide21")
    shots = tuple(store.attach_image(image_bytes("PNG", (2400, 300), (i * 10, 80, 160))) for i in range(21))
    run.append(UserInput(content=(TextBlock(text="compare these screenshots"), *shots)))
    built = run.preview("anthropic", model="claude-sonnet-4-5", window=200_000, reserve=8_000)
    content = built.request["messages"][0]["content"]
    assert sum(b["type"] == "image" for b in content) == 20
    [record] = [m for f in built.manifest.fragments for m in f.media if m.not_attached is not None]
    oldest = shots[0].artifact
    assert oldest is not None and record.ref == f"sha:{oldest.hash}"
    assert record.not_attached is not None and f"sha:{oldest.hash[:12]}" in record.not_attached
    assert "past the 20 images Anthropic takes" in record.not_attached


def test_each_note_of_one_input_names_the_image_it_stands_for(store: Store) -> None:
    """The notes of one input's images named only the input ("image (image/png) e2"): alike for
    every image, they told the model nothing of which was left out."""
    run = store.run("wide22")
    strips = tuple(store.attach_image(stored_png(2100, 2, seed=i)) for i in range(2))
    small = tuple(store.attach_image(image_bytes("PNG", (50, 50), (200, 10, i))) for i in range(21))
    run.append(UserInput(content=(TextBlock(text="compare these panorama strips"), *strips, *small)))
    built = run.preview("anthropic", model="claude-sonnet-4-5", window=200_000, reserve=4_000)
    notes = [b["text"] for b in built.request["messages"][0]["content"]
             if b["type"] == "text" and "not attached" in b["text"]]
    assert len(notes) == 2 and len(set(notes)) == 2
    for strip, note in zip(strips, notes, strict=True):
        assert strip.artifact is not None and f"sha:{strip.artifact.hash[:12]}" in note


def test_images_sent_as_notes_for_the_20_image_rule_are_priced_as_the_notes(store: Store) -> None:
    """The plan cannot know a request's image count, so the selection priced each wide image as an
    image (~470 tokens for 2100x300); the manifest kept that price for the ~40-token note sent in its
    place, and counted ~9,000 tokens the request did not carry. It now counts what is sent."""
    run = store.run("wide")
    strips = tuple(store.attach_image(image_bytes("PNG", (2100, 300), (i * 10, 80, 160))) for i in range(20))
    small = tuple(store.attach_image(image_bytes("PNG", (50, 50), (200, 10, i))) for i in range(21))
    run.append(UserInput(content=(TextBlock(text="compare these panorama strips"), *strips, *small)))
    built = run.preview("anthropic", model="claude-sonnet-4-5", window=200_000, reserve=4_000)
    [fragment] = [f for f in built.manifest.fragments if f.media]
    content = built.request["messages"][0]["content"]
    assert sum(b["type"] == "image" for b in content) == 21
    count = get_counter(built.manifest.encoding).count
    shown = (sum(count(b["text"]) for b in content if b["type"] == "text")
             + sum(m.tokens for m in fragment.media))
    assert shown <= fragment.tokens <= shown + 40  # the framing of the message and its tags
    assert fragment.tokens < 4_000


def _imported(store: Store, doc: Any, fmt: str) -> str:
    run = store.run(fmt)
    run.append(*parse(json.dumps(doc).encode(), format=fmt))
    return fmt


def _notes(request: Any) -> list[str]:
    text = json.dumps(request)
    return [line for line in text.split("\\n") if "not attached" in line]


def test_anthropic_file_ids_go_back_to_anthropic_as_file_sources(store: Store) -> None:
    doc = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Describe the chart and summarise the report."},
        {"type": "image", "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"}},
        {"type": "document", "source": {"type": "file", "file_id": "file_011CPMxVD3fHLUhvTqtsQA5w"}}]}]}
    run = store.run(_imported(store, doc, "anthropic"))
    built = run.preview("anthropic", model="claude-sonnet-4-5", window=100_000, reserve=1_000)
    assert validate_sdk_types("anthropic", built.request)
    blocks = built.request["messages"][0]["content"]
    assert blocks[1] == {"type": "image",
                         "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"}}
    assert blocks[2] == {"type": "document",
                         "source": {"type": "file", "file_id": "file_011CPMxVD3fHLUhvTqtsQA5w"},
                         "cache_control": {"type": "ephemeral"}}  # the conversation's end
    for provider in ("openai-chat", "openai-responses", "gemini"):
        other = run.preview(provider, model="m", window=100_000, reserve=1_000)
        assert "anthropic-file://file_011CNha8iCJcU1wXNR6q4V8w: not attached, a file in Anthropic's Files " \
               "API" in json.dumps(other.request), provider
        assert len(_notes(other.request)) == 2
        records = [m for f in other.manifest.fragments for m in f.media]
        assert len(records) == 2 and all(r.not_attached and r.tokens == 0 for r in records)


def test_openai_file_ids_go_back_to_openai_by_id_with_their_type(store: Store) -> None:
    doc = {"model": "gpt-4.1", "input": [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Describe the chart and the report."},
        {"type": "input_image", "file_id": "file-abc123", "detail": "auto"},
        {"type": "input_file", "file_id": "file-def456", "filename": "report.pdf"}]}]}
    run = store.run(_imported(store, doc, "openai-responses"))
    user = next(e.event for e in run.events() if isinstance(e.event, UserInput))
    assert [getattr(b, "media_type", None) for b in user.content][1:] == ["image/*", "application/pdf"]
    responses = run.preview("openai-responses", model="gpt-4.1", window=100_000, reserve=1_000)
    assert validate_sdk_types("openai-responses", responses.request)
    assert responses.request["input"][0]["content"][1:] == [
        {"type": "input_image", "file_id": "file-abc123", "detail": "auto"},
        {"type": "input_file", "file_id": "file-def456"}]
    chat = run.preview("openai-chat", model="gpt-4.1", window=100_000, reserve=1_000)
    assert validate_sdk_types("openai-chat", chat.request)
    parts = chat.request["messages"][0]["content"]
    assert "not attached, Chat Completions takes no image by file id" in parts[1]["text"]
    assert parts[2] == {"type": "file", "file": {"file_id": "file-def456"}}
    anthropic = run.preview("anthropic", model="claude-sonnet-4-5", window=100_000, reserve=1_000)
    assert len(_notes(anthropic.request)) == 2 and "openai-file://" not in json.dumps(
        [b.get("source") for b in anthropic.request["messages"][0]["content"]])


def test_anthropic_validation_refuses_a_url_source_that_names_a_file_id() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "anthropic-file://file_011CNha8"}}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}]}
    with pytest.raises(RenderError, match="names a file id"):
        validate_request("anthropic", body)
    image["source"] = {"type": "file", "file_id": "file_011CNha8"}
    validate_request("anthropic", body)

"""Runs with screenshots and PDFs, built for every provider, through the store (SQLite).

- 30 screenshots under a tight budget: the required and the newest are kept,
  the next one is reduced (OpenAI ``detail: low``) before anything is dropped,
  and the budget holds; with Anthropic (no cheaper rendition) it is dropped.
- A run with user images, a PDF, a tool result that returned a screenshot,
  evidence with an external image, a remote URL and a repeated image renders
  for all four providers and validates against the official SDK request types;
  the repeated image is carried once.
- An OpenAI chat history with a base64 image imports through the CLI, the
  image becomes an artifact, and ``contextfold build`` renders it.
"""

from __future__ import annotations

import base64
import functools
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from contextfold.api import Run, Store, open_store
from contextfold.cli import main
from contextfold.domain.events import (
    EvidenceRetrieved,
    ImageBlock,
    ModelResponse,
    PolicySet,
    RunStarted,
    TextBlock,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.projections.media_cost import anthropic_image_tokens, openai_image_tokens
from contextfold.projections.render import validate_sdk_types

PROVIDERS = ("openai-chat", "openai-responses", "anthropic", "gemini")


def png(size: tuple[int, int], seed: int) -> bytes:
    img = Image.new("RGB", size, (seed * 7 % 256, seed * 13 % 256, 90))
    img.putpixel((seed % size[0], 0), (255, 255, 255))  # distinct bytes per screenshot
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


@functools.cache
def pdf(pages: int) -> bytes:
    """Cached: Pillow stamps a creation date, so two calls may differ."""
    frames = [Image.new("RGB", (170, 220), (255, 255, 255 - i)) for i in range(pages)]
    buf = io.BytesIO()
    frames[0].save(buf, "PDF", save_all=True, append_images=frames[1:])
    return buf.getvalue()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'media.db'}")


def screenshots_run(store: Store, n: int = 30, required: int = 3) -> tuple[Run, dict[int, str]]:
    """``n`` turns of 'here is the screen' + a 1280x800 screenshot; turn ``required`` is pinned."""
    run = store.run("shots")
    run.append(RunStarted(model="gpt-4o"), PolicySet(text="You operate a browser."))
    frag_of: dict[int, str] = {}
    for i in range(1, n + 1):
        image = store.attach_image(png((1280, 800), i), detail="high")
        rec = run.append(UserInput(content=(TextBlock(text=f"screen {i}"), image), required=i == required))
        frag_of[i] = f"e{rec[0].position}"
        if i < n:
            run.append(ModelResponse(text=f"clicked on item {i}"))
    return run, frag_of


def test_thirty_screenshots_keep_newest_and_required_and_reduce_before_dropping(store: Store) -> None:
    run, frag_of = screenshots_run(store)
    built = run.build("openai-chat", window=11_000, reserve=1_000, record=False)
    m = built.manifest
    assert m.selected_tokens <= m.budget_tokens
    kept = {f.id: f for f in m.fragments}
    shot = {fid: i for i, fid in frag_of.items()}
    assert frag_of[30] in kept and frag_of[3] in kept  # current input and the pinned one
    full_price = openai_image_tokens(1280, 800)        # 1105: 1229x768 after resizing, 6 tiles
    assert full_price == 1105

    reduced = [t for t in m.truncations if t.strategy == "media_detail_low"]
    assert len(reduced) == 1, m.truncations
    low = shot[reduced[0].id]
    assert reduced[0].original_tokens == full_price and reduced[0].tokens == 85
    assert kept[reduced[0].id].truncated and kept[reduced[0].id].media[0].reduced_from == full_price
    assert kept[reduced[0].id].media[0].rule == "openai-low:85+170"  # gpt-4o's rule (the run's model)

    optional_kept = sorted(i for fid, i in shot.items() if fid in kept and i not in (3, 30, low))
    dropped = sorted(i for fid, i in shot.items() if fid not in kept)
    assert optional_kept and dropped and len(dropped) > 10
    # newest first, then one reduced, then dropped
    assert min(optional_kept) > low > max(d for d in dropped if d != 3)
    assert all(kept[frag_of[i]].media[0].tokens == full_price for i in optional_kept)
    excluded = {e.id: e.reason for e in m.excluded_items}
    assert {excluded[frag_of[i]] for i in dropped} <= {"over_budget", "low_priority"}

    # The request carries exactly the kept screenshots, the reduced one at detail low.
    images = [p["image_url"] for msg in built.request["messages"] if isinstance(msg["content"], list)
              for p in msg["content"] if p["type"] == "image_url"]
    assert len(images) == len([f for f in kept if f in shot])
    assert sorted(i["detail"] for i in images).count("low") == 1
    assert all(i["url"].startswith("data:image/png;base64,") for i in images)
    assert validate_sdk_types("openai-chat", built.request)


def test_anthropic_prices_by_pixels_and_has_no_cheaper_rendition(store: Store) -> None:
    run, frag_of = screenshots_run(store)
    built = run.build("anthropic", window=11_000, reserve=1_000, record=False)
    m = built.manifest
    assert m.selected_tokens <= m.budget_tokens
    assert not [t for t in m.truncations if t.strategy == "media_detail_low"]
    priced = [f.media[0] for f in m.fragments if f.media]
    assert {(p.rule, p.tokens) for p in priced} == {("anthropic-pixels", anthropic_image_tokens(1280, 800))}
    assert anthropic_image_tokens(1280, 800) == 1366  # 1,024,000 / 750, no resize needed
    assert frag_of[30] in {f.id for f in m.fragments} and frag_of[3] in {f.id for f in m.fragments}
    # dearer per image than OpenAI: fewer screenshots fit in the same window
    openai = run.build("openai-chat", window=11_000, reserve=1_000, record=False).manifest
    assert sum(1 for f in m.fragments if f.media) < sum(1 for f in openai.fragments if f.media)


def rich_run(store: Store) -> Run:
    run = store.run("rich")
    shot = png((900, 600), 1)
    image = store.attach_image(shot)
    doc = store.attach_document(pdf(2), title="spec.pdf")
    run.append(RunStarted(model="claude-sonnet-4-5"), PolicySet(text="Be careful."))
    run.append(UserInput(content=(TextBlock(text="Compare the screenshot with the spec."), image, doc)))
    run.append(ModelResponse(tool_calls=(ToolCall(call_id="c1", name="screenshot", arguments="{}"),)))
    again = store.attach_image(shot)  # the same bytes: same artifact
    run.append(ToolResult(call_id="c1", content="captured", origin="workspace",
                          blocks=(store.attach_image(png((400, 300), 2)), again)))
    run.append(EvidenceRetrieved(source_ref="https://example.com/diagram", source_kind="web",
                                 blocks=(store.attach_image(png((300, 300), 3)),),
                                 content="diagram from the vendor page"))
    run.append(UserInput(content=(TextBlock(text="and this one"),
                                  ImageBlock(url="https://example.com/cat.png", media_type="image/png"))))
    return run


def _blobs(request: dict[str, Any]) -> str:
    return json.dumps(request)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_provider_renders_media_and_validates_against_the_sdk(store: Store, provider: str) -> None:
    run = rich_run(store)
    # A hand-off of a Claude run names its OpenAI model (OpenAI prices images per model).
    model = "gpt-4o" if provider.startswith("openai") else None
    built = run.build(provider, window=60_000, reserve=2_000, model=model, record=False)
    req = built.request
    assert validate_sdk_types(provider, req)
    text = _blobs(req)
    shot_b64 = base64.b64encode(png((900, 600), 1)).decode()
    assert text.count(shot_b64) == 1, "the repeated screenshot is carried once"
    assert "shown above" in text
    tool_shot = base64.b64encode(png((400, 300), 2)).decode()
    assert tool_shot in text and base64.b64encode(pdf(2)).decode() in text
    match provider:
        case "openai-chat":
            assert '"type": "image_url"' in text and '"type": "file"' in text
            assert "media returned by call c1" in text  # moved out of the tool message, with a reference
        case "openai-responses":
            assert '"type": "input_image"' in text and '"type": "input_file"' in text
            outputs = [i for i in req["input"] if i["type"] == "function_call_output"]
            assert any(p.get("type") == "input_image" for p in outputs[0]["output"])
        case "anthropic":
            results = [b for msg in req["messages"] for b in msg["content"] if b["type"] == "tool_result"]
            assert any(c["type"] == "image" and c["source"]["type"] == "base64"
                       for c in results[0]["content"])  # images inside tool_result
            assert '"type": "document"' in text and '"type": "url"' in text
        case "gemini":
            assert '"inlineData"' in text and '"fileData"' in text
    prices = {p.rule.split(":")[0] for f in built.manifest.fragments for p in f.media}
    family = {"openai-chat": "openai", "openai-responses": "openai"}.get(provider, provider)
    assert prices and all(r.startswith(family) for r in prices)
    deduped = [p for f in built.manifest.fragments for p in f.media if p.shown_in]
    assert len(deduped) == 1


def test_replay_of_a_media_build_is_identical(store: Store) -> None:
    run = rich_run(store)
    first = run.build("anthropic", window=60_000, reserve=2_000)
    report = run.replay(first.manifest.turn)
    assert report.ok, report.differences


def test_import_openai_history_with_base64_image_and_build(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    jpeg = io.BytesIO()
    Image.new("RGB", (640, 480), (10, 20, 30)).save(jpeg, "JPEG")
    url = "data:image/png;base64," + base64.b64encode(jpeg.getvalue()).decode()  # mislabelled on purpose
    image_part = {"type": "image_url", "image_url": {"url": url, "detail": "high"}}
    history = [{"role": "system", "content": "You are helpful."},
               {"role": "user", "content": [{"type": "text", "text": "What is this?"}, image_part]},
               {"role": "assistant", "content": "A dark rectangle."},
               {"role": "user", "content": "Describe it again."}]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(history))
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["--store", db, "import", str(path), "--run", "chat", "--format", "openai-chat"]) == 0
    with open_store(db) as store:
        event = store.run("chat").events()[2].event
        assert isinstance(event, UserInput)
        block = event.content[1]
        assert isinstance(block, ImageBlock) and block.artifact is not None and block.url is None
        assert (block.media_type, block.width, block.height, block.detail) == ("image/jpeg", 640, 480, "high")
    out = tmp_path / "req.json"
    assert main(["--store", db, "build", "chat", "--provider", "anthropic", "--out", str(out)]) == 0
    body = json.loads(out.read_text())
    sources = [b["source"] for m in body["messages"] for b in m["content"] if b["type"] == "image"]
    assert sources == [{"type": "base64", "media_type": "image/jpeg",
                        "data": base64.b64encode(jpeg.getvalue()).decode()}]
    assert validate_sdk_types("anthropic", body)

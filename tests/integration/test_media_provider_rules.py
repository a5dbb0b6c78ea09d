"""Media a provider refuses where contextfold put it: each request here was accepted by the
protocol check and the SDK types, and refused by the API.

- Anthropic: a ``tool_result`` with ``is_error: true`` takes text only ("all content must be
  type 'text' if 'is_error' is true"). A failed browser call's screenshot went inside it, and
  every build failed while the result was in the window.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from contextfold.api import Store, open_store
from contextfold.domain.errors import RenderError
from contextfold.domain.events import ModelResponse, TextBlock, ToolCall, ToolResult, UserInput
from contextfold.projections.render import validate_sdk_types
from contextfold.projections.render.validate import validate_request


def png(size: tuple[int, int] = (40, 30), colour: tuple[int, int, int] = (200, 10, 10)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'media.db'}")


def _failed_screenshot_run(store: Store) -> None:
    run = store.run("r")
    shot = store.attach_image(png())
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

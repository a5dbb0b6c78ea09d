"""A tool result passed as text blocks (the MCP shape, ``ToolResult(blocks=(TextBlock(...),))``) is
shown to the model. It was counted in the manifest and never rendered: every provider got an empty
or partial answer while the stored event held the text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.domain.events import ModelResponse, TextBlock, ToolCall, ToolResult, UserInput
from contextfold.projections.render import PROVIDERS


def _record(url: str, content: str, *texts: str) -> None:
    with open_store(url) as store:
        asked = ModelResponse(tool_calls=(ToolCall(call_id="c1", name="weather"),))
        answer = ToolResult(call_id="c1", content=content, blocks=tuple(TextBlock(text=t) for t in texts))
        store.run("r").append(UserInput("weather?"), asked, answer)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_results_text_blocks_reach_the_model_after_its_content(tmp_path: Path, provider: str) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    _record(url, "header line", "Paris: 18C, light rain", "Lyon: 21C")
    with open_store(url) as store:
        built = store.run("r").build(provider, window=20_000, reserve=2_000)
    body = json.dumps(built.request, ensure_ascii=False)
    assert "header line\\nParis: 18C, light rain\\nLyon: 21C" in body, body


def test_large_text_blocks_go_to_the_artifact_with_the_content(tmp_path: Path) -> None:
    """The store moves a large result to an artifact: its text blocks go with it, whole, so the
    build reads and cuts one text (a block left beside the artifact was never shown)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    rows = "\n".join(f"row {i}: " + "payload " * 12 for i in range(2_000))
    _record(url, "", rows, "error: the last row failed")
    with open_store(url) as store:
        run = store.run("r")
        (result,) = [r.event for r in run.events() if isinstance(r.event, ToolResult)]
        assert result.artifact is not None and result.blocks == ()
        assert store.artifact_text(result.artifact) == rows + "\nerror: the last row failed"
        built = run.build("anthropic", window=4_000, reserve=500)
    body = json.dumps(built.request)
    assert "row 0:" in body and "error: the last row failed" in body  # cut, its head and tail kept
    assert any(f.truncated for f in built.manifest.fragments if f.kind == "tool_result")

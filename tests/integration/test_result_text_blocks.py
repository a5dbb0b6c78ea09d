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


def test_a_summary_show_and_events_read_a_results_text_blocks(tmp_path: Path) -> None:
    """A summary's known failures and kept facts, ``show`` of the ref it cites, and ``events`` read
    a result's ``content`` alone: of a result given as text blocks they showed nothing, and the
    deploy id and its 'not yet verified' state left the request with the summary."""
    from contextfold.show_refs import show
    from tests.cli_runner import cf

    url = f"sqlite:///{tmp_path / 'contextfold.db'}"
    with open_store(url) as store:
        run = store.run("mcp")
        run.append(UserInput("Deploy the service and verify it"),
                   ModelResponse(tool_calls=(ToolCall(call_id="d1", name="deploy"),)),
                   ToolResult(call_id="d1", blocks=(TextBlock(text="deployment dep-9931 created; "
                                                              "health check: not yet verified"),)),
                   ModelResponse(tool_calls=(ToolCall(call_id="t1", name="pytest"),)),
                   ToolResult(call_id="t1", is_error=True, exit_code=1, blocks=(TextBlock(
                       text="FAILED tests/test_invoice.py::test_total - AssertionError: 50.98 != 50.97"),)))
        for i in range(5):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"r{i}", name="read"),)),
                       ToolResult(call_id=f"r{i}", content=f"contents of f{i}\n" + "x = 1\n" * 400))
        run.compact("summary", keep_recent=1)
        body = json.dumps(run.preview("anthropic", window=20_000, reserve=2_000).request)
        assert "dep-9931" in body and "not yet verified" in body and "AssertionError: 50.98 != 50.97" in body
        assert "AssertionError: 50.98 != 50.97" in show(run, "event://mcp/5")
    events = cf("events", "mcp", cwd=tmp_path).stdout
    assert "#d1 deployment dep-9931 created" in events

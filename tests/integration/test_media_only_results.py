"""A tool result (or a retrieval) whose only content is a medium renders no empty data block.

A tool that returned a PDF and no text was sent, to every provider, as an empty
``<data source=... kind="tool_result">`` block followed by the document's caption and the
document: a block that said nothing, in the tool message of Chat Completions, the
``function_call_output`` of Responses, the ``tool_result`` of Anthropic and the
``functionResponse`` of Gemini. Built through the store (SQLite), rendered by the real renderers
and checked against the official SDK request types.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contextfold.api import Run, Store, open_store
from contextfold.domain.events import (
    EvidenceRetrieved,
    ModelResponse,
    PolicySet,
    RunStarted,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.projections.render import validate_sdk_types
from tests.integration.test_media_build import PROVIDERS, pdf, png
from tests.json_strings import strings

EMPTY_BLOCK = re.compile(r"<data [^>]*>\s*</data>")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'only-media.db'}")


def _run(store: Store, *, is_error: bool = False) -> Run:
    run = store.run("only-media")
    run.append(RunStarted(model="gpt-4o"), PolicySet(text="Read what the tools return."))
    run.append(UserInput("Fetch the spec and the vendor's diagram."))
    run.append(ModelResponse(tool_calls=(ToolCall(call_id="c1", name="fetch_spec", arguments="{}"),)))
    run.append(ToolResult(call_id="c1", blocks=(store.attach_document(pdf(2), title="spec.pdf"),),
                          is_error=is_error))
    run.append(EvidenceRetrieved(source_ref="https://example.com/diagram", source_kind="web",
                                 blocks=(store.attach_image(png((300, 200), 5)),)))
    run.append(UserInput("What does the spec say?"))
    return run


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_result_of_only_a_document_has_no_empty_data_block(store: Store, provider: str) -> None:
    built = _run(store).build(provider, window=60_000, reserve=2_000, record=False)
    assert validate_sdk_types(provider, built.request)
    texts = strings(built.request)
    assert not [s for s in texts if EMPTY_BLOCK.search(s)]
    # the result still names its document (its caption), and the document is sent
    assert any('kind="document"' in s and "application/pdf" in s for s in texts)
    assert any(s.startswith(("JVBER", "data:application/pdf;base64,JVBER")) for s in texts)
    assert any('kind="image"' in s and "https://example.com/diagram" in s for s in texts)


def test_a_failed_result_of_only_a_document_has_no_empty_data_block(store: Store) -> None:
    """Anthropic moves a failed result's media after the results: the result keeps its runtime
    line and the caption naming the document, no empty block."""
    built = _run(store, is_error=True).build("anthropic", window=60_000, reserve=2_000, record=False)
    assert validate_sdk_types("anthropic", built.request)
    [result] = [b for m in built.request["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b["type"] == "tool_result"]
    texts = [b["text"] for b in result["content"]]
    assert texts[0].startswith("[runtime] TOOL_ERROR") and len(texts) == 2
    assert 'kind="document"' in texts[1] and "attached after the tool results" in texts[1]
    assert not EMPTY_BLOCK.search(texts[1])


def test_the_neutral_conversation_holds_no_blank_data_part(store: Store) -> None:
    built = _run(store).build("neutral", window=60_000, reserve=2_000, record=False)
    [tool] = [m for m in built.request["messages"] if m["role"] == "tool"]
    [result] = tool["results"]
    assert [p["type"] for p in result["content"]] == ["media"]
    retrieved = [p for m in built.request["messages"] if m["role"] == "user" for p in m["parts"]
                 if p.get("source") == "https://example.com/diagram"]
    assert [p["type"] for p in retrieved] == ["media"]


def test_a_result_with_text_keeps_its_data_block(store: Store) -> None:
    """Only blank text beside media is left out: a result's words stay in their block."""
    run = store.run("text-and-media")
    run.append(UserInput("Fetch the spec."))
    run.append(ModelResponse(tool_calls=(ToolCall(call_id="c1", name="fetch_spec", arguments="{}"),)))
    run.append(ToolResult(call_id="c1", content="fetched 2 pages",
                          blocks=(store.attach_document(pdf(2), title="spec.pdf"),)))
    for provider in PROVIDERS:
        built = run.build(provider, window=60_000, reserve=2_000, record=False)
        assert any('kind="tool_result"' in s and "fetched 2 pages" in s for s in strings(built.request))

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
from contextfold.domain.manifest import ContextManifest
from contextfold.projections.render import validate_sdk_types
from contextfold.projections.render.data_blocks import data_frame
from contextfold.projections.tokens import get_counter
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


def _priced_run(store: Store, name: str, said: str, *, is_error: bool = False) -> Run:
    """A screenshot result and a retrieved diagram, each with the words ``said`` ("" for media alone)."""
    run = store.run(name)
    run.append(RunStarted(model="gpt-4o"), UserInput("Take a screenshot of the login page."))
    run.append(ModelResponse(tool_calls=(ToolCall(call_id="c1", name="screenshot", arguments="{}"),)))
    run.append(ToolResult(call_id="c1", content=said and f"{said} one", is_error=is_error,
                          blocks=(store.attach_image(png((300, 200), 5)),)))
    run.append(EvidenceRetrieved(source_ref="https://example.com/diagram", source_kind="web",
                                 content=said and f"{said} two",
                                 blocks=(store.attach_image(png((200, 100), 3)),)))
    run.append(UserInput("What does it show?"))
    return run


def _data_block_tokens(manifest: ContextManifest, fid: str, label: str) -> int:
    """What a data block adds around a fragment's text (its empty block, as written)."""
    [line] = [f for f in manifest.fragments if f.id == fid]
    return get_counter(manifest.encoding).count(data_frame(line.source_ref, line.trust, label))


@pytest.mark.parametrize("is_error", [False, True])
@pytest.mark.parametrize("provider", [*PROVIDERS, "neutral"])
def test_media_alone_is_charged_no_data_block(store: Store, provider: str, is_error: bool) -> None:
    """The layout sends no data block before a result's (or a retrieval's) only medium, but its
    price kept the block's wrapper: each such fragment was charged ~20-30 tokens no renderer sent,
    and a budget that held the request left it out. The same run with words beside the media
    sends them in a data block: it is charged exactly that block more (its wrapper and words)."""
    run = _priced_run(store, "alone", "", is_error=is_error)
    alone = run.build(provider, window=60_000, reserve=2_000, record=False).manifest
    said = _priced_run(store, "said", "seen", is_error=is_error).build(
        provider, window=60_000, reserve=2_000, record=False).manifest
    for layer, fid, label in (("observations", "e4", "tool_result"), ("retrieval", "e5", "evidence")):
        words = {f.id: f.tokens for f in said.fragments}[fid] - {f.id: f.tokens for f in alone.fragments}[fid]
        assert words == 2  # "seen one", "seen two"
        assert said.layer_tokens[layer] - alone.layer_tokens[layer] == words + _data_block_tokens(
            said, fid, label), (layer, alone.layer_tokens, said.layer_tokens)
    # a budget that holds the request of media alone exactly keeps all of it, nothing reduced
    budget = said.selected_tokens - sum(2 + _data_block_tokens(said, fid, label)
                                        for fid, label in (("e4", "tool_result"), ("e5", "evidence")))
    built = run.build(provider, window=budget + 2_000, reserve=2_000, record=False)
    assert built.manifest.selected_tokens == budget
    assert {"e4", "e5"} <= {f.id for f in built.manifest.fragments} and not built.manifest.truncations
    if provider != "neutral":
        assert validate_sdk_types(provider, built.request)

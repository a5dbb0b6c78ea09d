"""A reply of more tool calls than OpenAI Chat takes in one message is sent, not refused.

Chat Completions answers 400 "Invalid 'messages[2].tool_calls': array too long. Expected an array
with maximum length 128" (``MAX_CHAT_TOOL_CALLS``). A log imported from a runtime or provider that
allowed more (or a model's large parallel batch) made every openai-chat build of the run a
RenderError. Now such a reply goes as consecutive assistant messages of at most 128 calls, its
text in the first, each followed by its own calls' tool messages: every call keeps its answer,
the protocol check and the SDK types take the body, and the manifest counts the further message.

OpenAI Responses (one ``function_call`` item per call), Anthropic (``tool_use`` blocks) and Gemini
(``functionCall`` parts) document no count per turn: their requests keep the reply whole.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.api import Run, Store, open_store
from contextfold.domain.events import (
    ModelResponse,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.projections.builder import BuildResult
from contextfold.projections.call_id_prices import (
    ANTHROPIC_TOOL_RESULT_FRAMING,
    ANTHROPIC_TOOL_USE_FRAMING,
    CHAT_CALL_FRAMING,
)
from contextfold.projections.framing import MESSAGE_OVERHEAD
from contextfold.projections.render import check_protocol, validate_sdk_types
from contextfold.projections.render.tool_checks import MAX_CHAT_TOOL_CALLS
from contextfold.projections.tokens import get_counter
from contextfold.projections.tool_pricing import FUNC_END
from tests.request_calls import calls_and_answers
from tests.unit.test_media import image_bytes

MODELS = {"openai-chat": "gpt-4o", "openai-responses": "gpt-4o", "anthropic": "claude-sonnet-4-5",
          "gemini": "gemini-2.5-pro"}
CALLS = 200


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(f"sqlite:///{tmp_path / 'wide.db'}")


def _wide_run(store: Store, *, shot_at: int | None = None) -> Run:
    """A run whose model stats 200 files in one parallel batch; ``shot_at``: the call whose result
    also returns a screenshot."""
    run = store.run("wide")
    run.append(ToolsRegistered(tools=(ToolSpec(name="stat", description="Stat a file", parameters={
        "type": "object", "properties": {"path": {"type": "string"}}}),)))
    run.append(UserInput("stat every file in the tree"))
    run.append(ModelResponse(text="Statting all of them at once.", tool_calls=[
        ToolCall(call_id=f"call_{i}", name="stat", arguments=json.dumps({"path": f"src/f{i}.py"}))
        for i in range(CALLS)]))
    for i in range(CALLS):
        blocks = (store.attach_image(image_bytes("PNG", (16, 16))),) if i == shot_at else ()
        run.append(ToolResult(call_id=f"call_{i}", content=f"size {i * 7} bytes", blocks=blocks))
    return run


def _preview(run: Run, provider: str) -> BuildResult:
    built = run.preview(provider, model=MODELS[provider], window=400_000, reserve=4_000)
    assert validate_sdk_types(provider, built.request)
    check_protocol(provider, built.request)
    return built


@pytest.mark.parametrize("provider", list(MODELS))
def test_200_parallel_calls_are_sent_each_with_its_answer(store: Store, provider: str) -> None:
    body = _preview(_wide_run(store), provider).request
    asked, answers = calls_and_answers(provider, body)
    answered = [call_id for call_id, _ in answers]
    ids = [f"call_{i}" for i in range(CALLS)]
    assert sorted(asked) == sorted(ids) and sorted(answered) == sorted(ids)
    assert "Statting all of them at once." in json.dumps(body)


def test_openai_chat_sends_the_batch_as_messages_of_at_most_128_calls_each_answered_after_it(
        store: Store) -> None:
    messages = _preview(_wide_run(store), "openai-chat").request["messages"]
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    second = first + 1 + MAX_CHAT_TOOL_CALLS
    rest = CALLS - MAX_CHAT_TOOL_CALLS
    assert [m["role"] for m in messages[first:]] == (
        ["assistant"] + ["tool"] * MAX_CHAT_TOOL_CALLS + ["assistant"] + ["tool"] * rest)
    for start, ids in ((first, range(MAX_CHAT_TOOL_CALLS)), (second, range(MAX_CHAT_TOOL_CALLS, CALLS))):
        calls = messages[start]["tool_calls"]
        assert [c["id"] for c in calls] == [f"call_{i}" for i in ids]
        answers = messages[start + 1:start + 1 + len(calls)]
        assert [m["tool_call_id"] for m in answers] == [f"call_{i}" for i in ids]
        assert all(f"size {i * 7} bytes" in m["content"] for i, m in zip(ids, answers, strict=True))
    assert messages[first]["content"] == "Statting all of them at once."
    assert messages[second]["content"] is None  # the text once, in the first part


def test_the_other_providers_keep_the_batch_in_one_turn(store: Store) -> None:
    run = _wide_run(store)
    responses = _preview(run, "openai-responses").request["input"]
    kinds = [item.get("type") for item in responses]
    start = kinds.index("function_call")
    assert kinds[start:] == ["function_call"] * CALLS + ["function_call_output"] * CALLS
    anthropic = _preview(run, "anthropic").request["messages"]
    assert [sum(b.get("type") == "tool_use" for b in m["content"]) for m in anthropic
            if m["role"] == "assistant"] == [CALLS]
    gemini = _preview(run, "gemini").request["contents"]
    assert [sum("functionCall" in p for p in c["parts"]) for c in gemini if c["role"] == "model"] == [CALLS]


def test_the_manifest_counts_the_further_chat_message(store: Store) -> None:
    """The second assistant message's framing is counted for openai-chat (and the neutral build,
    which pays the dearest provider's), not for the providers that send one turn. (Anthropic's
    overhead also holds its tool-use system prompt and its calls' and results' markup, Gemini's the
    name each result repeats.)"""
    run = _wide_run(store)
    built = {p: run.preview(p, model=MODELS.get(p), window=400_000, reserve=4_000).manifest
             for p in (*MODELS, "neutral")}
    overhead = {p: m.overhead_tokens for p, m in built.items()}
    assert overhead["neutral"] == overhead["openai-responses"] + MESSAGE_OVERHEAD
    # gpt-4o's Chat calls are billed without their ids, a call's framing instead
    # (``call_id_prices.chat_ids_unsent``): each id is shown twice to the other providers
    ids = 2 * sum(get_counter(built["neutral"].encoding).count(f"call_{i}") for i in range(CALLS))
    # and its tools, priced at their rendering, pay the functions' closing once (``tool_bill``)
    assert overhead["openai-chat"] == overhead["neutral"] - ids + CALLS * CHAT_CALL_FRAMING + FUNC_END
    prompt = built["anthropic"].layer_tokens["tools"] - built["anthropic"].tool_tokens
    assert prompt == 527  # claude-sonnet-4-5 (tool_prompt.MEASURED_TOOL_PROMPT)
    names = CALLS * get_counter(built["gemini"].encoding).count("stat")  # each result names it again
    # and Claude's markup around each call and its result (``call_id_prices.anthropic_block_tokens``)
    markup = CALLS * (ANTHROPIC_TOOL_USE_FRAMING + ANTHROPIC_TOOL_RESULT_FRAMING)
    assert (overhead["anthropic"] - prompt - markup == overhead["gemini"] - names
            == overhead["openai-responses"])


def test_media_a_tool_of_the_batch_returned_follow_the_last_part(store: Store) -> None:
    """A ``tool`` message takes text only: the screenshot call 5 returned goes in one user message
    after the last tool message of the batch, as for a batch sent whole."""
    messages = _preview(_wide_run(store, shot_at=5), "openai-chat").request["messages"]
    roles = [m["role"] for m in messages]
    assert roles[-1] == "user" and roles[-2] == "tool" and roles.count("assistant") == 2
    assert any(p.get("type") == "image_url" for p in messages[-1]["content"])
    assert "call_5" in json.dumps(messages[-1]["content"])


def test_later_builds_from_kept_renders_still_split_the_batch(store: Store) -> None:
    """The render of a message is kept per message object: a later build made of kept dicts must
    still send the batch split (and a new turn after it renders as before)."""
    run = _wide_run(store)
    _preview(run, "openai-chat")
    run.append(ModelResponse(text="All statted."))
    run.append(UserInput("now the biggest one?"))
    for _ in range(2):
        messages = _preview(run, "openai-chat").request["messages"]
        assert [len(m.get("tool_calls") or ()) for m in messages if m["role"] == "assistant"] == [
            MAX_CHAT_TOOL_CALLS, CALLS - MAX_CHAT_TOOL_CALLS, 0]
        assert messages[-1] == {"role": "user", "content": "now the biggest one?"}

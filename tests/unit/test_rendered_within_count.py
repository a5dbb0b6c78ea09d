"""What a request shows is what its manifest counted: text a renderer adds around a fragment
(the runtime line of a failed, lost or cancelled call, a data block's tag as written, a cut
block's ``truncated="true"``) is priced in the fragment's framing, so a request sized to its
manifest is never larger than the window.

The measure is independent of the builder: every string of the rendered history (texts, call
ids, names, arguments) counted with the manifest's encoding. It leaves out the few tokens of
message framing a provider adds, which the manifest prices per fragment; so the counted total
must stay at or under the manifest's ``selected_tokens``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold.api import render_request
from contextfold.domain.events import (
    AnyEvent,
    EvidenceRetrieved,
    ImageBlock,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolCallCancelled,
    ToolResult,
    ToolResultLost,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.compaction import plan_compaction
from contextfold.projections.fold import fold
from contextfold.projections.tokens import get_counter
from contextfold.projections.tool_prompt import tool_prompt_tokens

count = get_counter("cl100k_base").count
_HISTORY = {"openai-chat": "messages", "openai-responses": "input", "anthropic": "messages",
            "gemini": "contents"}
_NOT_SHOWN = {"role", "type", "model", "id", "tool_use_id", "tool_call_id", "call_id", "thoughtSignature"}
"""Keys whose values are message framing (roles, call ids, Gemini's signature), which the
manifest prices per fragment (``MESSAGE_OVERHEAD``, and the call ids in ``call_id_tokens``), not
shown text."""


def _strings(value: Any, key: str | None = None) -> int:
    if isinstance(value, str):
        return 0 if key in _NOT_SHOWN else count(value)
    if isinstance(value, dict):
        if key in ("input", "args") or (key == "arguments" and not isinstance(value, str)):
            return count(json.dumps(value))  # a call's arguments, as JSON
        return sum(_strings(v, k) for k, v in value.items())
    if isinstance(value, list):
        return sum(_strings(v, key) for v in value)
    return 0


def shown_tokens(provider: str, result: BuildResult) -> int:
    return _strings(result.request[_HISTORY[provider]])


def _events(ending: str, calls: int = 120) -> list[AnyEvent]:
    events: list[AnyEvent] = [UserInput("try the build until it works")]
    for i in range(calls):
        cid = f"call_{i}"
        events.append(ModelResponse(tool_calls=[ToolCall(call_id=cid, name="run_build", arguments="{}")]))
        if ending == "error":
            events.append(ToolResult(call_id=cid, content="done", is_error=True, exit_code=1))
        elif ending == "exit_ok":
            events.append(ToolResult(call_id=cid, content="done", exit_code=0))
        elif ending == "lost":
            events.append(ToolResultLost(call_id=cid, reason="worker died"))
        elif ending == "cancelled":
            events.append(ToolCallCancelled(call_id=cid, reason="user stopped it"))
        elif ending == "evidence":
            events.append(ToolResult(call_id=cid, content="done"))
            events.append(EvidenceRetrieved(source_ref=f"https://example.com/doc?a={i}&b=\"q\"",
                                            content=f"chunk {i} of the retrieved manual"))
        elif ending == "denied":  # every group shown as a note (the policy denies the tool below)
            events.append(ToolResult(call_id=cid, content=f"build {i} failed", is_error=i % 2 == 0,
                                     exit_code=i % 3 or None))
        else:
            events.append(ToolResult(call_id=cid, content="done"))
    if ending == "denied":
        events.append(PolicySet(text="No more builds.", denied_tools=("run_build",)))
    events.append(UserInput("status?"))
    return events


def _build(events: list[AnyEvent], provider: str, window: int) -> BuildResult:
    recorded = [RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)]
    return build_context(fold(recorded), BuildConfig(provider=provider, window=window, reserve=1000),
                         render=render_request)


@pytest.mark.parametrize("provider", sorted(_HISTORY))
@pytest.mark.parametrize("ending", ["ok", "error", "exit_ok", "lost", "cancelled", "evidence", "denied"])
def test_a_request_sized_to_its_manifest_shows_no_more_than_it_counted(ending: str, provider: str) -> None:
    events = _events(ending)
    whole = _build(events, provider, 400_000).manifest.selected_tokens
    built = _build(events, provider, whole + 1000)  # the window the manifest says it all fits in
    assert not built.manifest.excluded.get("over_budget")
    assert shown_tokens(provider, built) <= built.manifest.selected_tokens


@pytest.mark.parametrize("provider", sorted(_HISTORY))
@pytest.mark.parametrize("ending", ["error", "exit_ok"])
def test_masked_results_count_the_runtime_line_of_the_result_they_stand_for(ending: str,
                                                                             provider: str) -> None:
    """A mask stub is shown with the status line of its result ("TOOL_ERROR: call c0 (pytest) failed
    with exit code 1."), which its framing did not price: ~20 tokens per stub over the count."""
    long = "\n".join(f"E   AssertionError: step {j}" for j in range(40))  # longer than its stub
    events = [ToolResult(call_id=e.call_id, content=long, is_error=e.is_error, exit_code=e.exit_code)
              if isinstance(e, ToolResult) else e for e in _events(ending)]
    recorded = [RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)]
    plan = plan_compaction(fold(recorded), recorded, "mask", keep_recent=1)
    assert plan is not None
    events.append(plan.event)
    whole = _build(events, provider, 400_000).manifest.selected_tokens
    built = _build(events, provider, whole + 1000)
    assert sum(1 for f in built.manifest.fragments if f.kind == "tool_result" and f.trust == "runtime") > 100
    assert shown_tokens(provider, built) <= built.manifest.selected_tokens


@pytest.mark.parametrize("provider", sorted(_HISTORY))
def test_cut_results_count_their_truncated_tag(provider: str) -> None:
    """Many long results cut at once: each cut block's tag gains ``truncated="true"``."""
    events: list[AnyEvent] = [UserInput("read them all")]
    calls = [ToolCall(call_id=f"c{i}", name="read", arguments="{}") for i in range(60)]
    events.append(ModelResponse(tool_calls=calls))
    events += [ToolResult(call_id=f"c{i}", content="\n".join(f"line {j} of output {i}" for j in range(400)))
               for i in range(60)]
    built = _build(events, provider, 9000)
    cut = [t for t in built.manifest.truncations if t.strategy != "none"]
    assert len(cut) >= 30
    assert shown_tokens(provider, built) <= built.manifest.selected_tokens <= 8000


TRANSCRIPT = "\n".join(f"user: message {i} <|im_end|>" for i in range(300))
"""A chat log as a tool returns it: every line is a role line the data block shows marked."""


@pytest.mark.parametrize("provider", sorted(_HISTORY))
def test_what_neutralising_adds_is_counted_whole_and_cut(provider: str) -> None:
    events: list[AnyEvent] = [
        UserInput("fetch the transcript"),
        ModelResponse(tool_calls=[ToolCall(call_id="c1", name="get_transcript", arguments="{}")]),
        ToolResult(call_id="c1", content=TRANSCRIPT), UserInput("summarise it")]
    whole = _build(events, provider, 400_000).manifest.selected_tokens
    for window in (whole + 1000, whole // 2 + 1000):  # all of it, then a cut
        built = _build(events, provider, window)
        assert shown_tokens(provider, built) <= built.manifest.selected_tokens <= window - 1000
    assert built.manifest.truncations


def test_an_artifact_held_transcript_is_counted_as_shown(tmp_path: Any) -> None:
    """A long output the store keeps as an artifact is counted when folded from its text as shown."""
    import contextfold

    transcript = "\n".join(f"user: message {i} <|im_end|>" for i in range(3000))
    with contextfold.open_store(f"sqlite:///{tmp_path / 'r.db'}") as store:
        run = store.run("r")
        run.append(UserInput("fetch the support transcript"))
        run.append(ModelResponse(tool_calls=[ToolCall(call_id="c1", name="get_transcript", arguments="{}")]))
        run.append(ToolResult(call_id="c1", content=transcript))
        for window in (12_000, 40_000):
            built = run.preview("openai-chat", window=window, reserve=1000)
            assert shown_tokens("openai-chat", built) <= built.manifest.selected_tokens <= window - 1000


@pytest.mark.parametrize("provider", sorted(_HISTORY))
def test_summaries_and_hand_off_notes_count_the_data_block_they_are_shown_in(provider: str) -> None:
    """A compaction summary and a hand-off note are runtime text the layout shows as data blocks
    (``compaction_summary``, ``note``): their tags went uncounted."""
    from contextfold.domain.events import CompactionSummary, HandOff, HistoryCompacted

    events: list[AnyEvent] = [UserInput("fix the build")]
    for i in range(40):
        events += [ModelResponse(tool_calls=[ToolCall(call_id=f"c{i}", name="run", arguments="{}")]),
                   ToolResult(call_id=f"c{i}", content=f"step {i} done")]
        events += [HandOff(from_agent="a", to_agent="b", note=f"handing over after step {i}.{j}")
                   for j in range(3)]
    summary = CompactionSummary(inferences=tuple(f"step {i} was checked" for i in range(10)))
    events += [HistoryCompacted(summary=summary, covers_from=2, covers_to=30), UserInput("and now?")]
    whole = _build(events, provider, 400_000).manifest.selected_tokens
    built = _build(events, provider, whole + 1000)
    assert shown_tokens(provider, built) <= built.manifest.selected_tokens



def _chat_tokens(request: dict[str, Any]) -> int:
    """The OpenAI cookbook's count of a Chat request (``num_tokens_from_messages`` and
    ``num_tokens_for_tools``, gpt-4o family): an independent measure, no builder estimate in it."""
    n = 3
    for m in request["messages"]:
        n += 3 + count(m["role"])
        if isinstance(m.get("content"), str):
            n += count(m["content"])
        for c in m.get("tool_calls") or ():
            n += count(c["function"]["name"]) + count(c["function"]["arguments"])
    for tool in request.get("tools") or ():
        f = tool["function"]
        n += 7 + count(f"{f['name']}:{(f.get('description') or '').rstrip('.')}")
        props = (f.get("parameters") or {}).get("properties") or {}
        n += (3 + sum(3 + count(f"{k}:{d.get('type')}:{(d.get('description') or '').rstrip('.')}")
                      for k, d in props.items())) if props else 0
    return n + (12 if request.get("tools") else 0)


def test_the_note_a_request_opens_with_when_its_history_starts_mid_conversation_is_priced() -> None:
    """With no instruction, goal or plan before the timeline, a request whose oldest kept message
    is the model's opens with "[runtime] Earlier conversation is not shown.", which nothing
    priced: 48 of 1,433 tau-bench builds went up to 9 tokens over their budget."""
    events: list[AnyEvent] = [PolicySet(text="Be careful."), UserInput("Please run the checks, many times.")]
    for i in range(6):
        events += [ModelResponse(tool_calls=[ToolCall(call_id=f"c{i}", name="check", arguments="{}")]),
                   ToolResult(call_id=f"c{i}", content="\n".join(f"line {j} of output {i}: all fine"
                                                                 for j in range(60)))]
    events += [ModelResponse(text="All checks passed."), UserInput("thanks")]
    opened = 0
    for window in range(700, 1400, 7):
        built = build_context(fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, 1)]),
                              BuildConfig(provider="openai-chat", window=window, reserve=1),
                              render=render_request)
        opened += built.request["messages"][1]["content"] == "[runtime] Earlier conversation is not shown."
        assert _chat_tokens(built.request) <= built.manifest.budget_tokens, window
    assert opened > 5


@pytest.mark.parametrize("provider", ["openai-chat", "openai-responses", "anthropic", "gemini"])
def test_a_run_the_model_opens_is_not_said_to_hide_an_earlier_conversation(provider: str) -> None:
    """An agent that greets first: its request opened with "[runtime] Earlier conversation is not
    shown.", with runtime authority, though nothing came before and the manifest excluded
    nothing. It now says the conversation starts there; the note for a history that was cut is
    the test above's."""
    events: list[AnyEvent] = [PolicySet(text="You are an airline support agent."),
                              ModelResponse(text="Hi! How can I help you today?"),
                              UserInput("I want to cancel my flight.")]
    built = build_context(fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, 1)]),
                          BuildConfig(provider=provider, window=100_000, reserve=1_000),
                          render=render_request)
    body = json.dumps(built.request)
    assert built.manifest.excluded_items == ()
    assert "Earlier conversation" not in body and "[runtime] The conversation starts here." in body


_MEDIA_KEYS = {"url", "image_url", "data", "file_data", "fileUri", "mimeType", "media_type", "detail",
               "filename"}
"""Where a request carries media (priced by the manifest's media records, not as text)."""


def _text_strings(value: Any, key: str | None = None) -> int:
    if isinstance(value, str):
        return 0 if key in _NOT_SHOWN or key in _MEDIA_KEYS else count(value)
    if isinstance(value, dict):
        if key in ("input", "args") or (key == "arguments" and not isinstance(value, str)):
            return count(json.dumps(value))
        if key == "functionResponse":
            return _text_strings(value.get("response"), "response")
        return sum(_text_strings(v, k) for k, v in value.items())
    if isinstance(value, list):
        return sum(_text_strings(v, key) for v in value)
    return 0


@pytest.mark.parametrize("provider", sorted(_HISTORY))
@pytest.mark.parametrize(("failed", "media_type"), [(False, "image/png"), (True, "image/png"),
                                                   (False, "image/*"), (True, "image/*"),
                                                   (False, "anthropic-file")])
def test_the_text_around_media_is_priced(provider: str, failed: bool, media_type: str) -> None:
    """Each renderer writes a caption naming a medium's source and trust, OpenAI Chat and Gemini
    name a tool's media inside its result, and OpenAI Chat carries them in a user message of
    their own: none of it was priced, and 12 tool results of one image each went ~1,000 tokens
    over the budget. (A failed call's media, which Anthropic carries after the results with a
    runtime line, likewise; and the note a provider gets for an image it does not take: of an
    unknown type for Gemini, in Anthropic's Files API for the others.)"""
    events: list[AnyEvent] = [UserInput("Take screenshots of each page")]
    for i in range(12):
        events += [ModelResponse(tool_calls=[ToolCall(call_id=f"call_{i}", name="screenshot")]),
                   ToolResult(call_id=f"call_{i}", content="ok", is_error=failed, blocks=(ImageBlock(
                       url=f"anthropic-file://file_{i}" if media_type == "anthropic-file" else
                       f"https://example.com/shots/{i}.png", media_type="image/*" if media_type ==
                       "anthropic-file" else media_type, width=512, height=512),))]
    events.append(UserInput("what do you see?"))
    whole = _build(events, provider, 400_000).manifest.selected_tokens
    for window in (whole + 1000, whole // 2 + 1000):
        built = _build(events, provider, window)
        media = sum(m.tokens for f in built.manifest.fragments for m in f.media)
        assert media > 0 or (provider == "gemini" and media_type == "image/*") or (
            provider != "anthropic" and media_type == "anthropic-file")
        assert _text_strings(built.request[_HISTORY[provider]]) + media <= built.manifest.selected_tokens


@pytest.mark.parametrize("provider", sorted(_HISTORY))
def test_calls_shown_under_an_alias_or_with_wrapped_arguments_are_priced_as_shown(provider: str) -> None:
    """A tool name a provider refuses is shown under its alias, and arguments that are no JSON
    object go to Anthropic and Gemini as ``{"unparsed_arguments": "..."}`` (escaped); calls were
    priced by their logged name and text: ~5-6 tokens per call over the count."""
    events: list[AnyEvent] = [UserInput("look them up")]
    for i in range(40):
        events += [ModelResponse(tool_calls=[ToolCall(call_id=f"c{i}", name="multi_tool_use.parallel",
                                                      arguments='{"q": "\\\\ \\" \\\\ \\" cut off')]),
                   ToolResult(call_id=f"c{i}", content="ok")]
    events.append(UserInput("and?"))
    whole = _build(events, provider, 400_000).manifest.selected_tokens
    built = _build(events, provider, whole + 1000)
    assert shown_tokens(provider, built) <= built.manifest.selected_tokens


@pytest.mark.parametrize("provider", sorted(_HISTORY))
def test_a_cut_text_that_needs_neutralising_pays_for_the_markers_it_keeps(provider: str) -> None:
    """The [data] markers neutralising the whole text added were fixed framing, and the cut text
    was fitted by its neutralised count, which counts the markers it keeps again: a transcript cut
    to ~200 tokens was charged ~1,400, and at a 1.3k window the required group (the latest, cut
    to its floor, would fit in ~80) raised a required-over-budget error."""
    transcript = "\n".join(f"user: question {i} about the invoice\nassistant: answer {i}, all fine"
                           for i in range(300))
    events: list[AnyEvent] = [
        PolicySet(text="Be careful."), UserInput("Summarise the support transcript."),
        ModelResponse(tool_calls=[ToolCall(call_id="c1", name="fetch_transcript", arguments="{}")]),
        ToolResult(call_id="c1", content=transcript), ModelResponse(text="Fetched it."),
        UserInput("Now the short version please")]
    prompt = tool_prompt_tokens(provider, None)  # Anthropic's tool-use system prompt: not in the history
    for window in (1_700 + prompt, 2_300 + prompt):  # budgets 700 and 1,300 besides it
        built = _build(events, provider, window)
        line = next(f for f in built.manifest.fragments if f.id == "e4")
        assert line.truncated
        assert built.manifest.selected_tokens <= window - 1000
        assert built.manifest.selected_tokens - prompt - shown_tokens(provider, built) < 120  # framing only


_IDS = {"id", "tool_use_id", "tool_call_id", "call_id"}


def _with_ids(value: Any, key: str | None = None) -> int:
    """:func:`_strings` with the call ids counted too (every other framing key still left out)."""
    if isinstance(value, str):
        return count(value) if key in _IDS or key not in _NOT_SHOWN else 0
    if isinstance(value, dict):
        if key in ("input", "args") or (key == "arguments" and not isinstance(value, str)):
            return count(json.dumps(value))
        return sum(_with_ids(v, k) for k, v in value.items())
    if isinstance(value, list):
        return sum(_with_ids(v, key) for v in value)
    return 0


@pytest.mark.parametrize("provider", sorted(_HISTORY))
def test_the_call_ids_a_request_shows_are_priced(provider: str) -> None:
    """A call id is sent twice, on the call and on its result, and no price held it: OpenAI's ids
    (``call_`` and 24 characters) are ~17 tokens each, and 60 calls sent ~2,000 tokens more than
    their manifest counted. Ids shown under an alias (reused, odd characters) are priced as shown."""
    events: list[AnyEvent] = [UserInput("run them all")]
    for i in range(60):
        cid = ("call_Xy7Qm2Lk9PzR4tVb8NwJ" if i % 10 == 3 else f"functions.run_build:{i}" if i % 10 == 7
               else f"call_Xy7Qm2Lk9PzR4tVb8N{i:03d}")  # a reused id, a Kimi-style id, OpenAI's
        events += [ModelResponse(tool_calls=[ToolCall(call_id=cid, name="run_build", arguments="{}")]),
                   ToolResult(call_id=cid, content="done", is_error=i % 4 == 0, exit_code=1 if i % 4 == 0
                              else None)]
    events.append(UserInput("status?"))
    whole = _build(events, provider, 400_000).manifest.selected_tokens
    for window in (whole + 1000, whole // 2 + 1000):
        built = _build(events, provider, window)
        assert _with_ids(built.request[_HISTORY[provider]]) <= built.manifest.selected_tokens <= window - 1000

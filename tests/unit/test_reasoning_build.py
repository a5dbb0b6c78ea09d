"""Provider reasoning from the log to the request: sent back verbatim to the provider that made it,
where it stood in the turn, priced in the turn's fragment, named in the manifest; left out (and
unpriced, and said so) for any other provider. Every request is checked with the official SDK
request types (``render_request`` validates)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from contextfold.api import render_request
from contextfold.cli_build import manifest_table
from contextfold.domain.errors import RenderError
from contextfold.domain.events import (
    AnthropicReasoning,
    AnyEvent,
    GeminiReasoning,
    GeminiSignature,
    ModelResponse,
    OpenAIResponsesReasoning,
    Reasoning,
    ReasoningItem,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, ManifestFragment
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold
from contextfold.projections.reasoning import reasoning_tokens
from contextfold.projections.render import check_protocol
from contextfold.projections.render.gemini import SKIP_THOUGHT_SIGNATURE
from contextfold.projections.state import RunState
from contextfold.projections.tokens import get_counter

count = get_counter("cl100k_base").count
PROVIDERS = ("anthropic", "gemini", "neutral", "openai-chat", "openai-responses")
THINKING = {"type": "thinking", "thinking": "I should read the file before answering. " * 40,
            "signature": "EqQBCkYIBxgCKkB+nd2rEw5Uabc/def=" * 8}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a" * 6}
OPENAI_ITEM = {"type": "reasoning", "id": "rs_0340ae",
               "summary": [{"type": "summary_text", "text": "Read it."}],
               "encrypted_content": "gAAAAABqchYqlw1tH_IUQkDiR" * 10}
ANTHROPIC = AnthropicReasoning(items=(ReasoningItem(raw=THINKING),
                                      ReasoningItem(before_call=1, raw=REDACTED)))
OPENAI = OpenAIResponsesReasoning(items=(ReasoningItem(raw=OPENAI_ITEM),))
SIGNATURE = base64.b64encode(bytes(range(7, 250))).decode()
"""A Gemini signature is base64 (the SDK type checks it): 243 opaque bytes."""
GEMINI = GeminiReasoning(signatures=(GeminiSignature(signature=SIGNATURE, call=1),))


def _events(reasoning: Reasoning | None, *, calls: int = 2) -> list[AnyEvent]:
    ids = [f"c{i}" for i in range(calls)]
    extra: dict[str, Any] = {} if reasoning is None else {"reasoning": reasoning}
    return [UserInput("Read both files and tell me what differs."),
            ModelResponse(text="Reading them.", tool_calls=tuple(
                ToolCall(call_id=c, name="read_file", arguments=f'{{"path":"{c}.txt"}}') for c in ids),
                **extra),
            *(ToolResult(call_id=c, content=f"contents of {c}") for c in ids)]


def _state(events: list[AnyEvent]) -> RunState:
    return fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])


def _build(state: RunState, provider: str, window: int = 100_000) -> BuildResult:
    return build_context(state, BuildConfig(provider=provider, window=window, reserve=1000),
                         render=render_request)


def _payload(reasoning: Reasoning) -> str:
    """The opaque part of a reasoning: a signature, an encrypted content."""
    if isinstance(reasoning, GeminiReasoning):
        return reasoning.signatures[0].signature
    raw = reasoning.items[0].raw
    return str(raw.get("signature") or raw["encrypted_content"])


def _line(result: BuildResult, fid: str = "e2") -> ManifestFragment:
    return next(f for f in result.manifest.fragments if f.id == fid)


def _assistant(request: dict[str, Any], key: str, role: str) -> list[dict[str, Any]]:
    return next(m["content" if key == "messages" else "parts"] for m in request[key] if m["role"] == role)


def test_anthropic_gets_its_thinking_back_verbatim_first_and_between_the_calls_it_stood_between() -> None:
    request = _build(_state(_events(ANTHROPIC)), "anthropic").request
    blocks = _assistant(request, "messages", "assistant")
    assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use", "redacted_thinking", "tool_use"]
    assert blocks[0] == THINKING and blocks[3] == REDACTED  # not a byte edited, nothing added


def test_a_thinking_turn_merged_after_a_text_reply_still_starts_with_its_thinking() -> None:
    """Two replies in a row (a hand-off's text, then a thinking turn with calls) are one Anthropic
    assistant message: the merge put the thinking after the text, where Anthropic wants the turn
    before the tool results to start with it (review)."""
    events = _events(ANTHROPIC)
    events[1:1] = [ModelResponse(text="Let me check.")]
    request = _build(_state(events), "anthropic").request
    blocks = _assistant(request, "messages", "assistant")
    assert [b["type"] for b in blocks] == ["thinking", "text", "text", "tool_use", "redacted_thinking",
                                           "tool_use"]
    assert blocks[0] == THINKING


def test_two_merged_thinking_turns_carry_the_newest_ones_thinking_only_first() -> None:
    """Two replies in a row that both think are one Anthropic assistant message: the merge kept the
    first turn's thinking first and put the second one's after the first one's text, a sequence no
    response produced, and Anthropic checks the latest assistant message's thinking against the
    response that made it. The message now carries the thinking of the newest turn (the one whose
    calls the tool loop continues), first; the earlier, finished turn's is left out (the API strips
    a finished turn's thinking anyway)."""
    earlier = dict(THINKING, thinking="First I answer the greeting.", signature="EqQBearlier" * 8)
    events = _events(ANTHROPIC)
    events[1:1] = [ModelResponse(text="Hello.", reasoning=AnthropicReasoning(
        items=(ReasoningItem(raw=earlier),)))]
    request = _build(_state(events), "anthropic").request
    blocks = _assistant(request, "messages", "assistant")
    assert [b["type"] for b in blocks] == ["thinking", "text", "text", "tool_use", "redacted_thinking",
                                           "tool_use"]
    assert blocks[0] == THINKING and blocks[4] == REDACTED and earlier not in blocks
    assert [b.get("text") for b in blocks[1:3]] == ["Hello.", "Reading them."]


def test_the_manifest_says_the_thinking_a_merge_leaves_out_was_not_sent() -> None:
    """The merge above leaves the earlier reply's thinking out of the body, and its manifest line
    still said "anthropic reasoning sent verbatim": an audit claimed the model saw it. So did the
    line of a reply with thinking alone (no text, no call), which the body leaves out whole. Each
    now says it was not sent, and why; the newest turn's line still says sent."""
    earlier = dict(THINKING, thinking="First I answer the greeting.", signature="EqQBearlier" * 8)
    silent = dict(THINKING, thinking="Nothing to add.", signature="EqQBsilent" * 8)
    events = _events(ANTHROPIC)
    events[1:1] = [
        ModelResponse(text="Hello.", reasoning=AnthropicReasoning(items=(ReasoningItem(raw=earlier),))),
        ModelResponse(text="", reasoning=AnthropicReasoning(items=(ReasoningItem(raw=silent),)))]
    built = _build(_state(events), "anthropic")
    notes = {f.id: f.reasoning for f in built.manifest.fragments if f.reasoning is not None}
    body = json.dumps(built.request)
    assert earlier["signature"] not in body and silent["signature"] not in body
    assert (notes["e2"] or "").startswith("anthropic reasoning not sent: 1 thinking block")
    assert "shares one assistant message with a later reply" in notes["e2"]
    assert "no text or call to carry it" in (notes["e3"] or "")
    newest = [n for fid, n in notes.items() if fid not in ("e2", "e3")]
    assert newest and all("sent verbatim" in n for n in newest)
    # the neutral conversation carries every reasoning, as its lines say
    neutral = _build(_state(events), "neutral").manifest.fragments
    assert all("sent verbatim" in f.reasoning for f in neutral if f.reasoning is not None)


def test_openai_responses_gets_its_reasoning_items_back_before_the_calls() -> None:
    items = _build(_state(_events(OPENAI)), "openai-responses").request["input"]
    kinds = [i["type"] for i in items]
    assert kinds[1:5] == ["reasoning", "message", "function_call", "function_call"]
    assert items[1] == OPENAI_ITEM


def test_openai_responses_reasoning_between_parallel_calls_goes_back_between_them() -> None:
    """A Responses turn whose output was [reasoning, call, reasoning, call] goes back in that order,
    the outputs after the calls, as a client that appends ``response.output`` and then its outputs
    sends it: the API finds each output's call by ``call_id``, and a reasoning item must precede
    the item it led to. The protocol check refused the renderer's own body ("function_call(s)
    ['c0'] are not answered before item 4 (reasoning)"), so the run could not be built for the
    provider that made it."""
    second = dict(OPENAI_ITEM, id="rs_0340af", encrypted_content="gAAAAABsecond" * 10)
    interleaved = OpenAIResponsesReasoning(items=(ReasoningItem(raw=OPENAI_ITEM),
                                                  ReasoningItem(before_call=1, raw=second)))
    items = _build(_state(_events(interleaved)), "openai-responses").request["input"]
    assert [i["type"] for i in items] == ["message", "reasoning", "message", "function_call", "reasoning",
                                          "function_call", "function_call_output", "function_call_output"]
    assert items[1] == OPENAI_ITEM and items[4] == second
    assert [items[3]["call_id"], items[5]["call_id"]] == ["c0", "c1"]


def test_the_responses_check_still_refuses_what_does_not_precede_a_call_of_the_open_turn() -> None:
    """What the check lets through an open turn is a reasoning item leading to its next call: a
    reasoning item after the turn's last call (it led to none) and a user message before the
    outputs are still refused, and an output still needs its call before it."""
    body = _build(_state(_events(OPENAI)), "openai-responses").request
    items = body["input"]
    assert [i["type"] for i in items][1:5] == ["reasoning", "message", "function_call", "function_call"]
    trailing = dict(body, input=[items[0], *items[2:5], items[1], *items[5:]])
    with pytest.raises(RenderError, match=r"not answered before item 4 \(reasoning\)"):
        check_protocol("openai-responses", trailing)
    question = {"type": "message", "role": "user", "content": "well?"}
    asked = dict(body, input=[*items[:5], question, *items[5:]])
    with pytest.raises(RenderError, match=r"not answered before item 5 \(message\)"):
        check_protocol("openai-responses", asked)
    early = dict(body, input=[*items[:3], items[5], items[3], items[4], *items[6:]])
    with pytest.raises(RenderError, match="has no open function_call before it"):
        check_protocol("openai-responses", early)


def test_gemini_gets_each_signature_back_on_the_part_it_came_on() -> None:
    parts = _assistant(_build(_state(_events(GEMINI)), "gemini").request, "contents", "model")
    signed = [p.get("thoughtSignature") for p in parts]
    # the text part, the first call (no signature of its own: the bypass), the second call (its own)
    assert signed == [None, SKIP_THOUGHT_SIGNATURE, GEMINI.signatures[0].signature]
    only_text = GeminiReasoning(signatures=(GeminiSignature(signature="dGV4dA=="),))
    parts = _assistant(_build(_state(_events(only_text)), "gemini").request, "contents", "model")
    assert parts[0] == {"text": "Reading them.", "thoughtSignature": "dGV4dA=="}


@pytest.mark.parametrize("reasoning", [ANTHROPIC, OPENAI, GEMINI], ids=lambda r: r.provider)
def test_another_providers_reasoning_is_never_sent_and_the_manifest_says_so(reasoning: Reasoning) -> None:
    """A hand-off: the request is byte for byte the one of the same log without reasoning, and the
    manifest line of the turn names what was left out."""
    state, plain = _state(_events(reasoning)), _state(_events(None))
    secret = _payload(reasoning)
    for provider in PROVIDERS:
        built = _build(state, provider)
        line = _line(built)
        assert line.reasoning is not None
        if provider in (reasoning.provider, "neutral"):
            assert line.reasoning.startswith(f"{reasoning.provider} reasoning sent verbatim")
            continue
        assert line.reasoning.startswith(f"{reasoning.provider} reasoning not sent")
        without = _build(plain, provider)
        assert built.request == without.request
        assert built.manifest.request_hash == without.manifest.request_hash
        assert line.tokens == _line(without).tokens
        assert secret not in json.dumps(built.request)
        assert _line(without).reasoning is None


@pytest.mark.parametrize("reasoning", [ANTHROPIC, OPENAI, GEMINI], ids=lambda r: r.provider)
def test_what_is_sent_is_priced_in_the_turns_fragment_for_its_provider_only(reasoning: Reasoning) -> None:
    """Built on ONE state for every provider in turn (a manifest line is shared by the providers'
    builds unless its tokens differ), the turn costs its reasoning for its provider and neutral only."""
    state, plain = _state(_events(reasoning)), _state(_events(None))
    extra = reasoning_tokens(reasoning, count)
    assert extra > 50
    for provider in (*PROVIDERS, *reversed(PROVIDERS)):
        built, without = _build(state, provider), _build(plain, provider)
        sent = provider in (reasoning.provider, "neutral")
        assert _line(built).tokens == _line(without).tokens + (extra if sent else 0)
        assert built.manifest.selected_tokens == without.manifest.selected_tokens + (extra if sent else 0)
        if sent:
            assert str(extra) in (_line(built).reasoning or "")


def test_a_gemini_signature_is_priced_at_a_third_of_its_tokens() -> None:
    """Gemini bills a ``thoughtSignature`` at most 27% of its tiktoken count (pydantic-ai's
    recordings, ``reasoning.GEMINI_SIGNATURE_SHARE``): each is priced at a third, rounded up, in
    the Gemini and neutral builds alike; it was priced whole, the median request at twice its
    count."""
    odd = base64.b64encode(bytes(range(9, 200))).decode()
    two = GeminiReasoning(signatures=(GeminiSignature(signature=SIGNATURE, call=0),
                                      GeminiSignature(signature=odd, call=1)))
    assert count(SIGNATURE) % 3 or count(odd) % 3  # a rounding to see
    assert reasoning_tokens(two, count) == -(-count(SIGNATURE) // 3) - (-count(odd) // 3)
    state, plain = _state(_events(two)), _state(_events(None))
    for provider in ("gemini", "neutral"):
        assert _line(_build(state, provider)).tokens - _line(_build(plain, provider)).tokens == (
            reasoning_tokens(two, count))


def _shown(value: Any, key: str | None = None) -> int:
    """Every string of the history as sent, counted (ids and Gemini's signature excepted: framing)."""
    if isinstance(value, str):
        framing = {"role", "type", "id", "tool_use_id", "call_id", "thoughtSignature"}
        return 0 if key in framing else count(value)
    if isinstance(value, dict):
        if key in ("input", "args"):
            return count(json.dumps(value))
        return sum(_shown(v, k) for k, v in value.items())
    if isinstance(value, list):
        return sum(_shown(v, key) for v in value)
    return 0


@pytest.mark.parametrize("provider", ["anthropic", "openai-responses"])
def test_a_request_sized_to_its_manifest_never_shows_more_than_it_counted(provider: str) -> None:
    """Many thinking turns in a long tool loop: the budget holds what is really sent, thinking and
    signatures included, and a tight window drops old turns whole (never a block cut)."""
    reasoning = ANTHROPIC if provider == "anthropic" else OPENAI
    events: list[AnyEvent] = [UserInput("Keep reading until the bug is found.")]
    for i in range(40):
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="read_file", arguments="{}"),),
                                 reasoning=reasoning),
                   ToolResult(call_id=f"c{i}", content=f"line {i} of the log")]
    state = _state(events)
    whole = _build(state, provider, 1_000_000).manifest.selected_tokens
    key = "messages" if provider == "anthropic" else "input"
    for window in (whole + 1000, whole // 3):
        built = _build(state, provider, window)
        assert _shown(built.request[key]) <= built.manifest.selected_tokens <= window - 1000
        sent = json.dumps(built.request)
        kept = sum(1 for f in built.manifest.fragments if f.reasoning is not None)
        assert sent.count(json.dumps(reasoning.items[0].raw["type"])) >= kept > 0
        if window < whole:
            assert built.manifest.excluded.get("over_budget")
            for f in built.manifest.fragments:  # each kept turn with all of its reasoning
                if f.reasoning is not None:
                    assert "sent verbatim" in f.reasoning


def test_the_neutral_conversation_carries_the_reasoning_and_openai_chat_has_nowhere_to_put_it() -> None:
    state = _state(_events(ANTHROPIC))
    neutral = _build(state, "neutral")
    assistant = next(m for m in neutral.conversation.messages if m.role == "assistant")
    assert assistant.reasoning == ANTHROPIC
    chat = _build(state, "openai-chat").request
    assert "thinking" not in json.dumps(chat["messages"][1]) and "redacted" not in json.dumps(chat)


def _thinking_loop(turns: int = 30) -> list[AnyEvent]:
    """A tool loop whose every turn thinks (longer and longer), under two user messages."""
    events: list[AnyEvent] = [UserInput("Find the failing test.")]
    for i in range(turns):
        thought = dict(THINKING, thinking=f"step {i}: " + "consider the log again. " * (5 * (i % 7)))
        reasoning = AnthropicReasoning(items=(ReasoningItem(raw=thought),))
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="pytest"),), reasoning=reasoning),
                   ToolResult(call_id=f"c{i}", content=f"run {i}\n" + "ok line\n" * (i % 5 * 10))]
        if i == turns // 2:
            events.append(UserInput("Keep going."))
    return events


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_a_larger_budget_never_drops_what_a_smaller_one_kept_with_reasoning(provider: str) -> None:
    """Reasoning is priced once per provider and never moves with the horizon: the selection
    promise holds whether the turns' thinking is sent (anthropic) or left out (gemini)."""
    state = _state(_thinking_loop())
    previous: set[str] | None = None
    for window in range(3000, 16000, 211):
        built = _build(state, provider, window)
        assert built.manifest.selected_tokens <= window - 1000
        kept = {f.id for f in built.manifest.fragments}
        if previous is not None:
            assert previous <= kept, (window, previous - kept)
        previous = kept


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_the_manifest_reason_and_table_give_the_tokens_the_build_counted(provider: str) -> None:
    """An optional turn's reason names its tokens as this provider's build priced them (a hand-off's
    without the reasoning it does not send), and the readable table lists each turn's reasoning."""
    built = _build(_state(_thinking_loop()), provider)
    optional = [f for f in built.manifest.fragments
                if f.reasoning and f.selection_reason.startswith("selected:")]
    assert len(optional) > 10
    for f in optional:
        assert f", {f.tokens} tokens," in f.selection_reason
    table = manifest_table(built.manifest)
    assert "\nreasoning:\n" in table
    verdict = "sent verbatim" if provider == "anthropic" else "not sent"
    assert table.count(f"anthropic reasoning {verdict}") == sum(
        1 for f in built.manifest.fragments if f.reasoning)
    plain = manifest_table(_build(_state(_events(None)), provider).manifest)
    assert "reasoning" not in plain


def _build_for(state: RunState, model: str | None) -> BuildResult:
    return build_context(state, BuildConfig(provider="openai-responses", model=model, window=100_000,
                                            reserve=1000), render=render_request)


def test_a_model_that_does_not_reason_is_sent_no_reasoning_items_and_is_not_charged_for_them() -> None:
    """A gpt-5 run falling back to gpt-4.1: OpenAI refuses every request carrying reasoning items
    for a model that does not reason (400). Built on ONE state, gpt-5 / gpt-4.1 / gpt-5 in turn:
    the fragment facts tables are shared by the builds of a provider, so what they key on must
    be what decides the price (the model), or the second gpt-5 build was priced as gpt-4.1's."""
    state, plain = _state(_events(OPENAI)), _state(_events(None))
    extra = reasoning_tokens(OPENAI, count)
    for model in ("gpt-5", "gpt-4.1", "openai/gpt-4o-mini", "gpt-5", "my-finetune", None, "gpt-4.1"):
        built, without = _build_for(state, model), _build_for(plain, model)
        kinds = [item["type"] for item in built.request["input"]]
        line = _line(built)
        assert line.reasoning is not None
        if model is not None and model.split("/")[-1].startswith("gpt-4"):
            assert "reasoning" not in kinds, model
            assert built.request == without.request
            assert built.manifest.selected_tokens == without.manifest.selected_tokens
            assert line.tokens == _line(without).tokens
            assert line.reasoning.startswith("openai-responses reasoning not sent")
            assert "the request's model is not a reasoning model" in line.reasoning
        else:  # a reasoning model, or one not known not to reason: as before
            assert kinds.count("reasoning") == 1, model
            assert built.manifest.selected_tokens == without.manifest.selected_tokens + extra
            assert line.reasoning.startswith("openai-responses reasoning sent verbatim")


UNSIGNED = {"type": "thinking", "thinking": "An unsigned thought."}
TRAILING = dict(OPENAI_ITEM, id="rs_trailing", encrypted_content="gAAAAABtrailing" * 10)


def _openai(*items: ReasoningItem) -> OpenAIResponsesReasoning:
    return OpenAIResponsesReasoning(items=items)


def _anthropic(*items: ReasoningItem) -> AnthropicReasoning:
    return AnthropicReasoning(items=items)


FIRST = ReasoningItem(raw=OPENAI_ITEM)
SIGNED = ReasoningItem(raw=THINKING)
REFUSED: list[tuple[Reasoning, Reasoning | None, str, str]] = [
    (_openai(FIRST, ReasoningItem(before_call=2, raw=TRAILING)), OPENAI, "gAAAAABtrailing",
     "reasoning item 2 stands after the response's last call"),
    (_openai(FIRST, ReasoningItem(before_call=5, raw=TRAILING)), OPENAI, "gAAAAABtrailing",
     "reasoning item 2 stands after call 5 of a response that made 2"),
    (_openai(ReasoningItem(raw=dict(TRAILING, bogus=1))), None, "gAAAAABtrailing",
     "reasoning item 1 holds 'bogus', which its request type does not take"),
    (_openai(FIRST, ReasoningItem(raw=dict(TRAILING, status=None))), OPENAI, "gAAAAABtrailing",
     "reasoning item 2 is not what its request type takes back (status: Input should be"),
    (_anthropic(SIGNED, ReasoningItem(before_call=1, raw=UNSIGNED)), _anthropic(SIGNED), "unsigned thought",
     "thinking block 2 is not what its request type takes back (signature: Field required)"),
    (_anthropic(ReasoningItem(raw={"type": "redacted_thinking", "payload": "EmwKsecret"})), None, "EmwK",
     "thinking block 1 is not what its request type takes back (data: Field required)"),
    (_anthropic(SIGNED, ReasoningItem(raw=dict(THINKING, cached=True))), _anthropic(SIGNED), '"cached"',
     "thinking block 2 holds 'cached', which its request type does not take"),
    (GeminiReasoning(signatures=(GEMINI.signatures[0], GeminiSignature(signature="not base64!", call=0))),
     GEMINI, "not base64!", "thought signature 2 is not base64"),
]


@pytest.mark.parametrize(("reasoning", "kept", "secret", "why"), REFUSED,
                         ids=lambda v: getattr(v, "provider", ""))
def test_a_log_holding_reasoning_its_provider_refuses_back_still_builds_without_it(
        reasoning: Reasoning, kept: Reasoning | None, secret: str, why: str) -> None:
    """A Responses item after the response's last call (the docstring allowed ``before_call ==
    calls``) was placed between the calls and their outputs, and the protocol check refused the
    body: every openai-responses build of the run failed, for good, as did every build of a log
    holding a thinking block without its signature, a signature that is not base64, or a key the
    SDK does not know. The append now refuses what no API takes back (``test_reasoning_events``),
    but a log may hold it: the fold leaves the piece out (neither sent nor priced: the request is
    the one of the log without it, checked with the SDK types) and its manifest line says why."""
    state = _state(_events(reasoning))
    built, without = _build(state, reasoning.provider), _build(_state(_events(kept)), reasoning.provider)
    assert secret not in json.dumps(built.request)
    assert built.request == without.request
    line = _line(built)
    assert line.tokens == _line(without).tokens
    assert f"{reasoning.provider} reasoning left out of every request: {why}" in (line.reasoning or "")
    if kept is not None:
        assert (line.reasoning or "").startswith(f"{reasoning.provider} reasoning sent verbatim")
    for other in PROVIDERS:  # every build of the run, for every provider, says so
        assert "left out of every request" in (_line(_build(state, other)).reasoning or "")

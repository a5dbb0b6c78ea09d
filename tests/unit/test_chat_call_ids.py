"""OpenAI's Chat Completions does not count a tool call's id among a request's input tokens: a
call costs its name, its arguments and a few tokens of framing (``call_id_prices``).

Measured on pydantic-ai's recorded gpt-4o and gpt-5.4-mini requests (``tests/integration/
test_estimates.py``): the OpenAI cookbook's count of a request without its ids is within 11
tokens a call of ``usage.prompt_tokens``, and with them (~15 tokens an id, sent twice) 25-30
tokens a call over it. Each call was priced at its two ids, ~2,000 tokens for 60 calls of a
budget the request did not spend.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.domain.events import AnyEvent, ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, ContextManifest
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.call_id_prices import CHAT_CALL_FRAMING
from contextfold.projections.fold import fold
from contextfold.projections.render import render
from contextfold.projections.tokens import get_counter

count = get_counter("cl100k_base").count
LONG = "call_Xy7Qm2Lk9PzR4tVb8N{:03d}"  # OpenAI's ids: call_ and 24 characters, ~15 tokens


def _events(model: str | None, ids: str, calls: int = 20) -> list[AnyEvent]:
    events: list[AnyEvent] = [RunStarted(model=model, encoding="cl100k_base")] if model else []
    events.append(UserInput("run them all"))
    for i in range(calls):
        cid = ids.format(i)
        events += [ModelResponse(tool_calls=[ToolCall(call_id=cid, name="run_build", arguments="{}")]),
                   ToolResult(call_id=cid, content=f"build {i} done")]
    events.append(UserInput("status?"))
    return events


def _build(events: list[AnyEvent], provider: str) -> BuildResult:
    state = fold([RecordedEvent("r", i + 1, e, "h") for i, e in enumerate(events)])
    return build_context(state, BuildConfig(provider=provider, window=200_000, reserve=8_000),
                         render=lambda c, p, m: render(c, p, max_tokens=m))


def _manifest(events: list[AnyEvent], provider: str) -> ContextManifest:
    return _build(events, provider).manifest


def _texts(value: Any, key: str | None = None) -> int:
    """The tokens of a request's strings but its ids (``tool_calls[].id``, ``tool_call_id``)."""
    if isinstance(value, str):
        return 0 if key in ("id", "tool_call_id") else count(value)
    if isinstance(value, dict):
        return sum(_texts(v, k) for k, v in value.items())
    if isinstance(value, list):
        return sum(_texts(v, key) for v in value)
    return 0


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-5.4-mini", "o3"])
def test_an_openai_models_chat_call_id_is_priced_only_where_it_is_text(model: str) -> None:
    """A longer id costs what it adds to the text the request sends (a tool result's data block
    names its source, ``call://run/<id>@position``), not its copies in the ids."""
    built = {ids: _build(_events(model, ids), "openai-chat") for ids in ("c{}", LONG)}
    short, long = built["c{}"], built[LONG]
    assert long.manifest.selected_tokens - short.manifest.selected_tokens == (
        _texts(long.request["messages"]) - _texts(short.request["messages"]))


def test_a_chat_call_is_priced_its_framing_instead_of_its_two_ids() -> None:
    """The 20 calls of the run cost ``CHAT_CALL_FRAMING`` each where their ids were priced twice;
    the rest of the request is priced as it was (a model OpenAI does not serve keeps the ids). The
    tools layer aside: gpt-4o's declaration is priced at OpenAI's rendering, another vendor's model
    at the dearer of its JSON (``tool_pricing.tool_bill``)."""
    ids = sum(2 * count(LONG.format(i)) for i in range(20))
    openai, other = (_manifest(_events(model, LONG), "openai-chat")
                     for model in ("gpt-4o", "mistral-large-2411"))
    openai_tokens, other_tokens = (m.selected_tokens - m.layer_tokens["tools"] for m in (openai, other))
    assert other.layer_tokens["tools"] > openai.layer_tokens["tools"]
    assert ids > 20 * CHAT_CALL_FRAMING
    assert other_tokens - openai_tokens == ids - 20 * CHAT_CALL_FRAMING


def test_other_providers_and_the_neutral_build_still_price_the_ids() -> None:
    """Whether Anthropic, Gemini and Responses count ids is not known from their usage (their
    tokenizers are not public, or the measured gap has other causes): they keep the dearer price,
    and so does ``neutral``, which prices ids, media and reasoning at the dearest provider's price
    (and a call's framing and the tool prompt as OpenAI does: README, Render)."""
    for provider in ("openai-responses", "anthropic", "gemini", "neutral"):
        short, long = (_manifest(_events("gpt-4o", ids), provider).selected_tokens for ids in ("c{}", LONG))
        assert long > short, provider


def test_a_build_for_the_neutral_request_and_one_for_chat_of_the_same_state_keep_their_prices() -> None:
    """The facts tables are shared between providers priced alike: chat's call price differs now,
    so a neutral build after a chat one (or before) still counts its ids."""
    state = fold([RecordedEvent("r", i + 1, e, "h") for i, e in enumerate(_events("gpt-4o", LONG))])
    prices: dict[str, int] = {}
    for provider in ("openai-chat", "neutral", "openai-chat", "neutral"):
        m = build_context(state, BuildConfig(provider=provider, window=200_000, reserve=8_000)).manifest
        assert prices.setdefault(provider, m.selected_tokens) == m.selected_tokens
    assert prices["neutral"] > prices["openai-chat"]

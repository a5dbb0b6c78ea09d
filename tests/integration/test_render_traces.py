"""Every turn of every real tau-bench run, of the SWE-agent trajectories and of the bundled sample
run, renders to an accepted request for all four providers, under a generous and a tight budget.

Data: the 200 tau-bench gpt-4o airline runs (``../shared/traces``, imported with
``contextfold.importers``; 2,654 turns) and the sample run of ``contextfold demo``
(``contextfold.cli_demo.sample_events()``). Each turn is ``state_at_turn`` (the state
just before the turn's model response, plus the final "next" turn) built
directly with ``build_context`` - pure, no store - for each provider, with:

- generous: 128k window, 8k reserve;
- tight: 3k window, 500 reserve (the 1.2k-token airline policy is required,
  so history is dropped and long tool output truncated).

Checked for every request:

1. the provider's protocol rules (:func:`check_protocol`) and the official SDK
   request type (:func:`validate_sdk_types` must return True: the SDK check
   really ran, it was not skipped for a missing package);
2. pairing, by an independent reader of the rendered body (not the validator):
   every tool call is answered exactly once, immediately after the message or
   item that made it, and nothing answers an unknown call; each call's name is in the
   run's log under its id; an Anthropic request shows every call id once and within
   ``[a-zA-Z0-9_-]`` (49 of the 200 gpt-4o runs reuse ids across turns, which Anthropic
   refuses: it is shown the documented alias, derived here independently), an OpenAI Chat
   request no id over 40 characters;
3. the build stays within its budget, and the same state gives the same
   selection (fragment ids) for every provider.

No sampling: all turns of all runs, 4 providers x 2 budgets (about 21,000
builds, ~30 s on one core; the two budgets are separate tests so
``pytest -n 2`` splits them).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextfold.cli_demo import sample_events
from contextfold.domain.conversation import Conversation
from contextfold.domain.events import AnyEvent, ModelResponse, canonical_json
from contextfold.domain.log import GENESIS_HASH, RecordedEvent, chain_hash
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import iter_runs, parse
from contextfold.projections.builder import build_context
from contextfold.projections.past_states import state_at_turn
from contextfold.projections.render import (
    PROVIDERS,
    check_protocol,
    render,
    sdk_available,
    validate_sdk_types,
)
from contextfold.projections.state import RunState

pytestmark = pytest.mark.traces

REPO = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", REPO.parent / "shared" / "traces"))
TAU = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
BUDGETS = {"generous": (128_000, 8_000), "tight": (3_000, 500)}

Pairs = list[tuple[str, str, str]]
"""(event, call_id, name) in request order; event is 'call' or 'result'."""


# ------------------------------------------------------------------ independent pairing readers


def _chat_pairs(body: dict[str, Any]) -> list[Pairs]:
    """One list per assistant turn: its calls, then the answers that follow it."""
    turns: list[Pairs] = []
    for m in body["messages"]:
        if m["role"] == "assistant" and m.get("tool_calls"):
            turns.append([("call", c["id"], c["function"]["name"]) for c in m["tool_calls"]])
        elif m["role"] == "tool":
            assert turns and turns[-1], "tool message without a preceding call"
            turns[-1].append(("result", m["tool_call_id"], ""))
        else:
            turns.append([])
    return [t for t in turns if t]


def _responses_pairs(body: dict[str, Any]) -> list[Pairs]:
    turns: list[Pairs] = []
    for it in body["input"]:
        kind = it.get("type", "message")
        if kind == "function_call":
            if not turns or not turns[-1] or turns[-1][-1][0] != "call":
                turns.append([])
            turns[-1].append(("call", it["call_id"], it["name"]))
        elif kind == "function_call_output":
            assert turns and turns[-1], "function_call_output without a preceding call"
            turns[-1].append(("result", it["call_id"], ""))
        else:
            turns.append([])
    return [t for t in turns if t]


def _anthropic_pairs(body: dict[str, Any]) -> list[Pairs]:
    turns: list[Pairs] = []
    for m in body["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else []
        if m["role"] == "assistant":
            turns.append([("call", b["id"], b["name"]) for b in blocks if b["type"] == "tool_use"])
        else:
            results = [("result", b["tool_use_id"], "") for b in blocks if b["type"] == "tool_result"]
            kinds = [b["type"] for b in blocks]
            # results come first in the user message, before any other content
            assert kinds[:len(results)] == ["tool_result"] * len(results), kinds
            if turns and turns[-1] and turns[-1][-1][0] == "call":
                turns[-1] += results
            else:
                assert not results, "tool_result with no tool_use in the previous message"
                turns.append([])
    return [t for t in turns if t]


def _gemini_pairs(body: dict[str, Any]) -> list[Pairs]:
    turns: list[Pairs] = []
    for c in body["contents"]:
        calls = [("call", p["functionCall"]["id"], p["functionCall"]["name"])
                 for p in c["parts"] if "functionCall" in p]
        results = [("result", p["functionResponse"]["id"], p["functionResponse"]["name"])
                   for p in c["parts"] if "functionResponse" in p]
        if results:
            assert c["role"] == "user" and turns and turns[-1] and turns[-1][-1][0] == "call", \
                "functionResponse not in the content right after the calls"
            turns[-1] += results
        else:
            turns.append(calls)
    return [t for t in turns if t]


READERS: dict[str, Callable[[dict[str, Any]], list[Pairs]]] = {
    "openai-chat": _chat_pairs,
    "openai-responses": _responses_pairs,
    "anthropic": _anthropic_pairs,
    "gemini": _gemini_pairs,
}


ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")


def assert_pairing(provider: str, body: dict[str, Any], log_calls: dict[str, set[str]]) -> int:
    """Every call answered exactly once, right after it, under an id unique in the request;
    returns the number of calls."""
    n = 0
    shown: set[str] = set()
    for turn in READERS[provider](body):
        calls = [(cid, name) for kind, cid, name in turn if kind == "call"]
        answers = [cid for kind, cid, _ in turn if kind == "result"]
        k = len(calls)
        assert [kind for kind, _, _ in turn] == ["call"] * k + ["result"] * k, turn
        assert sorted(answers) == sorted(cid for cid, _ in calls), turn
        assert len(set(answers)) == len(answers), turn
        if provider == "gemini":  # Gemini answers by name too
            names = {cid: name for cid, name in calls}
            assert all(names[cid] == name for kind, cid, name in turn if kind == "result"), turn
        for cid, name in calls:
            assert name in log_calls.get(cid, set()), f"call {cid} ({name}) is not in the log"
            if provider == "anthropic":
                assert ANTHROPIC_ID.fullmatch(cid), f"call id {cid!r} outside Anthropic's characters"
                assert cid not in shown, f"call id {cid!r} appears twice in the request"
                shown.add(cid)
            if provider == "openai-chat":
                assert len(cid) <= 40, f"call id {cid!r} over OpenAI Chat's 40 characters"
        n += k
    return n


# ------------------------------------------------------------------ runs and builds


def _record(run_id: str, events: list[AnyEvent]) -> list[RecordedEvent]:
    out, prev = [], GENESIS_HASH
    for pos, event in enumerate(events, start=1):
        prev = chain_hash(run_id, pos, prev, canonical_json(event))
        out.append(RecordedEvent(run_id, pos, event, prev))
    return out


Run = tuple[str, list[RunState], dict[str, set[str]]]


def _anthropic_alias(call_id: str, position: int, shown: dict[str, set[str]]) -> str | None:
    """The id README's rule shows Anthropic instead of a call's own, if any: for an id shown
    before or outside ``[a-zA-Z0-9_-]``, ``<id, other characters as _>_<position>`` (the
    traces' ids are short and need no counter)."""
    if ANTHROPIC_ID.fullmatch(call_id) and call_id not in shown:
        return None
    return re.sub(r"[^A-Za-z0-9_-]+", "_", call_id).strip("_")[:40 - len(f"_{position}")] + f"_{position}"


def _states(run_id: str, events: list[AnyEvent]) -> Run:
    records = _record(run_id, events)
    turns = sum(isinstance(r.event, ModelResponse) for r in records) + 1
    log_calls: dict[str, set[str]] = {}
    for r in records:
        if isinstance(r.event, ModelResponse):
            for c in r.event.tool_calls:
                alias = _anthropic_alias(c.call_id, r.position, log_calls)
                log_calls.setdefault(c.call_id, set()).add(c.name)
                if alias is not None:
                    log_calls.setdefault(alias, set()).add(c.name)
    return run_id, [state_at_turn(records, t) for t in range(1, turns + 1)], log_calls


@pytest.fixture(scope="module")
def runs() -> list[Run]:
    """The sample run and, when the traces are present, the 200 tau-bench runs."""
    out = [_states("sample", sample_events())]
    if not TAU.is_file():
        pytest.skip(f"tau-bench traces not present at {TAU} (set CONTEXTFOLD_TRACES)")
    data = TAU.read_bytes()
    out += [_states(f"tau/{suffix}", events)
            for suffix, events in iter_runs(data, format="openai-chat", source=str(TAU))]
    return out


class _Checked:
    """The render port of ``build_context``: render, then check protocol and SDK types."""

    def __init__(self) -> None:
        self.sdk_checks = 0

    def __call__(self, conversation: Conversation, provider: str, max_tokens: int) -> dict[str, Any]:
        body = render(conversation, provider, max_tokens=max_tokens, validate=False)
        check_protocol(provider, body)
        assert validate_sdk_types(provider, body) is True, f"SDK check for {provider} did not run"
        self.sdk_checks += 1
        return body


def _check_all(runs: list[Run], window: int, reserve: int) -> dict[str, int]:
    for provider in PROVIDERS:
        assert sdk_available(provider), f"the SDK for {provider} is not installed (validate extra)"
    checked = _Checked()
    totals = {"runs": 0, "turns": 0, "calls": 0, "truncated": 0, "dropped": 0}
    for run_id, states, log_calls in runs:
        totals["runs"] += 1
        for turn, state in enumerate(states, start=1):
            totals["turns"] += 1
            selections = set()  # of the providers shown every logged call id, which price alike
            for provider in PROVIDERS:
                config = BuildConfig(provider=provider, window=window, reserve=reserve)
                try:
                    result = build_context(state, config, render=checked)
                    totals["calls"] += assert_pairing(provider, result.request, log_calls)
                except Exception as exc:
                    raise AssertionError(f"{run_id} turn {turn} {provider} "
                                         f"(window {window}): {exc}") from exc
                m = result.manifest
                assert m.selected_tokens <= m.budget_tokens == window - reserve
                # A provider shown some call under an alias prices its ids apart (a gpt-4o id
                # reused, for Anthropic): under a tight budget it may keep other fragments. So do
                # Anthropic (its tool-use system prompt, ``tool_prompt``) and Gemini (the name
                # each result repeats, ``framing.response_name_tokens``) in a run with tools: the
                # OpenAI APIs are the ones compared.
                if provider not in state.aliased_for and provider not in ("anthropic", "gemini"):
                    selections.add(tuple(sorted(f.id for f in m.fragments)))
            assert len(selections) <= 1, f"{run_id} turn {turn}: providers selected differently"
            totals["truncated"] += len(m.truncations)
            totals["dropped"] += m.excluded.get("over_budget", 0) + m.excluded.get("low_priority", 0)
    assert checked.sdk_checks == totals["turns"] * len(PROVIDERS)
    return totals


def test_every_turn_renders_under_a_generous_budget(runs: list[Run]) -> None:
    window, reserve = BUDGETS["generous"]
    totals = _check_all(runs, window, reserve)
    assert totals["runs"] == 201 and totals["turns"] > 2_600
    assert totals["calls"] > 0
    assert totals["dropped"] == 0 and totals["truncated"] == 0  # everything fits in 120k


def test_every_turn_renders_under_a_tight_budget(runs: list[Run]) -> None:
    window, reserve = BUDGETS["tight"]
    totals = _check_all(runs, window, reserve)
    assert totals["runs"] == 201 and totals["turns"] > 2_600
    # the tight budget really bites: history is dropped and long output truncated
    assert totals["dropped"] > 1_000 and totals["truncated"] > 0


SWE = TRACES / "swe-agent-demos"


@pytest.fixture(scope="module")
def swe_runs() -> list[Run]:
    """The 22 SWE-agent trajectories, imported (classic and function-calling runs)."""
    paths = sorted(SWE.rglob("*.traj"))
    if not paths:
        pytest.skip(f"SWE-agent traces not present at {SWE} (set CONTEXTFOLD_TRACES)")
    return [_states(f"swe/{n}/{path.stem}", parse(path.read_bytes(), format="swe-agent", source=path.name))
            for n, path in enumerate(paths)]


SWE_BUDGETS = {"generous": (128_000, 8_000), "tight": (8_000, 1_000)}
"""The tight one is wider than tau-bench's: a SWE-agent system prompt and task, required in
every request, take up to 2.7k tokens, and the latest call with its result comes on top (a 3k
window is the typed error there, rightly)."""


@pytest.mark.parametrize("budget", sorted(SWE_BUDGETS))
def test_every_turn_of_the_swe_agent_trajectories_renders(swe_runs: list[Run], budget: str) -> None:
    """Their tool calls were commands in text (classic runs) or calls with logged ids; the
    demonstrations and file views are long, so the tight budget truncates and drops."""
    totals = _check_all(swe_runs, *SWE_BUDGETS[budget])
    assert totals["runs"] == 22 and totals["turns"] > 250 and totals["calls"] > 0
    if budget == "tight":
        assert totals["dropped"] > 0 and totals["truncated"] > 0


def test_pairing_reader_has_teeth() -> None:
    """A request with a result moved away from its call, or answered twice, fails the reader."""
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    answer = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    user = {"role": "user", "content": "hi"}
    log = {"c1": {"f"}}
    assert assert_pairing("openai-chat", {"messages": [user, call, answer]}, log) == 1
    for messages in ([user, call, user, answer], [user, call, answer, answer], [user, call]):
        with pytest.raises(AssertionError):
            assert_pairing("openai-chat", {"messages": messages}, log)
    with pytest.raises(AssertionError):
        assert_pairing("openai-chat", {"messages": [user, call, answer]}, {"c1": {"g"}})
    body = {"messages": [{"role": "user", "content": "x"},
                         {"role": "assistant", "content": [
                             {"type": "tool_use", "id": "c1", "name": "f", "input": {}}]},
                         {"role": "user", "content": [
                             {"type": "text", "text": "first"},
                             {"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]}]}
    with pytest.raises(AssertionError):
        assert_pairing("anthropic", body, log)
    json.dumps(body)  # the fixtures are plain JSON bodies

"""Recently relevant tools stay declared: the tool list (the start of every provider's cached
prefix) does not swing with each short user message ("yes", "my id is ...").

A build exposes the tools relevant to the current query and, in the cap's spare slots, those
relevant to earlier user inputs, most recent first (``tool_exposure`` rule 5, ``tool_recency``).
On tau-bench's airline traces the declared set swung turn to turn (5, 8, 1, 9, 2 tools) and 293
of 531 turns restarted the prompt cache.
"""

from __future__ import annotations

from pathlib import Path

from contextfold.api import Run, open_store, render_request
from contextfold.domain.events import (
    AnyEvent,
    HandOff,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.state import RunState
from contextfold.projections.tool_reasons import not_exposed_reason
from contextfold.projections.tool_recency import tool_recency
from tests.cli_runner import cf

_NAMES = ("email_send", "invoice_create", "weather_forecast", "calendar_book", "upload_document",
          "database_query", "slack_post", "github_issue", "jira_ticket", "drive_share", "sms_text",
          "pdf_render", "image_resize", "translate_phrase")
KIT = tuple(ToolSpec(name=n, description=f"{n.replace('_', ' ')} operation") for n in _NAMES)
"""Fourteen tools over the default cap of 12: a catalogue, ranked."""
CONFIG = BuildConfig(provider="anthropic", window=32_000, reserve=1_000)


def _state(*events: AnyEvent) -> RunState:
    state = new_state("recent")
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("recent", pos, event, ""))
    return state


def _reply(i: int) -> ModelResponse:
    return ModelResponse(text=f"reply {i}")


def _declared(built: BuildResult) -> dict[str, str]:
    assert {t.name for t in built.manifest.tools} == {t["name"] for t in built.request.get("tools", ())}
    return {t.name: t.reason for t in built.manifest.tools}


def _turns(inputs: list[str], config: BuildConfig = CONFIG) -> list[BuildResult]:
    """A live run: one build before each reply, on one state folded event by event."""
    events: list[AnyEvent] = [PolicySet(text="You are an assistant."), ToolsRegistered(tools=KIT)]
    state, folded, out = new_state("recent"), 0, []
    for i, text in enumerate(inputs):
        events.append(UserInput(text))
        for pos in range(folded + 1, len(events) + 1):
            fold_event(state, RecordedEvent("recent", pos, events[pos - 1], ""))
        folded = len(events)
        built = build_context(state, config, render=render_request)
        fresh = build_context(_state(*events), config, render=render_request)  # as a replay folds it
        assert _declared(built) == _declared(fresh), i
        out.append(built)
        events.append(_reply(i))
    return out


def test_tools_relevant_to_earlier_inputs_stay_declared_and_the_cache_key_stays() -> None:
    """Each "yes" matched no tool: the fallback declared the first twelve registered, and the
    next input's one match declared one tool. Four turns, three tool lists, three cache restarts."""
    built = _turns(["Please email Bob the summary", "yes", "And the weather in Paris?", "ok thanks",
                    "yes, go ahead"])
    declared = [_declared(b) for b in built]
    assert declared[0] == {"email_send": declared[0]["email_send"]}
    assert declared[0]["email_send"].startswith("relevant (bm25 ")
    recent_1 = ("recent (relevant to the user's input of turn 1; kept so the tool list, the start of "
                "the cached prefix, does not change)")
    assert declared[1] == {"email_send": recent_1}
    assert declared[2]["weather_forecast"].startswith("relevant (bm25 ")
    assert declared[2]["email_send"] == recent_1 and len(declared[2]) == 2
    assert declared[3] == declared[4] == {"email_send": recent_1, "weather_forecast": recent_1.replace(
        "turn 1", "turn 3")}
    keys = [b.manifest.cache_key for b in built]
    assert keys[2] == keys[3] == keys[4] and keys[0] == keys[1] != keys[2]


def test_the_cap_keeps_the_most_recent_and_current_relevance_comes_first() -> None:
    """Cap 2: the tools relevant now first, then the most recently relevant; the oldest leave."""
    config = CONFIG.model_copy(update={"max_tools": 2})
    built = _turns(["email Bob", "weather in Paris", "post it on slack", "yes", "open a jira ticket"], config)
    declared = [{n: r.split(" ")[0] for n, r in _declared(b).items()} for b in built]
    assert declared[1] == {"weather_forecast": "relevant", "email_send": "recent"}
    assert declared[2] == {"slack_post": "relevant", "weather_forecast": "recent"}
    assert declared[3] == {"slack_post": "recent", "weather_forecast": "recent"}
    assert declared[4] == {"jira_ticket": "relevant", "slack_post": "recent"}
    state = _state(PolicySet(text="You are an assistant."), ToolsRegistered(tools=KIT),
                   UserInput("email Bob"), _reply(0), UserInput("weather in Paris"), _reply(1),
                   UserInput("post it on slack"), _reply(2), UserInput("yes"))
    reason = not_exposed_reason(state, config, "email_send", {"slack_post", "weather_forecast"})
    assert reason is not None and "relevant to the user's input of turn 1" in reason, reason
    assert "more recently" in reason and "max_tools" in reason, reason
    never = not_exposed_reason(state, config, "pdf_render", {"slack_post", "weather_forecast"})
    assert never is not None and "nor with any earlier user input" in never, never


def test_recency_is_kept_per_input_and_recomputed_when_the_registry_changes() -> None:
    """The memo walks only the items added since the last build; a registration (a new tool, a
    replace) makes it start over: an input that named a tool before it was registered counts."""
    events: list[AnyEvent] = [ToolsRegistered(tools=KIT[:3]), UserInput("post the news on slack"), _reply(0),
                              UserInput("email it too"), _reply(1),
                              HandOff(from_agent="a", to_agent="b", note="render the pdf"),
                              ToolsRegistered(tools=(KIT[6], KIT[11])), UserInput("yes")]
    state = new_state("recent")
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("recent", pos, event, ""))
        assert tool_recency(state) == tool_recency(_state(*events[:pos])), pos
    # turns: the first build saw the slack input, the second the email one, the third the hand-off
    assert tool_recency(state) == {"slack_post": 1, "email_send": 2, "pdf_render": 3}
    built = build_context(state, CONFIG.model_copy(update={"max_tools": 3}), render=render_request)  # 5 > 3
    assert {n: r.split(" ")[0] for n, r in _declared(built).items()} == {
        "slack_post": "recent", "email_send": "recent", "pdf_render": "recent"}


def test_the_fallback_waits_until_no_input_matched_any_tool() -> None:
    """Rule 7 (the fallback) fills the cap only when neither the current query nor any earlier input matched a
    permitted tool; a denied tool's earlier match does not count."""
    head: tuple[AnyEvent, ...] = (PolicySet(text="x", denied_tools=("email_send",)),
                                  ToolsRegistered(tools=KIT))
    denied = build_context(_state(*head, UserInput("email Bob"), _reply(0), UserInput("yes")), CONFIG,
                           render=render_request)
    assert {r.split(" ")[0] for r in _declared(denied).values()} == {"fallback"}
    assert len(_declared(denied)) == 12
    nothing = build_context(_state(*head, UserInput("hello"), _reply(0), UserInput("yes")), CONFIG,
                            render=render_request)
    assert _declared(nothing) == _declared(denied)


def test_a_small_budget_drops_a_recent_tool_before_a_relevant_one_and_larger_keeps_more() -> None:
    """A recent tool's unit ranks below every tool relevant now: the selection's promises hold
    (never over budget, a larger budget never keeps less) and a tight share keeps the relevant."""
    events = (PolicySet(text="You are an assistant."), ToolsRegistered(tools=KIT), UserInput("email Bob"),
              _reply(0), UserInput("weather in Paris"), _reply(1), UserInput("post it on slack"))
    state = _state(*events)
    kept: set[str] = set()
    seen = []
    for window in range(1_565, 1_760, 5):
        built = build_context(state, CONFIG.model_copy(update={"window": window}), render=render_request)
        declared = _declared(built)
        assert kept <= declared.keys(), window
        assert built.manifest.selected_tokens <= built.manifest.budget_tokens
        kept = set(declared)
        seen.append(tuple(sorted(kept)))
    # the relevant one first, then the most recent: the turn's tools go last
    assert list(dict.fromkeys(seen)) == [(), ("slack_post",), ("slack_post", "weather_forecast"),
                                         ("email_send", "slack_post", "weather_forecast")]
    # a relevant schema over LARGE_TOOL_TOKENS ranks after every smaller tool, but a recent one
    # ranks after it too: the small recent tool never takes the room the turn's tool needs
    big = {"type": "object", "properties": {
        f"p{i}": {"type": "string", "description": "some long description of the parameter " * 5}
        for i in range(30)}}
    deploy = ToolSpec(name="deploy_service", description="deploy the service", parameters=big)
    state = _state(PolicySet(text="You are an assistant."), ToolsRegistered(tools=(*KIT, deploy)),
                   UserInput("email Bob"), _reply(0), UserInput("deploy the service"))
    seen = []
    for window in range(2_700, 2_900, 10):
        built = build_context(state, CONFIG.model_copy(update={"window": window}), render=render_request)
        assert built.manifest.selected_tokens <= built.manifest.budget_tokens
        seen.append(tuple(sorted(_declared(built))))
    assert list(dict.fromkeys(seen)) == [(), ("deploy_service",), ("deploy_service", "email_send")]


def test_a_replay_of_a_turn_exposes_what_the_live_build_did(store_url: str) -> None:
    """The recency is derived from the log alone: ``replay`` folds the turn's state afresh and
    rebuilds it, and must find the live build's tools (and bytes)."""
    with open_store(store_url) as store:
        _replayed(store.run("recent-replay"))


def _replayed(run: Run) -> None:
    run.append(PolicySet(text="You are an assistant."), ToolsRegistered(tools=KIT))
    turns = []
    for i, text in enumerate(["email Bob", "yes", "weather in Paris", "ok", "my id is 42"]):
        run.append(UserInput(text))
        turns.append(run.build(config=CONFIG, record=True))
        run.append(_reply(i))
    assert [t.manifest.turn for t in turns] == [1, 2, 3, 4, 5]
    for built in turns[1:]:
        report = run.replay(built.manifest.turn)
        assert report.ok, report.differences
        assert [t.name for t in report.rebuilt.tools] == [t.name for t in built.manifest.tools]
    assert {t.name for t in turns[-1].manifest.tools} == {"email_send", "weather_forecast"}


def test_a_called_tool_stays_declared_with_its_calls_and_is_not_counted_twice() -> None:
    """A tool the history calls is referenced (declared with its calls); the recent slot it holds
    (called at turn 1) is its one slot, not a second declaration."""
    state = _state(ToolsRegistered(tools=KIT), UserInput("email Bob"),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="email_send"),)),
                   ToolResult(call_id="c1", content="sent"), _reply(1), UserInput("yes"))
    declared = _declared(build_context(state, CONFIG, render=render_request))
    assert {n: r.split(" ")[0] for n, r in declared.items()} == {"email_send": "referenced"}


def test_why_and_diff_tell_the_recent_reason(tmp_path: Path) -> None:
    """``why`` and ``diff`` say why a recent tool is declared (the turn of the input it is
    relevant to) and why one left (the more recent filled max_tools), re-derived from the log."""
    url = f"sqlite:///{tmp_path}/recent.db"
    config = CONFIG.model_copy(update={"max_tools": 2})
    with open_store(url) as store:
        run = store.run("lru")
        run.append(PolicySet(text="You are an assistant."), ToolsRegistered(tools=KIT))
        for i, text in enumerate(["email Bob", "weather in Paris", "yes", "post it on slack"]):
            run.append(UserInput(text))
            run.build(config=config, record=True)
            run.append(_reply(i))
    kept = cf("--store", url, "why", "lru", "--turn", "3", "email_send", cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert ("tool exposed: recent (relevant to the user's input of turn 1; kept so the tool list"
            in kept.stdout)
    left = cf("--store", url, "why", "lru", "--turn", "4", "email_send", cwd=tmp_path)
    assert left.returncode == 0, left.stderr
    assert "it is relevant to the user's input of turn 1, but max_tools (2) were filled" in left.stdout
    diff = cf("--store", url, "diff", "lru", "3", "4", cwd=tmp_path)
    assert diff.returncode == 0, diff.stderr
    assert "+ tool slack_post: exposed: relevant (bm25" in diff.stdout, diff.stdout
    assert "- tool email_send: tool 'email_send' (registered) is neither pinned nor called" in diff.stdout


_ROWS = "\n".join(f"row {i}: customer record with some fields" for i in range(150))


def _called_history() -> list[AnyEvent]:
    """database_query is called at turn 1 (no input names it); slack_post, relevant to the input
    of turn 3, is called three times after it: at 4000 tokens the oldest group is left out."""
    events: list[AnyEvent] = [
        PolicySet(text="You are an assistant."), ToolsRegistered(tools=KIT), UserInput("email Bob"),
        ModelResponse(tool_calls=(ToolCall(call_id="c1", name="database_query", arguments="{}"),)),
        ToolResult(call_id="c1", content=_ROWS), _reply(0), UserInput("post it on slack")]
    for i in range(3):
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"s{i}", name="slack_post", arguments="{}"),)),
                   ToolResult(call_id=f"s{i}", content=_ROWS)]
    return [*events, _reply(1), UserInput("yes")]


def test_a_called_tool_is_recent_from_the_turn_it_was_called_in_and_stays_once_its_calls_are_cut() -> None:
    """A tool the run called counts as relevant to the input of the turn it was called in: once
    a small window leaves its calls out, it keeps a spare slot like any recent tool, so the tool
    list (the start of the cached prefix) does not lose it. It had left the list."""
    events = _called_history()
    state = new_state("recent")
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("recent", pos, event, ""))
        assert tool_recency(state) == tool_recency(_state(*events[:pos])), pos
    # slack_post: matched by the input of turn 3, called at turns 3, 4 and 5
    assert tool_recency(state) == {"email_send": 1, "database_query": 1, "slack_post": 5}
    small = build_context(state, CONFIG.model_copy(update={"window": 4_000}), render=render_request)
    called = [b["name"] for m in small.request["messages"] if isinstance(m["content"], list)
              for b in m["content"] if b.get("type") == "tool_use"]
    assert "database_query" not in called and "slack_post" in called, called
    declared = _declared(small)
    assert declared["database_query"] == (
        "recent (called at turn 1; kept so the tool list, the start of the cached prefix, does not change)")
    assert declared["slack_post"] == "referenced" and declared["email_send"].startswith("recent ")
    large = _declared(build_context(state, CONFIG.model_copy(update={"window": 8_000}),
                                    render=render_request))
    assert large.keys() == declared.keys() and large["database_query"] == "referenced"


def test_a_called_tool_takes_a_slot_still_spare_the_most_recently_called_first() -> None:
    """The called tools hold the slots the other recent tools left, the most recently called
    first: cap 2 is email_send's (an input's, recent) and slack_post's (called at turn 5, its
    calls kept); database_query (turn 1), its calls cut, gets the third slot of cap 3."""
    state = _state(*_called_history())
    two = {"email_send": "recent", "slack_post": "referenced"}
    for cap, expected in ((2, two), (3, {**two, "database_query": "recent"})):
        config = CONFIG.model_copy(update={"window": 4_000, "max_tools": cap})
        built = build_context(state, config, render=render_request)
        assert {n: r.split(" ")[0] for n, r in _declared(built).items()} == expected, cap
    later = _state(*_called_history(), ModelResponse(tool_calls=(ToolCall(call_id="d2", name="database_query",
                                                                          arguments="{}"),)),
                   ToolResult(call_id="d2", content="no rows"), _reply(2), UserInput("ok"))
    assert tool_recency(later)["database_query"] == 7  # called in the turn of the input "yes"


def test_a_call_does_not_stop_the_fallback_that_declared_the_tool_list() -> None:
    """The fallback (rule 7) waits for an input's words only: a call counted as a match would
    turn the twelve first registered tools declared for "Login is broken, fix it" into the one
    tool called, on the next "yes"."""
    head: list[AnyEvent] = [PolicySet(text="You are an assistant."), ToolsRegistered(tools=KIT),
                            UserInput("Login is broken, fix it")]
    first = _declared(build_context(_state(*head), CONFIG, render=render_request))
    assert len(first) == 12 and {r.split(" ")[0] for r in first.values()} == {"fallback"}
    called = _state(*head, ModelResponse(tool_calls=(ToolCall(call_id="t1", name="translate_phrase"),)),
                    ToolResult(call_id="t1", content="done"), _reply(1), UserInput("yes"))
    assert tool_recency(called) == {"translate_phrase": 1}
    declared = _declared(build_context(called, CONFIG, render=render_request))
    assert declared == {**first, "translate_phrase": "referenced"}


def test_a_recent_tool_says_whether_it_was_called_or_matched_an_input() -> None:
    """Rule 5's turn is an input's or a call's: the manifest (and so ``why`` and ``diff``) says
    which. database_query, called at turn 1 and named by no input, had read "relevant to the
    user's input of turn 1" as if the user had asked for it."""
    recent = "; kept so the tool list, the start of the cached prefix, does not change)"
    config = CONFIG.model_copy(update={"window": 4_000})
    declared = _declared(build_context(_state(*_called_history()), config, render=render_request))
    assert declared["database_query"] == "recent (called at turn 1" + recent
    assert declared["email_send"] == "recent (relevant to the user's input of turn 1" + recent
    # an input of turn 1 names it and the run calls it in that turn: both are said
    both = [UserInput("email Bob the database rows") if e == UserInput("email Bob") else e
            for e in _called_history()]
    state = _state(*both)
    assert tool_recency(state)["database_query"] == 1
    declared = _declared(build_context(state, config, render=render_request))
    assert declared["database_query"] == (
        "recent (relevant to the user's input of turn 1 and called at turn 1" + recent)


def test_a_called_tool_left_without_a_recent_slot_is_said_to_be_recent() -> None:
    """A tool the run called whose call the request dropped is declared only for its relevance or
    a recent slot (rule 5: called at turn N). With the cap filled by the tools relevant now and
    one called more recently, ``why`` said only that it "shares no term with the turn's goal", as
    if nothing had made it recent."""
    state = _state(PolicySet(text="You are an assistant."), ToolsRegistered(tools=KIT),
                   UserInput("hello there"),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="pdf_render",
                                                      arguments='{"doc": "' + "x " * 600 + '"}'),)),
                   ToolResult(call_id="c1", content="ok"), _reply(0), UserInput("yes"),
                   ModelResponse(tool_calls=(ToolCall(call_id="c2", name="sms_text", arguments="{}"),)),
                   ToolResult(call_id="c2", content="sent"), _reply(1),
                   UserInput("email Bob, open a jira ticket"))
    said = ("tool 'pdf_render' (registered) is called by the history, but by none of the calls the request "
            "kept (a tool is declared with the calls that use it), and it shares no term with the turn's "
            "goal, ready plan steps and latest input; it is called at turn 1, but max_tools ({}) were filled "
            "by the tools relevant to the turn{}")
    # cap 2: both slots went to the tools relevant now; cap 3: the third to sms_text, called later
    for cap, also in ((2, ""), (3, " and by those relevant more recently (recent)")):
        config = CONFIG.model_copy(update={"window": 1_800, "reserve": 500, "max_tools": cap})
        built = build_context(state, config, render=render_request)
        declared = _declared(built)
        assert {n: r.split(" ")[0] for n, r in declared.items()} == {
            "email_send": "relevant", "jira_ticket": "relevant", "sms_text": "referenced"}
        reason = not_exposed_reason(state, config, "pdf_render", set(declared))
        assert reason == said.format(cap, also), reason

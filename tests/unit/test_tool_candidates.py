"""Why a tool was not exposed: re-derived from the log as the build saw it, never guessed.

A manifest lists the tools a request declares, not the hundreds it left out; ``why RUN TOOL``
answers with :func:`not_exposed_reason`, which must agree with the build tool for tool.
"""

from __future__ import annotations

from contextfold.api import render_request
from contextfold.domain.events import (
    AnyEvent,
    CompactionSummary,
    GoalSet,
    HandOff,
    HistoryCompacted,
    ModelResponse,
    PlanStep,
    PlanUpdated,
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
from contextfold.projections.tool_candidates import tool_query
from contextfold.projections.tool_prompt import tool_prompt_tokens
from contextfold.projections.tool_reasons import not_exposed_reason
from tests.unit.test_tool_exposure import TOOLS


def _state(*events: AnyEvent) -> RunState:
    state = new_state("tools")
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("tools", pos, event, ""))
    return state


def _reasons(state: RunState, config: BuildConfig) -> tuple[BuildResult, dict[str, str | None]]:
    built = build_context(state, config, render=render_request)
    exposed = {t.name for t in built.manifest.tools}
    return built, {t.name: not_exposed_reason(state, config, t.name, exposed) for t in TOOLS}


def _agree(state: RunState, config: BuildConfig) -> dict[str, str]:
    """The reasons for the tools the build left out; asserts that exactly they have one."""
    built, reasons = _reasons(state, config)
    exposed = {t.name for t in built.manifest.tools}
    assert exposed and {n for n, r in reasons.items() if r is None} == exposed, config
    return {n: r for n, r in reasons.items() if r is not None}


def test_every_tool_of_a_200_tool_registry_is_exposed_or_has_the_reason_it_was_not() -> None:
    ops = _state(PolicySet(text="be careful", pinned_tools=("fs_read_file",),
                           denied_tools=("k8s_scale_deployment",)),
                 ToolsRegistered(tools=tuple(TOOLS)),
                 GoalSet(goal="Fetch the logs of the crashing pod and scale the deployment"),
                 UserInput("the api pod keeps crashing: fetch its logs"))
    crud = _state(ToolsRegistered(tools=tuple(TOOLS)),
                  UserInput("create, list, get, update and delete the invoices, customers and tickets"))
    said: dict[str, int] = {}
    for state, config in ((ops, BuildConfig(provider="openai-chat", window=16_000, reserve=1_000)),
                          (ops, BuildConfig(provider="anthropic", window=16_000, reserve=1_000, max_tools=3)),
                          (crud, BuildConfig(provider="openai-chat", window=16_000, reserve=1_000)),
                          (crud, BuildConfig(provider="openai-chat", window=700, reserve=100))):
        reasons = _agree(state, config)
        if state is ops:  # relevant to the goal, but the policy's word is final
            assert reasons.pop("k8s_scale_deployment") == (
                "tool 'k8s_scale_deployment' (registered) is never exposed: the run's policy denies it "
                "(denied_tools)")
        for name, reason in reasons.items():
            assert reason.startswith(f"tool {name!r} (registered) "), reason
            words = (("irrelevant", "shares no term with the turn's goal"),
                     ("below the cap", f"below the {config.max_tools} most relevant"),
                     ("no room", "the selection had no room for it"))
            kinds = [kind for kind, text in words if text in reason]
            assert len(kinds) == 1, reason
            said[kinds[0]] = said.get(kinds[0], 0) + 1
    assert set(said) == {"irrelevant", "below the cap", "no room"}, said  # each reason was exercised


def test_a_tool_the_policy_keeps_out_or_that_no_schema_declares_says_so() -> None:
    state = _state(PolicySet(text="only these", allowed_tools=("read", "ghost", "shell"),
                             pinned_tools=("ghost",)),
                   PolicySet(text="never", source_ref="runtime://deny", denied_tools=("shell",)),
                   ToolsRegistered(tools=(ToolSpec(name="read", description="print a document"),
                                          ToolSpec(name="write", description="write a file"))),
                   UserInput("write the report"),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="shell"),)),
                   ToolResult(call_id="c1", content="denied", is_error=True))
    config = BuildConfig(provider="openai-chat", window=8_000, reserve=500)
    built = build_context(state, config, render=render_request)
    exposed = {t.name for t in built.manifest.tools}
    # read: the whole permitted toolkit, though nothing asks for it; ghost: no schema; write, shell: kept out
    assert [(t.name, t.reason) for t in built.manifest.tools] == [
        ("read", "toolkit (the run's whole toolkit fits max_tools)")]

    def why(name: str) -> str | None:
        return not_exposed_reason(state, config, name, exposed)

    assert why("write") == ("tool 'write' (registered) is never exposed: it is not among the run's policy's "
                            "allowed_tools")
    assert why("shell") == ("tool 'shell' (called by the history but never registered) is never exposed: the "
                            "run's policy denies it (denied_tools); the history's calls to it are shown "
                            "as runtime notes")
    assert why("ghost") == ("tool 'ghost' is pinned by the run's policy, but no tool of that name is "
                            "registered (ToolsRegistered) and the history does not call it: there is no "
                            "schema to declare")
    assert why("read") is None
    state_allowed = _state(PolicySet(text="only", allowed_tools=("spare",)), UserInput("go"))
    assert not_exposed_reason(state_allowed, config, "spare", ()) == (
        "tool 'spare' is on the allowed_tools of the run's policy, but no tool of that name is registered "
        "(ToolsRegistered) and the history does not call it: there is no schema to declare")
    assert why("nothing-by-this-name") is None
    no_ranking = BuildConfig(provider="openai-chat", window=8_000, reserve=500, max_tools=0)
    assert "max_tools is 0" in (not_exposed_reason(state, no_ranking, "read", set()) or "")


def test_a_small_toolkit_is_declared_whole_whatever_the_words_and_the_cache_key_stays() -> None:
    """Three tools and "Login is broken": none shares a term with the turn, and the request
    declared no tool at all; the next input that named one moved the cache key."""
    kit = (ToolSpec(name="read_file", description="Read a file of the repository"),
           ToolSpec(name="edit_file", description="Replace text in a file"),
           ToolSpec(name="bash", description="Run a shell command"))
    head = (PolicySet(text="You are a coding agent."), ToolsRegistered(tools=kit))
    config = BuildConfig(provider="anthropic", window=32_000, reserve=1_000)
    first = build_context(_state(*head, UserInput("Login is broken for everyone. Please fix it.")), config,
                          render=render_request)
    assert [t["name"] for t in first.request["tools"]] == ["bash", "edit_file", "read_file"]
    assert {t.reason for t in first.manifest.tools} == {"toolkit (the run's whole toolkit fits max_tools)"}
    second = build_context(_state(*head, UserInput("Login is broken."), UserInput("read the shell history")),
                           config, render=render_request)
    assert {t.name: t.reason.split(" ")[0] for t in second.manifest.tools} == {
        "bash": "relevant", "edit_file": "toolkit", "read_file": "relevant"}
    assert second.manifest.cache_key == first.manifest.cache_key


def test_a_call_to_a_tool_no_runtime_registered_does_not_make_the_toolkit_a_catalogue() -> None:
    """The stand-in schema declared for gpt-4o's made-up ``multi_tool_use.parallel`` was counted in
    the toolkit: 13 names over a cap of 12, and the 12 registered tools all left the request."""
    kit = tuple(ToolSpec(name=f"tool_{i}", description=f"does thing {i}") for i in range(12))
    state = _state(ToolsRegistered(tools=kit), UserInput("Login is broken, fix it"),
                   ModelResponse(tool_calls=(ToolCall(call_id="p", name="multi_tool_use.parallel"),)),
                   ToolResult(call_id="p", content="no such tool", is_error=True))
    built = build_context(state, BuildConfig(provider="openai-chat", window=32_000, reserve=1_000),
                          render=render_request)
    reasons = {t.name: t.reason.split(" ")[0] for t in built.manifest.tools}
    assert sorted(n for n, r in reasons.items() if r == "toolkit") == sorted(t.name for t in kit)
    assert list(reasons.values()).count("referenced") == 1


def test_a_current_step_no_status_marks_ranks_the_tools_as_the_plan_shows_it() -> None:
    """The plan shows a pending step whose dependencies are all done as the current one; tools were
    ranked only against steps marked ready, so with a 200-tool registry that step exposed none."""
    exposed = {}
    for status in ("ready", "pending"):
        plan = PlanUpdated(steps=(PlanStep(id="s1", title="find the crashing pod", status="done"),
                                  PlanStep(id="s2", title="restart the deployment", status=status,
                                           depends_on=("s1",))))
        state = _state(ToolsRegistered(tools=TOOLS), plan, UserInput("continue"))
        built = build_context(state, BuildConfig(provider="openai-chat", window=20_000, reserve=2_000),
                              render=render_request)
        assert "restart the deployment" in str(built.request)
        exposed[status] = {t.name for t in built.manifest.tools}
    assert "k8s_rollout_restart" in exposed["ready"]
    assert exposed["pending"] == exposed["ready"]


def test_a_catalogue_that_matches_nothing_still_declares_tools_to_act_with() -> None:
    """Twelve coding tools were declared whole for "Login is broken, fix it"; a thirteenth made it a
    catalogue, nothing shared a word with the turn, and the request declared no tool at all."""
    names = ["read_file", "edit_file", "write_file", "bash", "grep", "glob", "list_dir", "git_diff",
             "git_commit", "run_tests", "web_search", "web_fetch", "todo_write"]
    kit = tuple(ToolSpec(name=n, description=f"{n.replace('_', ' ')} tool") for n in names)
    head = (PolicySet(text="You are a coding agent.", pinned_tools=("todo_write",)),
            ToolsRegistered(tools=kit))
    kept: set[str] = set()
    sizes: list[int] = []
    prompt = tool_prompt_tokens("anthropic", None)  # set aside before selection: the windows are past it
    for window in (1_150 + prompt, 1_200 + prompt, 1_400 + prompt, 32_000):  # larger never keeps less
        state = _state(*head, UserInput("Login is broken, fix it"))
        built, _ = _reasons(state, BuildConfig(provider="anthropic", window=window, reserve=1_000))
        declared = {t.name: t.reason.split(" ")[0] for t in built.manifest.tools}
        assert kept <= declared.keys(), window
        kept = set(declared)
        sizes.append(len(kept))
        if window == 1_150 + prompt:  # a small share keeps the first registered, as the fill chose them
            assert declared.keys() == {"todo_write", "read_file", "edit_file"}, declared
    assert sizes[0] < sizes[-1] == 13, sizes  # the small windows kept fewer: the check had teeth
    assert declared == {"todo_write": "pinned", **dict.fromkeys(names[:12], "fallback")}
    # a pinned tool takes no slot; the cap is filled in registration order, so the 13th stays out
    state = _state(*head[:1], ToolsRegistered(tools=(*kit, ToolSpec(name="zz_extra", description="x"))),
                   UserInput("Login is broken, fix it"))
    config = BuildConfig(provider="anthropic", window=32_000, reserve=1_000)
    exposed = {t.name for t in build_context(state, config, render=render_request).manifest.tools}
    assert "zz_extra" not in exposed and len(exposed) == 13
    assert ("nor does any other tool, and no earlier user input matched one that is not pinned: "
            "max_tools were filled") in str(
        not_exposed_reason(state, config, "zz_extra", exposed))
    # one match is the retrieval's answer: the rest are not padded in
    state = _state(*head, UserInput("Login is broken, run the tests"))
    built, _ = _reasons(state, BuildConfig(provider="anthropic", window=32_000, reserve=1_000))
    assert {t.name for t in built.manifest.tools} == {"todo_write", "run_tests"}


def test_the_fallback_set_stays_put_as_the_run_calls_its_core_tools() -> None:
    """A referenced tool took no fallback slot, so each first call of a core tool pulled the next
    registered one in: 12, 13, 14, 15 tools declared and a new cache key every turn (review)."""
    kit = tuple(ToolSpec(name=f"zork{i:02d}", description="frobnicate the quux") for i in range(20))
    events: list[AnyEvent] = [ToolsRegistered(tools=kit), UserInput("hello there")]
    config = BuildConfig(provider="anthropic", window=32_000, reserve=1_000)
    seen: list[tuple[list[str], str]] = []
    for i in range(4):
        state = _state(*events)
        built = build_context(state, config, render=render_request)
        seen.append((sorted(t.name for t in built.manifest.tools), built.manifest.cache_key))
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name=f"zork{i:02d}"),)),
                   ToolResult(call_id=f"c{i}", content="done"), UserInput("and again, please")]
    assert all(s == seen[0] for s in seen), seen
    assert seen[0][0] == [f"zork{i:02d}" for i in range(12)]


def test_a_tool_too_large_for_the_budget_does_not_take_the_toolkit_with_it() -> None:
    """The selection walk stops at the first unit that does not fit (so a larger budget never
    keeps less). Ranked by relevance alone, a 4,000-token deploy tool (an MCP server's schema)
    came first in a three-tool toolkit, did not fit a 3,750-token budget, and took the two
    33-token tools with it: the request declared no tool and the model could only answer in
    prose. A schema over ``LARGE_TOOL_TOKENS`` now ranks after every smaller tool: the small ones
    first, the big one where it fits."""
    big = {"type": "object", "properties": {
        f"p{i}": {"type": "string", "description": "some long description of the parameter " * 5}
        for i in range(100)}}
    state = _state(ToolsRegistered(tools=(
        ToolSpec(name="deploy_service", description="deploy the service", parameters=big),
        ToolSpec(name="read_file", description="read a file"),
        ToolSpec(name="run_shell", description="run a command"))),
        UserInput("deploy the service please"))
    declared = {}
    for window in (5_000, 6_000, 9_000):
        built = build_context(state, BuildConfig(provider="anthropic", window=window, reserve=1_250),
                              render=render_request)
        declared[window] = {t.name for t in built.manifest.tools}
        assert declared[window] == {t["name"] for t in built.request.get("tools", ())}
    assert declared[5_000] == {"read_file", "run_shell"}
    assert declared[6_000] == declared[9_000] == {"read_file", "run_shell", "deploy_service"}


def test_the_query_reads_the_newest_input_as_the_log_grows_shown_or_summarized() -> None:
    """The newest input is kept on the state and patched per step (``newest_user_item``): at every
    step it is the one a fresh fold finds, and one a summary hides still counts."""
    events: list[AnyEvent] = [PolicySet(text="be careful"), ToolsRegistered(tools=TOOLS),
                              UserInput("fetch the pod logs")]
    for i in range(3):
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="bash"),)),
                   ToolResult(call_id=f"c{i}", content="ok")]
    events += [HistoryCompacted(summary=CompactionSummary(goal="fetch the pod logs"), covers_from=1,
                                covers_to=len(events), strategy="summary", summarizer="test"),
               ModelResponse(text="done"), UserInput("now scale the deployment"),
               HandOff(from_agent="a", to_agent="b", note="restart the ingress")]
    state = _state()
    queries = []
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("tools", pos, event, ""))
        assert tool_query(state) == tool_query(_state(*events[:pos])), pos
        queries.append(tool_query(state))
    assert queries[2] == queries[10] == "fetch the pod logs"  # the summary hid it at 10
    assert state.hidden[3] == 10  # the input is hidden by the summary logged at 10
    assert queries[-2:] == ["now scale the deployment", "hand_off (a -> b): restart the ingress"]

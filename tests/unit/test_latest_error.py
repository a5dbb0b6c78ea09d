"""The latest error is cut to its diagnosis, never dropped for its length (seed section 4:
"关键约束、最新错误或完整 tool result pair 不应因为文本较长就被拆散")."""

from __future__ import annotations

import json

import pytest

from contextfold.domain.events import AnyEvent, ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.tool_prompt import tool_prompt_tokens
from tests.unit.test_builder import build, recorded, request_text

PROMPT = tool_prompt_tokens("anthropic", None)
"""What these Anthropic builds (no model named) set aside for the tool-use system prompt: the
windows below are the ones the rules were found at, plus it."""


def _make_log() -> str:
    lines = [f"cc -c src/file{i}.c -o build/file{i}.o  [ok]" for i in range(1500)]
    lines += ["src/parser.c:212:9: error: 'tok' undeclared (first use in this function)",
              "make: *** [Makefile:12: build/parser.o] Error 1"]
    lines += [f"note: continuing {i}" for i in range(1500)]
    return "\n".join(lines)


def _failing_make_then_reads(reads: int = 6, *, make_again: str | None = None) -> list[AnyEvent]:
    """A failing 3,002-line ``make``, then ``reads`` file reads of ~1,500 tokens each (and, with
    ``make_again``, a second ``make`` answering that text, successfully)."""
    events: list[AnyEvent] = [
        UserInput("Fix the build"),
        ModelResponse(tool_calls=(ToolCall(call_id="m", name="make", arguments="{}"),)),
        ToolResult(call_id="m", content=_make_log(), is_error=True, exit_code=2),
    ]
    for k in range(reads):
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"r{k}", name="read_file",
                                                      arguments=json.dumps({"path": f"src/f{k}.c"})),)),
                   ToolResult(call_id=f"r{k}", content="\n".join(
                       f"int f{k}_{j}(void) {{ return {j}; }}" for j in range(120)))]
    if make_again is not None:
        events += [ModelResponse(tool_calls=(ToolCall(call_id="m2", name="make", arguments="{}"),)),
                   ToolResult(call_id="m2", content=make_again),
                   ModelResponse(tool_calls=(ToolCall(call_id="r-last", name="read_file",
                                                      arguments=json.dumps({"path": "README"})),)),
                   ToolResult(call_id="r-last", content="read me")]
    return events


@pytest.mark.parametrize("window", [4_000, 8_000])
def test_a_long_latest_error_followed_by_reads_is_cut_to_its_diagnosis_not_dropped(window: int) -> None:
    """It used to be left out as ``low_priority`` (its score charges its 36k tokens) while a read
    was cut to fit: the request showed six reads and no trace of the failure."""
    result = build(_failing_make_then_reads(), "anthropic", window=window, reserve=1_000)
    text = request_text(result)
    assert "exit code: 2" in text and "'tok' undeclared" in text and "note: continuing 1499" in text
    line = next(f for f in result.manifest.fragments if f.id == "e3")
    assert line.required and line.truncated and line.selection_reason.startswith("required: latest error")
    assert result.manifest.selected_tokens <= window - 1_000


def test_the_rest_of_the_latest_error_competes_and_a_larger_budget_keeps_more_of_it() -> None:
    state = fold(recorded(_failing_make_then_reads()))
    sizes, truncated = [], []
    for window in (4_000, 12_000, 20_000, 60_000):
        m = build_context(state, BuildConfig(window=window, reserve=1_000)).manifest
        line = next(f for f in m.fragments if f.id == "e3")
        sizes.append(line.tokens)
        truncated.append(line.truncated)
    assert sizes == sorted(sizes) and sizes[0] < 400 < sizes[2]
    assert truncated == [True, True, True, False]  # whole when it fits


def test_a_later_success_of_the_same_tool_resolves_the_error() -> None:
    """``make`` failed, then passed: the old failure is optional again, and it is the first to go."""
    result = build(_failing_make_then_reads(make_again="Build finished: 0 errors"), "anthropic",
                   window=4_000, reserve=1_000)
    assert "e3" not in {f.id for f in result.manifest.fragments}
    assert any(e.id == "e3" and e.reason == "low_priority" for e in result.manifest.excluded_items)
    assert "Build finished: 0 errors" in request_text(result)


def test_the_latest_error_at_the_end_of_the_log_is_required_as_the_latest_group() -> None:
    result = build(_failing_make_then_reads(reads=0), "anthropic", window=60_000, reserve=1_000)
    line = next(f for f in result.manifest.fragments if f.id == "e3")
    assert line.selection_reason == "required: latest protocol group (a call and its answers)"
    assert not line.truncated


def test_when_required_content_alone_overflows_the_latest_error_is_squeezed_not_dropped() -> None:
    result = build(_failing_make_then_reads(reads=1), "anthropic", window=1_500 + PROMPT, reserve=1_000)
    lines = {f.id: f for f in result.manifest.fragments}
    assert lines["e3"].truncated and lines["e5"].truncated  # the error and the newest read, both cut
    assert "exit code: 2" in request_text(result)
    assert result.manifest.selected_tokens <= 500 + PROMPT


def test_a_failed_call_of_a_tool_the_policy_keeps_out_is_not_the_latest_error() -> None:
    """A denied ``rm`` failing after the ``make`` took the latest-error slot: its group is shown
    only as a note (it cannot be retried), and the make failure was dropped again."""
    events = _failing_make_then_reads()
    events[3:3] = [ModelResponse(tool_calls=(ToolCall(call_id="rm", name="rm", arguments="{}"),)),
                   ToolResult(call_id="rm", content="refused", is_error=True)]
    result = build([PolicySet(text="no deletes", denied_tools=("rm",)), *events], "anthropic",
                   window=4_000, reserve=1_000)
    text = request_text(result)
    assert "'tok' undeclared" in text and "call rm: rm {}" in text  # shown as the note of it
    line = next(f for f in result.manifest.fragments if f.id == "e4")
    assert line.selection_reason.startswith("required: latest error")


def _failed_write(rows: int) -> list[AnyEvent]:
    content = "\n".join(f"{i},{i * i},value_{i}" for i in range(rows))
    return [
        UserInput("write the file"),
        ModelResponse(tool_calls=(ToolCall(call_id="c1", name="write_file",
                                           arguments=json.dumps({"path": "data.csv", "content": content})),)),
        ToolResult(call_id="c1", content="error: disk quota exceeded", is_error=True, exit_code=1),
        ModelResponse(text="The write failed.", tool_calls=(ToolCall(call_id="c2", name="df"),)),
        ToolResult(call_id="c2", content="/dev/sda1 100% used", exit_code=0),
        ModelResponse(text="The disk is full. What should I do?"),
        UserInput("Never mind, just summarise what you did.")]


def test_a_failed_call_with_large_arguments_competes_and_the_run_builds() -> None:
    """A failed ``write_file`` of a 19k-token file was required (the latest error) with its
    arguments, which no cut shortens: every later build at a 16k window failed, though the
    model had answered and the user moved on, until that very tool succeeded."""
    events = _failed_write(2000)
    small = build(events, "anthropic", window=16_000, reserve=4_000)
    assert {e.id for e in small.manifest.excluded_items} >= {"e2", "e3"}
    assert "just summarise" in request_text(small)
    large = build(events, "anthropic", window=60_000, reserve=4_000)  # kept where it fits, not required
    line = next(f for f in large.manifest.fragments if f.id == "e3")
    assert not line.required


def test_whether_the_latest_error_is_required_does_not_depend_on_the_budget() -> None:
    """Dropping the requirement past half the budget made one more token of budget require the
    group (3,181 tokens of arguments at 6,362), which then displaced history 6,361 kept."""
    events = _failed_write(400)[:5]
    for t in range(40):  # the conversation moves on
        events += [UserInput(f"question {t}: " + "please explain the quarterly figures " * 12),
                   ModelResponse(text=f"answer {t}: " + "the figures show steady growth " * 12)]
    events += [ModelResponse(tool_calls=(ToolCall(call_id="c3", name="df"),)),
               ToolResult(call_id="c3", content="/dev/sda1 100% used", exit_code=0),
               UserInput("Never mind, summarise.")]
    kept_before: set[str] = set()
    for budget in range(6_330, 6_400, 3):
        built = build(events, "anthropic", window=budget + 1_000, reserve=1_000)
        kept = {f.id for f in built.manifest.fragments}
        assert kept >= kept_before, budget
        kept_before = kept


@pytest.mark.parametrize("reasoning", [False, True])
def test_reasoning_another_provider_is_not_sent_does_not_unrequire_the_latest_error(reasoning: bool) -> None:
    """Long Anthropic thinking beside the failing call is neither sent to nor priced for
    openai-chat, yet the fold's count (thinking included) passed the 2,000 tokens that make the
    latest error optional, and the hand-off's build dropped the failure (review)."""
    from contextfold.domain.events import AnthropicReasoning, ReasoningItem

    think = AnthropicReasoning(items=(ReasoningItem(raw={
        "type": "thinking", "signature": "EqQB" + "s" * 400,
        "thinking": "Let me look at the failing test. " * 400}),))
    events: list[AnyEvent] = [UserInput("make the tests pass"), ModelResponse(
        text="Running the suite.", tool_calls=[ToolCall(call_id="t1", name="pytest", arguments="{}")],
        **({"reasoning": think} if reasoning else {})),
        ToolResult(call_id="t1", content="E   AssertionError: expected 3 got 4\nFAILED tests/test_calc.py",
                   is_error=True, exit_code=1)]
    for i in range(12):  # later successful work that competes for the budget
        events += [ModelResponse(text=f"step {i}", tool_calls=[ToolCall(
            call_id=f"r{i}", name="read", arguments=json.dumps({"f": f"m{i}.py"}))]),
            ToolResult(call_id=f"r{i}", content=f"contents of m{i}.py\n" + "x = 1\n" * 120)]
    events.append(UserInput("what failed?"))
    result = build(events, "openai-chat", window=2_500, reserve=1_000)
    line = next(f for f in result.manifest.fragments if f.id == "e3")
    assert line.required and "AssertionError" in request_text(result)


def _long_reply_beside_a_failed_call() -> list[AnyEvent]:
    """A failed ``make`` whose reply explains itself in ~1,800 tokens (no cut shortens a reply),
    then three reads and a new question."""
    events: list[AnyEvent] = [
        UserInput("Fix the build"),
        ModelResponse(text="I will run make now. " * 300,
                      tool_calls=(ToolCall(call_id="m", name="make", arguments="{}"),)),
        ToolResult(call_id="m", is_error=True, exit_code=2, content="\n".join(
            f"step {i}: compiling module_{i}.c ... ok" for i in range(300)) + "\nparser.c:2: error: 'tok'")]
    for k in range(3):
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"r{k}", name="read_file",
                                                      arguments=json.dumps({"path": f"f{k}.c"})),)),
                   ToolResult(call_id=f"r{k}", content="\n".join(f"int f{j}(void);" for j in range(40)))]
    return [*events, UserInput("what failed?")]


def test_a_latest_error_that_does_not_fit_beside_the_required_content_is_left_out_not_a_failure() -> None:
    """Its reply (~1,800 tokens, under ``ERROR_FLOOR_MAX_UNCUTTABLE``) kept it required, and every
    build up to a 3,000 window (1,000 reserve) raised the required-over-budget error, though the
    newest input and the latest exchange fitted. Now it is left out (``over_budget``, saying why)
    with everything optional, so a larger budget still keeps a superset, and required from the
    budget it fits on."""
    state = fold(recorded(_long_reply_beside_a_failed_call()))
    kept_before: set[str] = set()
    shown_at = None
    for window in range(1_300 + PROMPT, 4_000 + PROMPT, 50):
        m = build_context(state, BuildConfig(provider="anthropic", window=window, reserve=1_000)).manifest
        kept = {f.id for f in m.fragments}
        assert m.selected_tokens <= window - 1_000 and "e10" in kept  # the newest input
        assert kept >= kept_before, window
        kept_before = kept
        if "e3" not in kept:
            assert shown_at is None and kept == {"e8", "e9", "e10"}  # the required content alone
            left_out = next(e for e in m.excluded_items if e.id == "e3")
            assert left_out.reason == "over_budget"
            assert "the latest error, required only where it fits" in left_out.detail
        elif shown_at is None:
            shown_at = window
            line = next(f for f in m.fragments if f.id == "e3")
            assert line.required and line.truncated
            assert line.selection_reason.startswith("required: latest error")
    assert shown_at is not None and 2_500 + PROMPT < shown_at <= 3_200 + PROMPT


def test_the_current_input_is_not_cut_to_make_room_for_the_latest_error() -> None:
    """Where the error first fitted beside the required content, the shrink cut the newest input
    for it: a 1,505-token question went whole at a 3,150 window and as 48 tokens at 3,200. The
    input now keeps its grant as the window grows, and the error enters beside it whole
    (``builder.INPUT_KEPT_BESIDE_ERROR``); the kept set still only grows."""
    events = _long_reply_beside_a_failed_call()
    events[-1] = UserInput("Please explain what failed. "
                           + " ".join(f"detail{i} about the build" for i in range(300)))
    state = fold(recorded(events))
    grant_before, kept_before = 0, set[str]()
    shown_at = None
    for window in range(1_300 + PROMPT, 6_000 + PROMPT, 50):
        m = build_context(state, BuildConfig(provider="anthropic", window=window, reserve=1_000)).manifest
        lines = {f.id: f for f in m.fragments}
        assert lines["e10"].tokens >= grant_before, window
        assert set(lines) >= kept_before, window
        grant_before, kept_before = lines["e10"].tokens, set(lines)
        if "e3" in lines and shown_at is None:
            shown_at = window
            assert not lines["e10"].truncated
    assert shown_at is not None

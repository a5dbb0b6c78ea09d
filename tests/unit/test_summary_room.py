"""A summary made for a window fits a share of it: its caps are absolute (``summary_bounds``),
so a long run's summary outgrew a small window's budget and the build could not be made."""

from __future__ import annotations

from contextfold.domain.events import (
    AnyEvent,
    CompactionSummary,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.projections.compaction import plan_compaction
from contextfold.projections.fold import fold
from contextfold.projections.summary_check import summary_lines
from contextfold.projections.tokens import get_counter
from tests.unit.test_fold import Log

count = get_counter("cl100k_base").count


def chat_loop(turns: int) -> Log:
    """A support loop: a short user message, a lookup, a result (every 9th an error)."""
    log = Log().add(PolicySet(text="You are an airline agent; confirm before changing a booking."))
    for t in range(1, turns + 1):
        events: list[AnyEvent] = [
            UserInput(f"turn {t}: please check reservation R{t:05d} and tell me the status"),
            ModelResponse(text=f"Checking R{t:05d}.", tool_calls=(ToolCall(
                call_id=f"c{t}", name="get_reservation", arguments=f'{{"reservation_id": "R{t:05d}"}}'),)),
            ToolResult(call_id=f"c{t}", content=f'{{"reservation_id": "R{t:05d}", "status": "confirmed"}}',
                       is_error=t % 9 == 0)]
        log.add(*events)
    return log.add(UserInput("anything else?"))


def summary_tokens(log: Log, max_tokens: int | None) -> int:
    plan = plan_compaction(fold(log.records), log.records, "summary", keep_recent=1,
                           max_summary_tokens=max_tokens)
    assert plan is not None
    return count("\n".join(summary_lines(plan.event.summary)))


def test_a_summary_fits_the_tokens_its_window_gives_it_and_is_whole_when_they_allow() -> None:
    log = chat_loop(200)
    whole = summary_tokens(log, None)
    assert whole > 1_500  # 32 user lines, 32 calls, 16 failures kept whole
    assert summary_tokens(log, 10 * whole) == whole
    room = 750  # a quarter of a 4k window's budget
    assert summary_tokens(log, room) <= room < whole
    assert summary_tokens(log, 1) < 500  # the smallest share: folded lines name fewer calls too


def test_what_users_said_is_folded_last_once_every_other_list_is_at_its_smallest() -> None:
    """One share for every list folded "Reply in French from now on." at a 700-token room while
    most of the summary was tool lines."""
    log = Log().add(PolicySet(text="You are a deploy agent."), UserInput("Reply in French from now on."),
                    UserInput("Never deploy to prod on Fridays."))
    for t in range(1, 120):
        log.add(ModelResponse(tool_calls=(ToolCall(call_id=f"c{t}", name=f"tool_{t % 9}", arguments="{}"),)),
                ToolResult(call_id=f"c{t}", content=f"result {t}", is_error=t % 5 == 0))
    log.add(UserInput("go on"))
    plan = plan_compaction(fold(log.records), log.records, "summary", keep_recent=1, max_summary_tokens=700)
    assert plan is not None
    constraints = plan.event.summary.constraints
    assert "user at event 2: Reply in French from now on." in constraints
    assert "user at event 3: Never deploy to prod on Fridays." in constraints


def test_a_plugin_summary_may_keep_whole_what_the_skeleton_folded_to_fit() -> None:
    """At the smallest shares the skeleton folds older user lines into "N earlier constraints
    (...)"; a summarizer that keeps each of them verbatim instead was refused for dropping that
    machine-written line."""
    log = chat_loop(60)
    whole = plan_compaction(fold(log.records), log.records, "summary", keep_recent=1)
    assert whole is not None
    said = [c for c in whole.event.summary.constraints if c.startswith("user at event")]

    def keeps_every_line(events: object, skeleton: CompactionSummary) -> CompactionSummary:
        assert any(" earlier constraints (read back in " in c for c in skeleton.constraints)
        return skeleton.model_copy(update={"constraints": whole.event.summary.constraints})

    plan = plan_compaction(fold(log.records), log.records, "summary", keep_recent=1, max_summary_tokens=1,
                           summarizer=keeps_every_line)
    assert plan is not None and all(c in plan.event.summary.constraints for c in said)

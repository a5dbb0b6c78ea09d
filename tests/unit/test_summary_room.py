"""A summary made for a window fits a share of it: its caps are absolute (``summary_bounds``),
so a long run's summary outgrew a small window's budget and the build could not be made."""

from __future__ import annotations

from contextfold.domain.events import AnyEvent, ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
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

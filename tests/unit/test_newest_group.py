"""The newest group is required down to its head and tail only: a giant newest result is cut, and
the instruction, the earlier steps and the recent groups are not dropped for it.

Required whole, a 120,000-token build log that exited 0 took all of a 128k build but its call: a
34-token AGENTS.md instruction (priority 90) and all eight earlier steps went for the last 114
tokens of it, at 16k, 32k and 128k alike, and the same for a failing test log."""

from __future__ import annotations

import pytest

from contextfold.domain.events import (
    AnyEvent,
    GoalSet,
    InstructionSet,
    ModelResponse,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.timeline_units import NEWEST_WHOLE_TOKENS
from tests.unit.test_builder import build, recorded, request_text

AGENTS = "AGENTS.md: never edit files under migrations/."


def _steps_then(result: str, *, failed: bool = False, steps: int = 8) -> list[AnyEvent]:
    """An instruction, a goal, ``steps`` small steps, then a call answered by ``result``."""
    events: list[AnyEvent] = [InstructionSet(text=AGENTS, source_ref="file://AGENTS.md"),
                              GoalSet(goal="Make CI green"), UserInput("Fix the failing test.")]
    for t in range(steps):
        events += [ModelResponse(text=f"STEP-{t}", tool_calls=(ToolCall(call_id=f"c{t}", name="bash",
                                                                       arguments="{}"),)),
                   ToolResult(call_id=f"c{t}", content=f"SMALL-RESULT-{t}: edited line {t}")]
    events += [ModelResponse(text="cat the build log", tool_calls=(ToolCall(call_id="big", name="bash",
                                                                            arguments="{}"),)),
               ToolResult(call_id="big", content=result, exit_code=1 if failed else 0, is_error=failed)]
    return events


def _build_log(lines: int) -> str:
    return "\n".join(f"compiling module {i} ... ok" for i in range(lines))


@pytest.mark.parametrize("failed", [False, True])
@pytest.mark.parametrize("window", [16_000, 32_000, 128_000])
def test_a_giant_newest_result_is_cut_and_the_instruction_and_earlier_steps_stay(window: int,
                                                                                  failed: bool) -> None:
    result = build(_steps_then(_build_log(20_000), failed=failed), "anthropic", window=window)
    m = result.manifest
    text = request_text(result)
    assert AGENTS in text
    assert all(f"SMALL-RESULT-{t}" in text for t in range(8))
    assert not any(e.kind == "instruction" for e in m.excluded_items)
    big = next(f for f in m.fragments if f.source_ref.startswith("call://r/big") and f.kind == "tool_result")
    assert big.truncated and big.selection_reason.startswith("required: latest protocol group")
    # the newest result still gets most of the room (at 16k, 88%: Claude's tool-use prompt and the
    # nine calls' and results' markup, ``call_id_prices.ANTHROPIC_TOOL_USE_FRAMING``, take the rest)
    assert big.tokens >= 0.88 * m.budget_tokens
    assert "compiling module 19999" in text  # its tail (and the exit code) shown
    assert m.selected_tokens <= m.budget_tokens


def test_a_larger_window_keeps_a_superset_and_more_of_the_newest_result() -> None:
    state = fold(recorded(_steps_then(_build_log(20_000))))
    before: dict[str, int] = {}
    for window in range(3_000, 150_000, 7_321):
        m = build_context(state, BuildConfig(window=window, reserve=1_000)).manifest
        kept = {f.id: f.tokens for f in m.fragments}
        assert m.selected_tokens <= m.budget_tokens
        assert before.keys() <= kept.keys()
        big = max(kept, key=kept.__getitem__)
        assert kept[big] >= before.get(big, 0)
        before = kept


def test_a_newest_group_up_to_the_bound_is_required_whole_before_old_history() -> None:
    """Unchanged where the newest group is within ``NEWEST_WHOLE_TOKENS``: at a 3,000-token budget
    a 2,500-token newest result is shown whole and the old steps take what is left, not the other
    way round."""
    events = _steps_then(_build_log(320), steps=60)
    state = fold(recorded(events))
    m = build_context(state, BuildConfig(window=4_000, reserve=1_000)).manifest
    big = next(f for f in m.fragments if f.source_ref.startswith("call://r/big") and f.kind == "tool_result")
    assert 2_400 < big.tokens < NEWEST_WHOLE_TOKENS and not big.truncated
    assert any(e.kind == "tool_result" and e.reason == "low_priority" for e in m.excluded_items)

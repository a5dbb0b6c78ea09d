"""A parallel batch's room is shared by water-filling: a result that fits within an equal share
stays whole and the long ones share the rest. Shared by size, a 1,200-token file read beside
two 238,000-token siblings was cut to 104 tokens at a 32k window."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain.events import AnyEvent, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.cut_text import split_room
from contextfold.projections.fold import fold
from contextfold.projections.fragment_facts import SHRINK_FLOOR

_SIZES = st.lists(st.integers(min_value=0, max_value=5000), min_size=1, max_size=6)


def test_a_short_part_stays_whole_and_the_long_ones_share_the_rest() -> None:
    assert split_room(12_000, [1_200, 238_000, 238_000]) == [1_200, 5_400, 5_400]
    assert split_room(100, [10, 1_000]) == [10, 90]
    assert split_room(10_000, [10, 20, 30]) == [10, 20, 30]


@given(room=st.integers(min_value=0, max_value=20_000), sizes=_SIZES)
@settings(max_examples=300, deadline=None)
def test_water_filling_properties(room: int, sizes: list[int]) -> None:
    grants = split_room(room, sizes)
    floors = [min(size, SHRINK_FLOOR) for size in sizes]
    assert all(f <= g <= s for f, g, s in zip(floors, grants, sizes, strict=True))
    assert sum(grants) == min(max(room, sum(floors)), sum(sizes))  # no room left unused
    share = max(room, sum(floors)) // len(sizes)
    assert all(g == s for g, s in zip(grants, sizes, strict=True) if s <= share)  # equal share: whole
    cut = [g for g, s in zip(grants, sizes, strict=True) if g < s]
    assert not cut or max(cut) - min(cut) <= 1  # the cut ones share evenly
    assert split_room(room, sizes) == grants  # deterministic


@given(room=st.integers(min_value=0, max_value=20_000), more=st.integers(min_value=1, max_value=500),
       sizes=_SIZES)
@settings(max_examples=300, deadline=None)
def test_a_larger_room_never_gives_any_part_less(room: int, more: int, sizes: list[int]) -> None:
    smaller, larger = split_room(room, sizes), split_room(room + more, sizes)
    assert all(a <= b for a, b in zip(smaller, larger, strict=True))


def test_a_short_result_in_a_parallel_batch_is_not_cut_beside_long_siblings() -> None:
    events: list[AnyEvent] = [
        UserInput("read the three modules"),
        ModelResponse(tool_calls=tuple(ToolCall(call_id=f"p{i}", name="read_file",
                                                arguments='{"path": "m.py"}') for i in range(3))),
        ToolResult(call_id="p0", content="".join(f"A{i} = {i}\n" for i in range(200))),
        ToolResult(call_id="p1", content="".join(f"B{i} = {i}\n" for i in range(30000))),
        ToolResult(call_id="p2", content="".join(f"C{i} = {i}\n" for i in range(30000)))]
    state = fold([RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)])
    for window in (8_000, 32_000):
        built = build_context(state, BuildConfig(provider="anthropic", window=window))
        results = {f.source_ref: f for f in built.manifest.fragments if f.kind == "tool_result"}
        short = results["call://r/p0@2"]
        assert not short.truncated and short.tokens == short.original_tokens == 1_200
        assert results["call://r/p1@2"].truncated and results["call://r/p2@2"].truncated

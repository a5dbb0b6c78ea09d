"""``redacted_units._reached``: the units with a payload held apart that a walk reached.

Why a test of its own: it answers from whichever side is smaller (a long run keeps ~1,000
units, ~40 of them with a payload; a short one may hold more payloads than it keeps), so
each side's answer is pinned to the definition: the kept units with a timeline or state
payload, and every ``over_budget`` unit.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contextfold.projections.redacted_units import _reached
from contextfold.projections.selection_units import Selection

_IDS = st.sets(st.sampled_from([f"u{i}" for i in range(40)]), max_size=40)


@given(kept=_IDS, loads=_IDS, state_loads=_IDS, over=_IDS)
def test_reached_is_the_kept_payload_units_and_the_one_over_budget(
        kept: set[str], loads: set[str], state_loads: set[str], over: set[str]) -> None:
    dropped = sorted(over - kept)
    selection = Selection(kept=dict.fromkeys(sorted(kept), 1), walked=dict.fromkeys(dropped, "over_budget"),
                          used=len(kept), over_budget=tuple(dropped))
    assert _reached(selection, loads, state_loads) == (
        {uid for uid in kept if uid in loads or uid in state_loads} | set(dropped))


def test_reached_answers_alike_from_either_side() -> None:
    """More payload units than kept ones, and fewer: the same definition."""
    kept = {f"k{i}": 1 for i in range(10)}
    selection = Selection(kept=kept, walked={"o": "over_budget"}, used=10, over_budget=("o",))
    few, many = {"k1", "x"}, {"k1", "k2", *(f"x{i}" for i in range(50))}
    assert _reached(selection, few, {"k3", "y"}) == {"k1", "k3", "o"}
    assert _reached(selection, many, {"k3", "y"}) == {"k1", "k2", "k3", "o"}

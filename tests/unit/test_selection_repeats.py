"""Selection with repeated media (``Unit.media``): a medium a unit kept before pays for is charged
its repeat line, and the selection promises still hold.

The request carries a medium once and a line for every other copy (``media_plan.finalize_media``);
the selection charged every copy the medium's price, so a budget that held the request dropped
a unit it had room for. Properties: never over budget (the grants are what is used), deterministic,
monotone, the same with a layer presorted, and every medium a kept unit sends paid in full once.
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain.errors import RequiredContextExceedsBudgetError
from contextfold.domain.manifest import DEFAULT_LAYER_SHARES
from contextfold.projections.repeat_charges import Repeat
from contextfold.projections.selection import Selection, Unit, select_units

LAYERS = ["policy", "recent", "retrieval", "history", "input"]
SHARES = {k: v for k, v in DEFAULT_LAYER_SHARES.items() if k != "tools"}


@st.composite
def units_with_media(draw: st.DrawFn) -> list[Unit]:
    """Units whose media come from a few images (the same key in several units), each with its
    price, its reduced price and its repeat line; tokens and smallest size count them as the
    builder does (text plus media; shrunk text plus media reduced)."""
    units = []
    for i in range(draw(st.integers(1, 30))):
        media = []
        for _ in range(draw(st.integers(0, 3))):
            full = draw(st.integers(0, 1500))
            media.append((draw(st.sampled_from("abcd")), full, draw(st.integers(0, full)),
                          draw(st.integers(1, 60))))
        text = draw(st.integers(1, 800))
        tokens = text + sum(m[1] for m in media)
        smallest = (draw(st.integers(1, text)) + sum(m[2] for m in media)) if draw(st.booleans()) else None
        units.append(Unit(f"u{i}", draw(st.sampled_from(LAYERS)), tokens, draw(st.floats(0, 200)), i,
                          required=draw(st.integers(0, 7)) == 0, min_tokens=smallest, media=tuple(media)))
    return units


def _select(units: list[Unit], budget: int) -> Selection | None:
    try:
        return select_units(units, budget, shares=SHARES)
    except RequiredContextExceedsBudgetError:
        return None


@settings(max_examples=300, deadline=None)
@given(units_with_media(), st.integers(1, 20_000))
def test_never_over_budget_and_each_medium_paid_once(units: list[Unit], budget: int) -> None:
    sel = _select(units, budget)
    if sel is None:
        return
    assert sum(sel.kept.values()) == sel.used <= budget
    by_id = {u.id: u for u in units}
    whole = [by_id[uid] for uid in sel.kept if uid not in sel.cut]
    for u in whole:  # granted its tokens, less what its repeats saved
        assert sel.kept[u.id] == u.tokens - sel.repeats.get(u.id, Repeat(0, frozenset())).saved
    for uid in sel.cut:
        u = by_id[uid]
        assert u.min_tokens is not None and sel.kept[uid] >= 0
    # what the units kept whole were granted pays for each medium they send at its dearest once
    dearest: dict[str, int] = defaultdict(int)
    for u in whole:
        for key, full, _, _ in u.media:
            dearest[key] = max(dearest[key], full)
    text = sum(u.tokens - sum(m[1] for m in u.media) for u in whole)
    assert sum(sel.kept[u.id] for u in whole) >= text + sum(dearest.values())


@settings(max_examples=200, deadline=None)
@given(units_with_media(), st.integers(1, 20_000))
def test_deterministic_whatever_the_input_order(units: list[Unit], budget: int) -> None:
    a, b = _select(units, budget), _select(list(reversed(units)), budget)
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert (a.kept, a.repeats) == (b.kept, b.repeats)


@settings(max_examples=300, deadline=None)
@given(units_with_media(), st.integers(1, 20_000), st.integers(0, 20_000))
def test_larger_budget_never_drops_what_a_smaller_kept(units: list[Unit], small: int, extra: int) -> None:
    a, b = _select(units, small), _select(units, small + extra)
    if a is None:
        return
    assert b is not None
    assert set(a.kept) <= set(b.kept)
    for uid, grant in a.kept.items():
        assert b.kept[uid] >= grant


@settings(max_examples=300, deadline=None)
@given(units_with_media(), st.integers(1, 20_000), st.sampled_from(LAYERS))
def test_a_presorted_layer_selects_alike(units: list[Unit], budget: int, layer: str) -> None:
    """The walk's reach grows by what repeats may save (``repeat_charges.reach``): handed in sorted, as
    the builder hands the timeline, a layer is walked as far as it is handed in whole."""
    presorted = {layer: sorted((u for u in units if u.layer == layer and not u.required),
                               key=lambda u: u.rank)}
    rest = [u for u in units if u.required or u.layer != layer]
    a = _select(units, budget)
    try:
        b: Selection | None = select_units(rest, budget, shares=SHARES, presorted=presorted)
    except RequiredContextExceedsBudgetError:
        b = None
    assert (a is None) == (b is None)
    if a is not None and b is not None:
        assert (a.kept, a.dropped, a.used, a.cut, a.repeats) == (b.kept, b.dropped, b.used, b.cut, b.repeats)


def test_a_repeat_of_the_current_inputs_image_is_charged_its_line() -> None:
    """The current input (required) and an older one show the same 700-token image: the older is
    kept at its text and the line (50 + 30) where the budget holds both, not dropped for 700."""
    current = Unit("e4", "input", 40 + 700, 0.0, 4, required=True, media=(("img", 700, 85, 30),))
    older = Unit("e2", "history", 50 + 700, 10.0, 2, media=(("img", 700, 85, 30),))
    sel = select_units([current, older], 740 + 80, shares=SHARES)
    assert sel.kept == {"e4": 740, "e2": 80} and sel.used == 820
    assert sel.repeats == {"e2": Repeat(670, frozenset({"img"}))}
    assert "e2" not in _kept_at(current, older, 740 + 79)


def test_a_dearer_copy_pays_what_the_one_before_did_not() -> None:
    """A copy priced higher than the one paid for (another detail) pays the difference beside its
    line: the request may show the dearer copy."""
    low = Unit("low", "input", 10 + 85, 0.0, 4, required=True, media=(("img", 85, 85, 30),))
    high = Unit("high", "history", 10 + 765, 10.0, 2, media=(("img", 765, 85, 30),))
    sel = select_units([low, high], 10_000, shares=SHARES)
    assert sel.kept["high"] == 10 + 30 + (765 - 85)


def test_a_required_unit_cut_to_fit_pays_for_no_repeat() -> None:
    """A required unit cut (its media may go reduced) is no payer: the other copy pays in full."""
    current = Unit("e4", "input", 900 + 700, 0.0, 4, required=True, min_tokens=48 + 85,
                   media=(("img", 700, 85, 30),))
    older = Unit("e2", "history", 50 + 700, 10.0, 2, media=(("img", 700, 85, 30),))
    def cut(required: object, room: int) -> dict[str, int]:
        return {"e4": 1_000}

    sel = select_units([current, older], 1_100, shares=SHARES, shrink_required=cut)
    assert sel.kept == {"e4": 1_000} and not sel.repeats  # 100 left: the line's 80, not the image's 750
    assert "e2" not in sel.kept and sel.dropped == {"e2": "over_budget"}


def _kept_at(current: Unit, older: Unit, budget: int) -> dict[str, int]:
    return select_units([current, older], budget, shares=SHARES).kept

"""The selection promises, each a property: never over budget, deterministic, monotone, required first."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain.errors import RequiredContextExceedsBudgetError
from contextfold.domain.manifest import DEFAULT_LAYER_SHARES
from contextfold.projections.selection import REST_STEP, Unit, select_units, walk_shares

LAYERS = ["policy", "goal", "plan", "recent", "retrieval", "history", "input"]
SHARES = {k: v for k, v in DEFAULT_LAYER_SHARES.items() if k != "tools"}


@st.composite
def unit_sets(draw: st.DrawFn) -> list[Unit]:
    n = draw(st.integers(0, 40))
    units = []
    for i in range(n):
        tokens = draw(st.integers(1, 2000))
        shrink = draw(st.booleans())
        min_tokens = draw(st.integers(1, tokens)) if shrink else None
        required = draw(st.integers(0, 9)) == 0
        # a required unit may be required in part only (the latest error: ``Unit.part``)
        part = (draw(st.integers(min_tokens, tokens)) if required and min_tokens is not None
                and draw(st.booleans()) else None)
        # and required only where it fits (the latest error again: ``Unit.if_fits``)
        if_fits = required and draw(st.integers(0, 3)) == 0
        # its rest competing in steps, with a share of its own (the newest group: ``Unit.rest_share``)
        rest_share = draw(st.sampled_from([None, 3.0, 0.5])) if part is not None else None
        units.append(Unit(
            id=f"u{i}", layer=draw(st.sampled_from(LAYERS)), tokens=tokens,
            score=draw(st.floats(0, 200, allow_nan=False)), position=i,
            required=required, min_tokens=min_tokens, part=part, if_fits=if_fits, rest_share=rest_share))
    return units


def _required(u: Unit) -> int:
    return u.tokens if u.part is None else u.part


def _fits(units: list[Unit], budget: int, *, lifted: bool = False) -> bool:
    """Whether the required units (with ``lifted``, those without ``if_fits``) fit, each at what
    it requires."""
    return sum(_required(u) for u in units if u.required and not (lifted and u.if_fits)) <= budget


def _select(units: list[Unit], budget: int) -> dict[str, int] | None:
    try:
        return select_units(units, budget, shares=SHARES).kept
    except RequiredContextExceedsBudgetError:
        return None


@settings(max_examples=300, deadline=None)
@given(unit_sets(), st.integers(1, 20_000))
def test_never_over_budget_and_required_always_kept(units: list[Unit], budget: int) -> None:
    kept = _select(units, budget)
    if kept is None:
        assert not _fits(units, budget, lifted=True)
        return
    assert sum(kept.values()) <= budget
    if _fits(units, budget):
        assert all(u.id in kept for u in units if u.required)
    else:  # the ``if_fits`` units do not fit: the other required units alone
        assert set(kept) == {u.id for u in units if u.required and not u.if_fits}
    for u in units:
        if u.id in kept and kept[u.id] < u.tokens:
            assert u.shrinkable and kept[u.id] >= (u.min_tokens or 0)


@settings(max_examples=200, deadline=None)
@given(unit_sets(), st.integers(1, 20_000))
def test_deterministic_whatever_the_input_order(units: list[Unit], budget: int) -> None:
    assert _select(units, budget) == _select(list(reversed(units)), budget)


@settings(max_examples=300, deadline=None)
@given(unit_sets(), st.integers(1, 20_000), st.integers(0, 20_000))
def test_larger_budget_never_drops_what_a_smaller_kept(units: list[Unit], small: int, extra: int) -> None:
    a = _select(units, small)
    b = _select(units, small + extra)
    if a is None:
        return
    assert b is not None
    assert set(a) <= set(b)
    for uid, grant in a.items():
        assert b[uid] >= grant  # kept at least as whole


@st.composite
def with_a_giant_newest(draw: st.DrawFn) -> list[Unit]:
    """``unit_sets`` and a newest group of up to 60,000 tokens required down to its head and tail,
    its rest competing in ``REST_STEP`` steps with a share of its own: at a small budget its steps
    past the budget are one unit (``selection._parts``), at a larger one more of them are steps."""
    tokens = draw(st.integers(1, 60_000))
    min_tokens = draw(st.integers(1, min(tokens, 400)))
    part = draw(st.integers(min_tokens, min(tokens, 600)))
    newest = Unit("newest", "recent", tokens, 50.0, 10_000, required=True, min_tokens=min_tokens,
                  part=part, rest_share=draw(st.sampled_from([3.0, 0.5, 10.0])))
    return [*draw(unit_sets()), newest]


@settings(max_examples=300, deadline=None)
@given(with_a_giant_newest(), st.integers(1, 70_000), st.integers(0, 70_000))
def test_a_giant_rest_in_steps_keeps_the_promises(units: list[Unit], small: int, extra: int) -> None:
    a = _select(units, small)
    b = _select(units, small + extra)
    assert a == _select(list(reversed(units)), small)
    if a is None:
        return
    assert b is not None and sum(a.values()) <= small and sum(b.values()) <= small + extra
    assert set(a) <= set(b) and all(b[uid] >= grant for uid, grant in a.items())
    newest = units[-1]
    if "newest" in a and a["newest"] < newest.tokens:  # cut: the walk stopped at a step of its rest
        assert a["newest"] >= min(newest.part or newest.tokens, newest.min_tokens or newest.tokens)


def test_the_rest_of_a_giant_newest_group_leaves_the_small_units_their_share() -> None:
    """The newest group's rest (``Unit.rest_share``) walks in steps beside the other layers: an
    instruction, the plan and the recent groups are kept, and the rest takes all the room left."""
    units = [Unit("newest", "recent", 120_000, 10.0, 100, required=True, min_tokens=80, part=240,
                  rest_share=3.0),
             Unit("instruction", "policy", 34, 90.0, 1), Unit("plan", "plan", 60, 80.0, 2),
             Unit("r1", "recent", 400, 60.0, 98), Unit("r2", "recent", 500, 60.0, 99),
             *(Unit(f"h{i}", "history", 300, 20.0 + i, 10 + i) for i in range(40))]
    kept = select_units(units, 12_000, shares=SHARES).kept
    assert {"instruction", "plan", "r1", "r2"} <= kept.keys()
    assert sum(kept.values()) == 12_000 and kept["newest"] >= 0.7 * 12_000
    assert sum(1 for uid in kept if uid.startswith("h")) < 40  # old history gets only its share


def test_unused_reserve_flows_to_other_layers() -> None:
    # only history has candidates: it may use the whole budget, not just its 25% share
    units = [Unit(f"h{i}", "history", 100, 50.0 - i, i) for i in range(10)]
    kept = select_units(units, 1000, shares=SHARES).kept
    assert len(kept) == 10


def test_reserves_share_the_budget_between_layers() -> None:
    history = [Unit(f"h{i}", "history", 100, 90.0, i) for i in range(50)]
    retrieval = [Unit(f"r{i}", "retrieval", 100, 10.0, 100 + i) for i in range(50)]
    kept = select_units(history + retrieval, 2000, shares=SHARES).kept
    n_retrieval = sum(1 for k in kept if k.startswith("r"))
    # retrieval's share (0.15) against history's (0.25): both layers get budget, ~3:5
    assert 5 <= n_retrieval <= 10
    assert sum(kept.values()) == 2000


def test_required_over_budget_carries_the_fragments_and_sizes() -> None:
    units = [Unit("policy", "policy", 700, 100, 1, required=True),
             Unit("input", "input", 500, 80, 2, required=True)]
    with pytest.raises(RequiredContextExceedsBudgetError) as info:
        select_units(units, 1000, shares=SHARES)
    assert info.value.required == [("policy", 700), ("input", 500)]
    assert info.value.required_tokens == 1200


def test_first_misfit_is_truncated_before_it_is_dropped() -> None:
    units = [Unit("small", "history", 100, 90, 2), Unit("big", "history", 5000, 80, 1, min_tokens=60)]
    sel = select_units(units, 1000, shares=SHARES)
    assert sel.kept == {"small": 100, "big": 900}


def _reference(units: list[Unit], budget: int) -> tuple[dict[str, int], dict[str, str]] | None:
    """The documented walk, written plainly: every optional unit in virtual-finish-time order."""
    import math

    required = [u for u in units if u.required]
    kept = {u.id: _required(u) for u in required}
    used = sum(kept.values())
    if used > budget:
        lifted = [u for u in required if u.if_fits]
        if not lifted or not _fits(units, budget, lifted=True):
            return None  # with none required only where it fits, or the others alone over: the error
        # the others alone, each at its part; the ``if_fits`` ones over budget, all else low priority
        return ({u.id: _required(u) for u in required if not u.if_fits},
                {**dict.fromkeys((u.id for u in units if not u.required), "low_priority"),
                 **dict.fromkeys((u.id for u in lifted), "over_budget")})
    # a unit required in part: the rest is an optional unit ranked as it is, shrinkable to nothing;
    # with a share of its own, every REST_STEP tokens of it a unit, in a layer of its own
    rests: dict[str, Unit] = {}
    shares = dict(walk_shares(SHARES))  # an instruction takes room from the volatile layers
    for u in required:
        if u.part is None or u.part >= u.tokens:
            continue
        size = u.tokens - u.part
        if u.rest_share is None:
            rests[f"{u.id}+rest"] = Unit(f"{u.id}+rest", u.layer, size, u.score, u.position, min_tokens=0)
            continue
        shares[f"{u.id}+rest"] = u.rest_share * sum(SHARES.values())
        for i, start in enumerate(range(0, size, REST_STEP)):
            rests[f"{u.id}+rest.{i}"] = Unit(f"{u.id}+rest.{i}", f"{u.id}+rest", min(REST_STEP, size - start),
                                             u.score - i, u.position, min_tokens=0)
    owner = {rid: rid.split("+")[0] for rid in rests}
    optional = [u for u in units if not u.required] + list(rests.values())
    keyed = []
    for layer in {u.layer for u in optional}:
        members = sorted((u for u in optional if u.layer == layer),
                         key=lambda u: (-u.score, -u.position, u.id))
        share, cumulative = shares.get(layer, 0.0), 0
        for u in members:
            cumulative += u.tokens
            keyed.append((cumulative / share if share > 0 else math.inf, -u.score, -u.position, u.id, u))
    keyed.sort(key=lambda k: k[:4])
    dropped: dict[str, str] = {}
    stopped = False
    for *_, u in keyed:
        if stopped:
            dropped[u.id] = "low_priority"
        elif u.tokens <= budget - used:
            kept[u.id] = u.tokens
            used += u.tokens
        else:
            stopped = True
            room = budget - used
            floor = max(u.tokens if u.min_tokens is None else u.min_tokens, 48)
            if u.shrinkable and floor <= room:
                if u.layer == "policy":  # the stable prefix is cut in eighths of its size
                    room = max(floor, room - room % max(1, u.tokens // 8))
                kept[u.id] = room
                used += room
            else:
                dropped[u.id] = "over_budget"
    for rid in rests:  # a rest's grant is its unit's; a rest left out is nothing left out
        kept[owner[rid]] += kept.pop(rid, 0)
        dropped.pop(rid, None)
    return kept, dropped


@settings(max_examples=400, deadline=None)
@given(unit_sets(), st.integers(1, 20_000), st.sampled_from(LAYERS))
def test_reachable_heads_and_presorted_layers_select_what_the_plain_walk_selects(
        units: list[Unit], budget: int, sorted_layer: str) -> None:
    """Ordering only the reachable head of each layer, and taking a layer presorted by rank
    (as the timeline's cold units are), changes nothing."""
    _as_the_plain_walk(units, budget, sorted_layer)


@settings(max_examples=300, deadline=None)
@given(with_a_giant_newest(), st.integers(1, 70_000), st.sampled_from(LAYERS))
def test_a_giant_rest_selects_what_the_plain_walk_of_all_its_steps_selects(
        units: list[Unit], budget: int, sorted_layer: str) -> None:
    """Its steps past the budget made one unit (``selection._parts``) change nothing."""
    _as_the_plain_walk(units, budget, sorted_layer)


def _as_the_plain_walk(units: list[Unit], budget: int, sorted_layer: str) -> None:
    expected = _reference(units, budget)
    presorted = {sorted_layer: sorted((u for u in units if u.layer == sorted_layer and not u.required),
                                      key=lambda u: u.rank)}
    rest = [u for u in units if u.required or u.layer != sorted_layer]
    for args, kwargs in (((units, budget), {}), ((rest, budget), {"presorted": presorted})):
        try:
            sel = select_units(*args, shares=SHARES, **kwargs)  # type: ignore[arg-type]
        except RequiredContextExceedsBudgetError:
            assert expected is None
            continue
        assert expected is not None
        assert (sel.kept, sel.dropped) == expected
        assert set(sel.over_budget) == {k for k, v in sel.dropped.items() if v == "over_budget"}
        by_id = {u.id: u for u in units}
        assert set(sel.cut) == {k for k, v in sel.kept.items() if v < by_id[k].tokens}
        unlisted = select_units(*args, shares=SHARES, list_unreached=False, **kwargs)  # type: ignore[arg-type]
        assert unlisted.unreached == () and unlisted.dropped == unlisted.walked == sel.walked
        assert (unlisted.kept, unlisted.used, unlisted.over_budget, unlisted.cut) == (
            sel.kept, sel.used, sel.over_budget, sel.cut)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 900), max_size=1300), st.integers(0, 200_000))
def test_reach_in_chunks_equals_the_whole_prefix_sum(sizes: list[int], room: int) -> None:
    """The walk's reach: the units whose layer-cumulative size fits, plus the misfit."""
    from itertools import accumulate

    from contextfold.projections.selection import _reach

    members = [Unit(f"u{i}", "history", t, 0.0, i) for i, t in enumerate(sizes)]
    want = min(sum(1 for c in accumulate(sizes) if c <= room) + 1, len(sizes))
    assert _reach(members, room) == want


TOOL_NAMES = [f"t{i}" for i in range(6)]
ALL_SHARES = dict(DEFAULT_LAYER_SHARES)


@st.composite
def units_with_tools(draw: st.DrawFn) -> tuple[list[Unit], dict[str, tuple[str, int]], bool]:
    """Units whose groups call tools (``needs``), the tools' own units (some pinned: required, some
    optional, some with no unit of their own: kept only with a group), and whether the history
    layer is handed in presorted, as the builder does."""
    tools = {name: (f"tool:{name}", draw(st.integers(1, 400))) for name in TOOL_NAMES}
    units = []
    for tool_id, tokens in tools.values():
        kind = draw(st.sampled_from(["pinned", "optional", "none"]))
        if kind != "none":
            units.append(Unit(tool_id, "tools", tokens, 100.0 + draw(st.floats(0, 10)), 0,
                              required=kind == "pinned"))
    for i in range(draw(st.integers(0, 30))):
        tokens = draw(st.integers(1, 1500))
        shrink = draw(st.booleans())
        needs = tuple(sorted(draw(st.sets(st.sampled_from([*TOOL_NAMES, "unknown"]), max_size=3))))
        min_tokens = draw(st.integers(1, tokens)) if shrink else None
        required = draw(st.integers(0, 9)) == 0
        part = (draw(st.integers(min_tokens, tokens)) if required and min_tokens is not None
                and draw(st.booleans()) else None)
        units.append(Unit(f"u{i}", draw(st.sampled_from(LAYERS)), tokens, draw(st.floats(0, 200)), i,
                          required=required, min_tokens=min_tokens, needs=needs, part=part,
                          if_fits=required and draw(st.integers(0, 3)) == 0))
    return units, tools, draw(st.booleans())


def _select_with_tools(units: list[Unit], tools: dict[str, tuple[str, int]], presort: bool,
                       budget: int) -> dict[str, int] | None:
    history = sorted((u for u in units if u.layer == "history" and not u.required), key=lambda u: u.rank)
    rest = [u for u in units if u not in history] if presort else units
    try:
        selection = select_units(rest, budget, shares=ALL_SHARES, tools=tools,
                                 presorted={"history": history} if presort else None)
    except RequiredContextExceedsBudgetError:
        return None
    assert selection.used == sum(selection.kept.values())  # a tool kept once, paid once
    return selection.kept


@settings(max_examples=500, deadline=None)
@given(units_with_tools(), st.integers(1, 12_000), st.integers(0, 12_000))
def test_a_kept_unit_keeps_the_tools_it_needs_within_budget_and_monotone(
        drawn: tuple[list[Unit], dict[str, tuple[str, int]], bool], small: int, extra: int) -> None:
    """Tools kept with the groups that call them: never over budget, a kept group's tools kept, a
    tool nobody kept or needs never kept for a group, and a larger budget keeps a superset."""
    units, tools, presort = drawn
    a = _select_with_tools(units, tools, presort, small)
    b = _select_with_tools(units, tools, presort, small + extra)
    if a is None:  # the required units without ``if_fits`` do not fit, with the tools they need
        needed = {tools[n][0] for u in units if u.required and not u.if_fits for n in u.needs if n in tools}
        assert sum(_required(u) for u in units if u.required and not u.if_fits) + sum(
            tokens for tool_id, tokens in tools.values() if tool_id in needed
            and tool_id not in {u.id for u in units if u.required}) > small
        return
    assert b is not None
    for kept, budget in ((a, small), (b, small + extra)):
        assert sum(kept.values()) <= budget
        for u in units:
            if u.id in kept:
                assert all(tools[n][0] in kept for n in u.needs if n in tools)
        own = {u.id for u in units}
        for tool_id, _ in tools.values():  # a tool with no unit of its own: only with a group
            if tool_id in kept and tool_id not in own:
                assert any(u.id in kept and tools.get(n, ("",))[0] == tool_id for u in units for n in u.needs)
    assert set(a) <= set(b)
    assert all(b[uid] >= grant for uid, grant in a.items())


def test_a_tool_a_required_unit_needs_is_not_counted_again_in_its_layers_reach() -> None:
    """A tool kept with a required group was paid for before the walk, yet its own unit still
    counted in the tools layer's reach: the reach ended short, the walk ended without a stop and
    raised "units were out of reach" (found by the property above in CI)."""
    tools = {"t0": ("tool:t0", 300), "t1": ("tool:t1", 300), "t2": ("tool:t2", 1)}
    units = [Unit("g", "recent", 10, 50.0, 1, required=True, needs=("t0",)),
             Unit("tool:t0", "tools", 300, 103.0, 0), Unit("tool:t1", "tools", 300, 102.0, 0),
             Unit("tool:t2", "tools", 1, 101.0, 0)]
    selection = select_units(units, 611, shares=ALL_SHARES, tools=tools)
    assert selection.kept == {"g": 10, "tool:t0": 300, "tool:t1": 300, "tool:t2": 1}
    assert selection.needed == {"tool:t0"} and selection.used == 611


def test_a_unit_required_in_part_keeps_its_part_and_its_rest_competes() -> None:
    """The latest error (``Unit.part``): its part is required, its rest is walked as an optional unit
    ranked as it is: left out at a small budget (the unit stays, cut to its part), cut to the
    room left at a larger one, whole when it fits; never listed as a dropped unit."""
    units = [Unit("err", "history", 5000, 10.0, 1, required=True, min_tokens=60, part=200),
             Unit("read", "history", 500, 90.0, 2, min_tokens=50),
             Unit("latest", "recent", 300, 95.0, 3, required=True)]
    small = select_units(units, 900, shares=SHARES)
    assert small.kept == {"err": 200, "latest": 300, "read": 400}
    assert set(small.cut) == {"err", "read"} and small.dropped == {} and small.over_budget == ()
    larger = select_units(units, 2000, shares=SHARES)
    assert larger.kept == {"err": 1200, "latest": 300, "read": 500} and set(larger.cut) == {"err"}
    whole = select_units(units, 6000, shares=SHARES)
    assert whole.kept == {"err": 5000, "latest": 300, "read": 500} and whole.cut == ()
    with pytest.raises(RequiredContextExceedsBudgetError) as info:
        select_units(units, 400, shares=SHARES)
    assert info.value.required == [("err", 200), ("latest", 300)]


def test_a_unit_required_only_where_it_fits_is_left_out_with_everything_optional_where_it_does_not() -> None:
    """The latest error (``Unit.if_fits``) with 1,800 tokens no cut shortens: at 1,500 it was the
    typed error although the newest exchange fitted. It is left out, and so is the optional read
    (kept there, a read would be dropped at 2,100, where the error takes what the exchange left)."""
    units = [Unit("err", "history", 1800, 10.0, 1, required=True, if_fits=True),
             Unit("read", "history", 300, 90.0, 2),
             Unit("latest", "recent", 300, 95.0, 3, required=True)]
    small = select_units(units, 1500, shares=SHARES)
    assert small.kept == {"latest": 300} and small.over_budget == ("err",)
    assert small.dropped == {"err": "over_budget", "read": "low_priority"}
    assert select_units(units, 2100, shares=SHARES).kept == {"err": 1800, "latest": 300}
    assert select_units(units, 2400, shares=SHARES).kept == {"err": 1800, "latest": 300, "read": 300}
    with pytest.raises(RequiredContextExceedsBudgetError) as info:  # the others alone do not fit
        select_units(units, 200, shares=SHARES)
    assert info.value.required == [("latest", 300)]


def test_a_cut_instruction_keeps_one_length_while_the_room_beside_it_changes_little() -> None:
    """The stable prefix cut to the room left changed its text (and the cache key) at every turn
    as the history grew: cut in eighths of its size, it is cut alike over a range of budgets, and
    never longer at a smaller one."""
    instruction = Unit("instr", "policy", 800, 50.0, 0, min_tokens=0)
    history = [Unit(f"h{i}", "history", 100, 10.0 - i, i + 1) for i in range(30)]
    grants = []
    for budget in range(500, 1_000, 10):
        sel = select_units([instruction, *history], budget, shares=SHARES)
        if "instr" in sel.cut:
            grants.append(sel.kept["instr"])
            assert sel.kept["instr"] % 100 == 0  # an eighth of 800
    assert len(grants) >= 20 and len(set(grants)) <= len(grants) // 5, grants
    assert grants == sorted(grants)

"""Selection over units whose large payloads are priced as they are shown: redacted
(:func:`select_redacted`).

Why: a payload held apart from the fold (an artifact, or a tool result text longer than
``entries.LAZY_TEXT_CHARS``) is costed from its logged text, and redacted only when a build needs
its text: scanning every long output of a long run before selection cost minutes on its first
build. Its ``[REDACTED:...]`` placeholders may cost more tokens than the secrets they replace
(``pw7x`` is 3 tokens, ``[REDACTED:secret_assignment]`` 8), so its redacted text no longer fitted
the grant its unit was selected with, and was cut back to it at every window: a 400-line
``.env`` dump lost a quarter of its lines at 200,000.

How, without scanning every payload: a unit's price is its logged one, raised to its redacted
text's where that is larger (:func:`redacted_unit`; a redaction that shortens a payload leaves
its price as logged, an over-estimate that never over-fills). Only the units the walk reaches
(kept, cut or the one it stops at, ``over_budget``) need their price: selection runs with the
prices known, the units it reached that hold a larger payload are priced, and it runs again until
every unit it reaches is priced (:func:`select_redacted`; one more run per build that reaches a
payload of this kind, none otherwise). The result is the selection with every unit so priced:

- the walk's order does not depend on a unit's price here: a unit keeps its score (from its
  logged price: a unit's rank cannot wait for a text nobody read), and its virtual finish time
  depends on the sizes of the units before it in its layer only;
- raising the price of a unit the walk never reached moves it, and the units after it in its
  layer, later in that order, behind the unit the walk stopped at: what the walk reached and
  what it kept are the same.

So the promises of ``selection`` (never over budget, deterministic, monotone in the budget) hold
for the prices as if every unit had been priced, and a kept unit's grant holds its redacted text
whole. What a build reports for a unit it did not reach (its ``low_priority`` line) is its logged
price, whatever units other budgets reached.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from contextfold.domain.errors import RequiredContextExceedsBudgetError
from contextfold.projections.fragment_facts import BuildCtx
from contextfold.projections.selection import RANK, Selection, Unit
from contextfold.projections.timeline_units import ERROR_DIAGNOSIS_TOKENS
from contextfold.projections.units import Units

__all__ = ["redacted_unit", "select_redacted", "with_prices"]

Walk = Callable[[Sequence[Unit], Mapping[str, Sequence[Unit]]], Selection]
"""``select_units`` over the given units and presorted layers (the builder's arguments bound)."""


def redacted_unit(ctx: BuildCtx, unit: Unit, ids: Sequence[str]) -> Unit | None:
    """``unit`` priced by its large payloads' redacted texts (``BuildCtx.redacted_facts``), or
    None when that price is not above its own. Its score, and so its rank, stay as they were;
    its smallest cut and required part follow its members' (``timeline_units._row``)."""
    delta = smallest = 0
    for fid in ids:
        red = ctx.redacted_facts(fid)
        if red is not None:
            base = ctx.base_facts(fid)
            delta += red.cost - base.cost
            smallest += red.min_cost - base.min_cost
    if delta <= 0:
        return None
    tokens = unit.tokens + delta
    min_tokens = None if unit.min_tokens is None else min(tokens, unit.min_tokens + smallest)
    part = unit.part
    if part is not None and min_tokens is not None:
        part = min(tokens, min_tokens + ERROR_DIAGNOSIS_TOKENS)
    return replace(unit, tokens=tokens, min_tokens=min_tokens, part=part)


def _priced(ctx: BuildCtx, uid: str, candidates: Units) -> Unit | None:
    """:func:`redacted_unit` of unit ``uid``, kept per configuration while the unit and its
    fragments' entries are the same objects (a long run's builds reach the same ~40 units with
    a payload each time: asking again for each fragment's redaction is wasted)."""
    memo = ctx.objects_for("redacted-units")
    unit, ids = candidates.unit_of[uid], candidates.members[uid]
    entries = ctx.state.entries
    hit = memo.get(uid)
    if hit is not None and hit[0] is unit and all(map(operator.is_, map(entries.__getitem__, ids), hit[1])):
        priced: Unit | None = hit[2]
        return priced
    priced = redacted_unit(ctx, unit, ids)
    memo[uid] = (unit, tuple(entries[fid] for fid in ids), priced)
    return priced


def with_prices(units: Sequence[Unit], presorted: Mapping[str, Sequence[Unit]], priced: Mapping[str, Unit]
                ) -> tuple[Sequence[Unit], Mapping[str, Sequence[Unit]]]:
    """``units`` and ``presorted`` with the units of ``priced`` in place of theirs (the same rank:
    each stays where it was in its sorted layer; a layer changed is a copy, never the timeline's)."""
    if not priced:
        return units, presorted
    units = [priced.get(u.id, u) for u in units]
    copied: dict[str, list[Unit]] = {}
    for u in priced.values():
        layer = copied.get(u.layer) or presorted.get(u.layer)
        if u.required or not layer:  # a required unit, or a state unit: in ``units``
            continue
        i = bisect_left(layer, u.rank, key=RANK)
        if i < len(layer) and layer[i].id == u.id:
            mine = copied.get(u.layer)
            if mine is None:
                mine = copied[u.layer] = list(layer)
            mine[i] = u
    return units, {**presorted, **copied} if copied else presorted


def select_redacted(ctx: BuildCtx, walk: Walk, units: Sequence[Unit], candidates: Units
                    ) -> tuple[Selection, dict[str, Unit]]:
    """``walk`` over ``units`` and the timeline's sorted layers, every unit it reaches priced by
    its redacted payloads (module docstring); and those of the units it kept or stopped at that
    were priced so (their prices for the rest of the build). The typed error of required units
    that do not fit is raised at their priced sizes."""
    loads = candidates.timeline.artifact_units
    state_loads = {uid for uid in candidates.state_ids if ctx.base_facts(uid).has_artifact_text}
    presorted = candidates.presorted
    if ctx.policy is None or not (loads or state_loads):  # nothing held apart: every price is known
        return walk(units, presorted), {}
    # The last build's priced units that are still the candidates' (an agent loop keeps the same
    # outputs from build to build): priced from the start, so such a build walks once. Any units
    # priced first give the same selection (module docstring).
    last = ctx.objects_for("redacted-reached")
    priced: dict[str, Unit] = {}
    looked: set[str] = set()
    for uid in last.get("last", ()):
        if uid in candidates.unit_of:
            looked.add(uid)
            if (unit := _priced(ctx, uid, candidates)) is not None:
                priced[uid] = unit
    while True:
        error: RequiredContextExceedsBudgetError | None = None
        try:
            selection = walk(*with_prices(units, presorted, priced))
            reached: Sequence[str] | set[str] = _reached(selection, loads, state_loads)
        except RequiredContextExceedsBudgetError as exc:
            error, reached = exc, [uid for uid, _ in exc.required]
        more = False
        for uid in reached:
            if uid in looked or not (uid in loads or uid in state_loads):
                continue
            looked.add(uid)
            unit = _priced(ctx, uid, candidates)
            if unit is not None:
                priced[uid] = unit
                more = True
        if more:
            continue
        if error is not None:
            raise error
        final = {uid: u for uid, u in priced.items() if uid in selection.kept or uid in selection.over_budget}
        last["last"] = tuple(final)
        return selection, final


def _reached(selection: Selection, loads: set[str], state_loads: set[str]) -> set[str]:
    """The units with a payload held apart that the walk reached: kept (whole or cut) or
    ``over_budget``. Intersected in C, which walks the smaller side: a long run keeps ~1,000
    units, ~40 of them with one (a comprehension over that side was ~900 bytecodes of a long
    run's ~55,000 per first build)."""
    kept = selection.kept.keys()
    out = kept & loads
    if state_loads:
        out |= kept & state_loads
    out.update(selection.over_budget)
    return out

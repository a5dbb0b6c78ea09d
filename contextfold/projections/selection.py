"""Budgeted selection: required first, then fair-share reserves, then a monotone greedy.

The promises (each a property test in ``tests/unit/test_selection.py``):

1. never over budget;
2. deterministic (a pure function of its inputs, ties broken by position);
3. monotone: a larger budget never drops a unit a smaller budget kept;
4. order within a layer is preserved (selection returns ids; the layout keeps log order).

How reserves and monotonicity live together. Per-layer reserves are shares
of the budget (``DEFAULT_LAYER_SHARES``). Instead of filling each reserve and
then pooling the rest — which is *not* monotone: a bigger budget can let one
layer's large item fit its reserve and starve another layer of pool space it
used to get — every optional unit gets a *virtual finish time*, as in
weighted fair queueing::

    vtime(u) = (tokens of u and of the better-scored units of its layer) / share(layer)

and the units are taken in ascending ``vtime`` order (ties: higher score,
then newer). That single order does not depend on the budget, so the kept
set is always a prefix of it: monotone by construction. At any budget each
layer has received about its share, and a layer that runs out of candidates
leaves its share to the others ("unused reserve flows on").

The walk stops at the first unit that does not fit. If that unit can be
shortened (a long tool result, document or file), it is truncated to the
space left and kept; then the walk stops. Skipping a misfit and continuing
with smaller units would fill better but break promise 3.

An instruction (the stable prefix's optional units) is ordered with the volatile layers' shares
added to its own (:func:`walk_shares`), so a growing history does not make it the walk's stop,
cut at one turn and whole at the next, moving the prompt cache's key.

A unit may be required in part only (``Unit.part``): the rest of it is walked as an optional
unit. The latest error's rest is ranked as its unit in its layer; the newest group's (past a
bound on its size) is a layer of its own with a large share, walked in ``REST_STEP`` steps
(``Unit.rest_share``): required whole, a 120,000-token log took all but 114 tokens of a 128k
build and left out a 34-token instruction and every earlier step; as a layer of its own,
walked step by step beside the others, it leaves them their shares of the room (the small units
first) and still takes most of it.

A medium a unit kept before in the walk (or a required unit kept whole) pays for is charged as
its repeat line (``Unit.media``, ``repeat_charges``), as the request carries it; what that saved
is ``Selection.repeats``. A unit's cost depends only on the units before it in the walk's fixed
order, so the promises hold. Charged the medium's price, a repeat of the current input's image
made a tight budget drop the older input that shows it.

Score of a unit (documented; higher = earlier within its layer)::

    score = priority - 0.4 * age - 2 * log2(1 + tokens)

priority by kind (``state.DEFAULT_PRIORITY``), age = log positions between the
unit's newest fragment and the log's horizon, cost in tokens: newer, more
important, cheaper first. 100 positions of age weigh as much as 40 points of
priority; doubling a unit's tokens costs as much as 5 positions of age.

Why age is linear and not a decaying freshness: the log grows by the same
number of positions for every unit, so ``score + 0.4 * horizon = priority +
0.4 * position - 2 * log2(1 + tokens)`` does not depend on the horizon, and
neither does any order between two units. A unit is scored once, when its
item appears, and stays sorted; a build re-ranks only new or changed items.
(A freshness term like ``40 * 0.5 ** (age / 64)`` stops weighing after a few
half-lives: on a long run old items then competed on cost alone, so the
request kept ~1,000 short messages scattered over 10,000 instead of the
recent window, and every build re-scored every unit still decaying.)
:func:`score` returns that horizon-free form; only differences between scores
mean anything. ``ContextFragment.freshness`` is still reported (state).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Container, Mapping, Sequence
from itertools import accumulate, repeat
from operator import attrgetter, itemgetter, truediv

from contextfold.domain.errors import RequiredContextExceedsBudgetError
from contextfold.projections.repeat_charges import Repeat, pay, repeat_saving, repeat_slack
from contextfold.projections.selection_units import (
    AGE_WEIGHT,
    COST_WEIGHT,
    MIN_TRUNCATED_TOKENS,
    REST_STEP,
    Selection,
    Unit,
    score,
)
from contextfold.projections.stable_prefix_room import STABLE_LAYER, stable_grant, walk_shares

__all__ = [
    "AGE_WEIGHT",
    "COST_WEIGHT",
    "MIN_TRUNCATED_TOKENS",
    "REST_STEP",
    "Selection",
    "Unit",
    "score",
    "select_units",
    "walk_shares",
]

RANK = attrgetter("rank")
_ID = itemgetter(2)
_RANK_OF = itemgetter(1)


def _order(layers: Mapping[str, Sequence[Unit]], shares: Mapping[str, float]
           ) -> list[tuple[float, tuple[float, int, str], Unit]]:
    """Every optional unit as (virtual finish time, rank, unit), in the walk's order.

    ``layers``: each layer's units sorted by ``rank``. Built from C-level passes
    (accumulate, map, zip, one sort of already-sorted runs) because a long
    run's builds order thousands of units.
    """
    keyed: list[tuple[float, tuple[float, int, str], Unit]] = []
    for layer, members in layers.items():
        share = shares.get(layer, 0.0)
        cumulative = accumulate([u.tokens for u in members])  # (see _reach: not attrgetter)
        vtimes = map(truediv, cumulative, repeat(share)) if share > 0 else repeat(math.inf)
        keyed.extend(zip(vtimes, [u.rank for u in members], members, strict=False))  # vtimes may repeat
    keyed.sort(key=_KEY)
    return keyed


_KEY = itemgetter(0, 1)


def _reach(members: Sequence[Unit], room: int) -> int:
    """How many of a layer's ``members`` (sorted by rank) the walk can reach within ``room``.

    The walk keeps a layer's units in rank order, so it cannot get past the first
    unit whose layer-cumulative size exceeds ``room``: that one may be the misfit
    where the walk stops, everything after it is ``low_priority``. Ordering only
    the reachable heads is what keeps a long run's build from ordering its whole
    history.
    """
    n = len(members)
    start, total, chunk = 0, 0, _FIRST_REACH_CHUNK
    while start < n:  # in growing chunks: the reach of a long run's history is a small part of it
        # A comprehension, not map(attrgetter): a Unit's slot is read by the interpreter's
        # specialised attribute load, where attrgetter takes the generic path (~8x slower per unit)
        cumulative = list(accumulate([u.tokens for u in members[start:start + chunk]], initial=total))
        if cumulative[-1] > room:  # sizes are >= 0: every earlier chunk fitted whole
            # cumulative[1..j-1] fit: start + j - 1 units in all, and the misfit after them
            return min(start + bisect_right(cumulative, room, 1), n)
        start, total, chunk = start + chunk, cumulative[-1], chunk * 2
    return n


_FIRST_REACH_CHUNK = 64
"""The first chunk's size; each next one doubles. A 128k budget reaches ~100-200 units of a long
run's history: summing a first chunk of 512 read ~400 sizes of units out of reach."""


def _layers(units: Sequence[Unit], presorted: Mapping[str, Sequence[Unit]] | None, room: int,
            list_unreached: bool = True, paid: Container[str] = ()
            ) -> tuple[dict[str, list[Unit]], list[Sequence[Unit]], bool]:
    """The reachable head of each layer (optional units sorted by rank: ``presorted`` with
    ``units`` merged in), and the unreachable tails (without ``list_unreached``, a tail's first
    unit only: whether there is one). A tool unit a group kept before its turn was paid for by
    that group, so every unit before a reached one was paid for, as :func:`_reach` assumes.

    A unit charged a repeat line costs less than its tokens: a layer's room grows by what its
    head's units may save that way (``paid``: the media already paid for; ``repeat_charges.slack``)
    until the heads hold still. Last: whether a unit in them sends media."""
    extra: dict[str, list[Unit]] = {}
    for u in units:
        if not u.required:
            extra.setdefault(u.layer, []).append(u)
    layers = list({**dict.fromkeys(presorted or ()), **dict.fromkeys(extra)})
    slack = dict.fromkeys(layers, 0)
    while True:
        heads: dict[str, list[Unit]] = {}
        tails: list[Sequence[Unit]] = []
        for layer in layers:
            room_here = room + slack[layer]
            base: Sequence[Unit] = (presorted or {}).get(layer, ())
            n = _reach(base, room_here)
            head = list(base[:n])
            tails.append(base[n:] if list_unreached else base[n:n + 1])
            if layer in extra:  # a unit past the base's reach is past the merged list's reach too
                head = sorted([*head, *extra[layer]], key=RANK)
                n = _reach(head, room_here)
                tails.append(head[n:])
                head = head[:n]
            heads[layer] = head
        wider = repeat_slack(heads, paid)
        if wider is None or wider == slack:
            return heads, tails, wider is not None
        slack = wider


def select_units(
    units: Sequence[Unit],
    budget: int,
    *,
    shares: Mapping[str, float],
    shrink_required: Callable[[Sequence[Unit], int], dict[str, int]] | None = None,
    presorted: Mapping[str, Sequence[Unit]] | None = None,
    list_unreached: bool = True,
    tools: Mapping[str, tuple[str, int]] | None = None,
) -> Selection:
    """Select units within ``budget`` tokens. See the module docstring for the rules.

    ``shrink_required(required_units, budget)`` may return smaller token grants
    for shrinkable required units when they alone exceed the budget; if the
    grants still do not fit, :class:`RequiredContextExceedsBudgetError` carries
    every required unit and its size.

    ``presorted``: more optional units, by layer, each list sorted by ``rank``
    (a caller that keeps them sorted across builds saves the sort); the result
    is the same as passing them in ``units``.

    ``list_unreached=False``: :attr:`Selection.unreached` is left empty (and ``dropped`` lists
    the walked units only), for a caller that derives its low-priority units on its own, as the
    builder does: copying a long run's ~4,600 out-of-reach units per build was a third of its
    selection, for a list nobody read.

    ``tools``: a tool's name -> (its unit id, tokens), for the tools a unit ``needs``: a unit
    is kept with those of them not kept yet, its cost the sum (a required unit's make them
    required). The walk's order does not depend on the budget and a unit's cost only on the
    units before it, so a larger budget still keeps a superset. A tool unit already kept when
    its own turn comes costs nothing.

    A required unit with ``if_fits`` (the latest error's group) is required only when the
    required units fit, each cut as far as it may be: when they do not, the selection is
    :func:`_without_if_fits`'s (the other required units alone), not the typed error.

    A unit required in part with a ``rest_share`` (the newest group, past
    ``timeline_units.NEWEST_WHOLE_TOKENS``) has its rest walked as a layer of its own, in
    ``REST_STEP``-token steps, with that share times the layers' shares together: the others
    take their shares of the room beside it (small ones first: an instruction, the plan, the
    recent groups), and the rest gets ``rest_share`` times what they take, and all the room
    where they have nothing more. Its steps are units like any other (a fixed order, whatever
    the budget), so the promises hold as they do for them.
    """
    given = units
    attach = tools or {}
    required = [u for u in units if u.required]
    rests: dict[str, tuple[str, int]] = {}  # a rest (or a step of one) -> (its unit, the rest's size)
    if any(u.part is not None for u in required):
        required, rest_units, rests = _parts(required, budget)
        units = [*units, *rest_units]
        own = {_step_layer(u.id): u.rest_share for u in required if u.rest_share is not None}
        if own:
            total = sum(shares.values())
            shares = {**shares, **{layer: share * total for layer, share in own.items()}}
    kept, needed, used = _pay_required(required, budget, attach, shrink_required)
    if used > budget:
        if any(u.if_fits for u in required):
            return _without_if_fits(given, budget, shares=shares, shrink_required=shrink_required,
                                    presorted=presorted, list_unreached=list_unreached, attach=attach)
        raise _over(budget, required, kept, needed)
    dropped: dict[str, str] = {}
    over: tuple[str, ...] = ()
    cut = [u.id for u in required if kept[u.id] < u.tokens]
    paid: dict[str, int] = {}  # media paid for: key -> the dearest price paid
    for u in required:
        if u.media and kept[u.id] == u.tokens:  # a cut one's media may go reduced: it pays nothing
            pay(paid, u.media)
    repeats: dict[str, Repeat] = {}
    if needed:  # a tool a required unit needed is paid for: its own unit is no candidate (its
        # size would count twice in its layer's reach, and the walk would end short of it)
        units = [u for u in units if u.required or u.id not in needed]
    heads, tails, media = _layers(units, presorted, budget - used, list_unreached, paid)
    keyed = _order(heads, walk_shares(shares))
    # tools not kept yet that a unit may need: once none is left (a long run's few tools are
    # kept with its first groups), a unit's needs cost nothing and are not looked at
    pending = len({tool_id for tool_id, _ in attach.values()}.difference(kept))
    new: list[tuple[str, int]] = []
    for i, (_, _, u) in enumerate(keyed):
        if attach and u.id in kept:  # a tool a unit before it needed
            continue
        room = budget - used
        extra = 0
        if pending and u.needs:
            new = _needs(u, attach, kept)
            extra = sum(tokens for _, tokens in new) if new else 0
        tokens, smallest, repeat = u.tokens, u.min_tokens, None
        if media and u.media and paid:  # a medium a unit before it pays for: its repeat line
            saved, smallest_saved, repeat = repeat_saving(u.media, paid)
            tokens -= saved
            smallest = None if smallest is None else max(0, smallest - smallest_saved)
        if tokens + extra <= room:
            kept[u.id] = tokens
            used += tokens + extra
            if extra:
                kept.update(new)
                needed.update(t for t, _ in new)
                pending -= len(new)
            if media and u.media:
                pay(paid, u.media)
                if repeat is not None:
                    repeats[u.id] = repeat
            continue
        floor = max(tokens if smallest is None else smallest, MIN_TRUNCATED_TOKENS)
        if smallest is not None and smallest < tokens and floor + extra <= room:
            grant = room - extra if u.layer != STABLE_LAYER else stable_grant(room - extra, tokens, floor)
            kept[u.id] = grant
            used += grant + extra
            if extra:
                kept.update(new)
                needed.update(t for t, _ in new)
            if repeat is not None:
                repeats[u.id] = repeat
            cut.append(u.id)
        else:
            dropped[u.id] = "over_budget"
            over = (u.id,)
        dropped.update(dict.fromkeys(map(_ID, map(_RANK_OF, keyed[i + 1:])), "low_priority"))
        # tails are non-empty only where the walk stopped within a head (see _reach)
        unreached = tuple(t for t in tails if t) if list_unreached else ()
        return _joined(Selection(kept, dropped, used, over, tuple(cut), unreached, frozenset(needed),
                                 repeats), rests)
    if any(tails):
        raise AssertionError("the walk ended without a stop while units were out of reach")
    return _joined(Selection(kept, dropped, used, over, tuple(cut), (), frozenset(needed), repeats), rests)


def _pay_required(required: Sequence[Unit], budget: int, attach: Mapping[str, tuple[str, int]],
                  shrink_required: Callable[[Sequence[Unit], int], dict[str, int]] | None
                  ) -> tuple[dict[str, int], set[str], int]:
    """The grants of the required units and of the tools they need (kept whole), cut by
    ``shrink_required`` when they exceed ``budget``; the tools, and the tokens used (over
    ``budget`` when even the cut grants do not fit)."""
    kept: dict[str, int] = {u.id: u.tokens for u in required}
    needed: set[str] = set()
    if attach:
        for u in required:
            for tool_id, tokens in _needs(u, attach, kept):
                kept[tool_id] = tokens
                needed.add(tool_id)
    used = sum(kept.values())
    if used > budget:
        fixed = sum(kept[t] for t in needed)
        grants = shrink_required(required, budget - fixed) if shrink_required else {}
        kept.update(grants)
        used = sum(kept.values())
    return kept, needed, used


def _over(budget: int, required: Sequence[Unit], kept: Mapping[str, int], needed: set[str]
          ) -> RequiredContextExceedsBudgetError:
    """The typed error: every required unit, in log order, and each tool one needs, at what it
    needs (cut as far as it may be). In log order, not the order the units came in: a handle's
    later build takes its units partly from its last one's (a summary appended after the input
    it precedes), and the same log listed its required fragments in another order than a fresh
    handle's build of it (found by ``test_run_life_machine``)."""
    ordered = sorted(required, key=lambda u: (u.position, u.id))
    return RequiredContextExceedsBudgetError(
        budget, [(u.id, kept[u.id]) for u in ordered] + [(t, kept[t]) for t in sorted(needed)])


def _without_if_fits(units: Sequence[Unit], budget: int, *, shares: Mapping[str, float],
                     shrink_required: Callable[[Sequence[Unit], int], dict[str, int]] | None,
                     presorted: Mapping[str, Sequence[Unit]] | None, list_unreached: bool,
                     attach: Mapping[str, tuple[str, int]]) -> Selection:
    """The selection when the required units do not fit with their ``if_fits`` ones: the other
    required units (and the tools they need) alone, cut as far as they must be (the typed error
    if even they do not fit), the ``if_fits`` units ``over_budget`` and every optional unit
    ``low_priority``, as if the walk had stopped at an ``if_fits`` unit first.

    Why nothing optional: at the smallest budget where the required units fit with the
    ``if_fits`` ones they take it all, so no optional unit is kept there; one kept below it would
    be dropped by that larger budget (promise 3). Why not the typed error: the latest error is
    required so that it is not dropped for its length, yet what of it no cut may shorten (its
    calls' arguments, the model's text beside them) up to ``ERROR_FLOOR_MAX_UNCUTTABLE`` failed
    every build of a small window (a 1,800-token reply beside a failed call: windows up to 3,000
    with a 1,000 reserve), although the newest input and the latest exchange fitted."""
    lifted = sorted(u.id for u in units if u.required and u.if_fits)
    # each at its part: the rest of one is optional, and nothing optional is kept here
    required, _, _ = _parts([u for u in units if u.required and not u.if_fits], budget)
    kept, needed, used = _pay_required(required, budget, attach, shrink_required)
    if used > budget:
        raise _over(budget, required, kept, needed)
    whole = {u.id: u.tokens for u in units}
    cut = tuple(sorted(uid for uid, grant in kept.items() if grant < whole.get(uid, grant)))
    optional = [u for u in units if not u.required and u.id not in needed]
    heads, tails, _ = _layers(optional, presorted, budget - used, list_unreached)
    walked = dict.fromkeys(lifted, "over_budget")
    walked.update((u.id, "low_priority") for _, _, u in _order(heads, walk_shares(shares)))
    unreached = tuple(t for t in tails if t) if list_unreached else ()
    return Selection(kept, walked, used, tuple(lifted), cut, unreached, frozenset(needed))


_REST = "+rest"
"""Suffix of the id of a part-required unit's optional rest (``Unit.part``); a step of a rest
with a share of its own adds its number."""


def _step_layer(uid: str) -> str:
    """The layer of the steps of ``uid``'s rest (``Unit.rest_share``): its own, no other unit's."""
    return uid + _REST


def _parts(required: list[Unit], budget: int
           ) -> tuple[list[Unit], list[Unit], dict[str, tuple[str, int]]]:
    """The required units with each part-required one at its part, the optional rests (or
    their steps), and each rest's id -> (its unit's id, the rest's size). A rest is shrinkable to
    nothing, has no needs (its unit's part is charged for them) and is ranked as its unit in its
    layer, or, with a ``rest_share``, cut in ``REST_STEP``-token steps in a layer of its own.

    Steps only up to the ``budget``: past ``budget // REST_STEP + 1`` whole steps the walk,
    which takes a layer's units in order, cannot take them all, so what follows is never
    reached and is one last step (a 1M-token log is not a thousand units); what the walk keeps
    is what it keeps of the rest cut to the end, at any budget."""
    out: list[Unit] = []
    rests: list[Unit] = []
    owner: dict[str, tuple[str, int]] = {}
    for u in required:
        if u.part is None or u.part >= u.tokens:
            out.append(u)
            continue
        smallest = u.part if u.min_tokens is None else min(u.min_tokens, u.part)
        out.append(Unit(u.id, u.layer, u.part, u.score, u.position, True, smallest, u.needs,
                        if_fits=u.if_fits, rest_share=u.rest_share))
        size = u.tokens - u.part
        if u.rest_share is None:
            rest = Unit(u.id + _REST, u.layer, size, u.score, u.position, min_tokens=0)
            rests.append(rest)
            owner[rest.id] = (u.id, size)
            continue
        whole = min(size // REST_STEP, budget // REST_STEP + 1)
        steps = [REST_STEP] * whole + ([size - whole * REST_STEP] if size > whole * REST_STEP else [])
        layer = _step_layer(u.id)
        for i, tokens in enumerate(steps):  # in order: each scored one below the one before
            step = Unit(f"{u.id}{_REST}.{i}", layer, tokens, u.score - i, u.position, min_tokens=0)
            rests.append(step)
            owner[step.id] = (u.id, size)
    return out, rests, owner


def _joined(s: Selection, rests: Mapping[str, tuple[str, int]]) -> Selection:
    """``s`` with each rest's grant (its steps' together) added to its unit's: a unit is cut
    when it got less than its whole, and a rest left out is no unit left out (its unit is kept,
    at its part)."""
    if not rests:
        return s
    kept, cut = s.kept, set(s.cut)
    grants: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for rest_id, (uid, size) in rests.items():
        grants[uid] = grants.get(uid, 0) + kept.pop(rest_id, 0)
        sizes[uid] = size
        cut.discard(rest_id)
    for uid, grant in grants.items():
        kept[uid] += grant
        if grant < sizes[uid]:
            cut.add(uid)
        else:
            cut.discard(uid)
    walked = {k: v for k, v in s.walked.items() if k not in rests}
    unreached = tuple(kept_out for t in s.unreached if (kept_out := [u for u in t if u.id not in rests]))
    return Selection(kept, walked, s.used, tuple(x for x in s.over_budget if x not in rests),
                     tuple(sorted(cut)), unreached, s.needed, s.repeats)


def _needs(u: Unit, attach: Mapping[str, tuple[str, int]], kept: Mapping[str, int]) -> list[tuple[str, int]]:
    """The tools ``u`` needs that are not kept yet, as (unit id, tokens)."""
    return [tool for name in u.needs if (tool := attach.get(name)) is not None and tool[0] not in kept]

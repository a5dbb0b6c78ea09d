"""The timeline's selection units, kept across builds: a build re-derives only what changed.

Why: an agent loop builds after every step, and a long run's timeline has
thousands of items. What a timeline item contributes to selection (one
:class:`~contextfold.projections.selection.Unit`, or ``stale`` lines) is a
function of

- the item and its fragments' facts (fixed per build configuration: fragment
  content never changes once folded),
- its layer: ``recent`` (one of the newest ``recent_groups`` groups), ``input``
  (the current user input) or ``history``,
- whether one of its fragments is required,
- whether a call of it is still unanswered (then it is ``stale``), or it uses a tool the build
  does not offer (then it is shown as a note: ``projections.not_offered``).

Not of the log's horizon: a unit's score depends on its position, not on its
age (``selection.score``), so as the log grows no unit is re-scored and no
order between units moves. A build recomputes the rows of new items, of items
replaced in place (a call answered, a result masked, a compaction), of items
whose layer or required flag changed, and nothing else; every optional unit
stays in its layer's sorted list across builds. The result is the same as
deriving every row afresh (the build identity check and the incremental-vs-fresh
tests hold it to that), at
O(changes) per build instead of O(timeline).

One :class:`TimelineUnits` per (facts table, ``recent_groups``) lives in
``RunState.memo``; like every memo entry it is for one thread at a time.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING

from contextfold.domain.manifest import ExcludedFragment
from contextfold.projections.entries import ToolAnswer
from contextfold.projections.media_repeats import unit_media
from contextfold.projections.selection import RANK, Unit, score
from contextfold.projections.state import MessageItem, RunState, TimelineItem, TimelineMark, ToolGroup
from contextfold.projections.timeline_items import RECOVERY_STATUSES

if TYPE_CHECKING:  # types only (units imports this module)
    from contextfold.projections.fragment_facts import BuildCtx, Hit

__all__ = ["TimelineUnits", "ranked_position", "timeline_units"]

_LOG_LENGTH = 64
_ITEM = operator.attrgetter("facts.item")
_MISMATCH_LIMIT = 256
"""More items replaced than this (a compaction re-laid the timeline out): rebuild every row."""
_UNANSWERED = "a call of this group is still unanswered at this point of the log"
ERROR_DIAGNOSIS_TOKENS = 160
"""What the required part of the latest error's group adds to its smallest cut (``Unit.part``):
room for a failing log's diagnosis line and first key error (``diagnose.lean_log`` needs ~120
tokens for them; its smallest cut names the error's line only)."""
NEWEST_WHOLE_TOKENS = 3_000
"""The newest group (``RunState.required_ids``) is required whole up to this many tokens; a larger
one only down to its head and tail (its smallest cut and ``ERROR_DIAGNOSIS_TOKENS``, what the
latest error keeps), its rest competing with a share of its own (``NEWEST_REST_SHARE``).
Required whole, a 120,000-token build log took all of a 128k build but its own call: a 34-token
AGENTS.md instruction, the plan, the recent groups and every earlier step were dropped for a few
more lines of it. A bound on the group, not a share of the budget: whether the rest competes
must not depend on the budget (promise 3 of ``selection``). Why 3,000: up to it the group is
required whole as before, so at the 3,000-token budget of a 4k window (the smallest the
benchmarks build at) a newest result that fits whole is still shown whole, never cut for old
history (at 2,000, 13 of 2,654 tau-bench builds there changed, and 5 lost a flight of a search
result for old messages); a 3,000-token group leaves an 8k window's budget room for the rest."""
NEWEST_REST_SHARE = 3.0
"""The share of the newest group's rest: three times the layers' shares together, so where the
others take their shares of the room beside it, it gets three quarters, and all that is left
where they have nothing more (``selection.select_units``)."""


@dataclass(slots=True, eq=False)
class ItemFacts:
    """What a timeline item contributes to every build, whatever the horizon (per config).
    Never changed once made; not ``frozen`` for speed (``selection_units.Unit`` says why)."""

    item: TimelineItem
    ids: tuple[str, ...]
    tokens: int
    min_tokens: int | None
    priority: int
    last: int
    """The newest log position among its fragments (the unit's position in its score), a runtime
    recovery answer counted at its call's (``ranked_position``)."""
    hits: tuple[tuple[str, Hit], ...]
    names: frozenset[str]
    closed: bool
    artifact: bool
    """A member's text lives in an artifact."""
    media: tuple[tuple[str, int, int, int], ...] = ()
    """The media its fragments send (``selection.Unit.media``)."""


def ranked_position(state: RunState, fid: str) -> int:
    """The log position a fragment ranks by: its own, but a runtime recovery answer
    (``ToolResultLost``/``ToolCallCancelled``) ranks at its call's.

    Why: the recovery marker is appended when a build finds the call unanswered, which may be
    long after the call (an imported or resumed run, one built only now and then), and it says
    nothing new from the tool. Ranked at the marker, a turn-1 group whose answer was lost
    counted as the newest unit of the run: at 16k its 4,711-token read crowded out 8 of the
    19 recent results a build without the lost call kept."""
    entry = state.entries[fid]
    content = entry.content
    if isinstance(content, ToolAnswer) and content.status in RECOVERY_STATUSES:
        return state.answer_group.get(entry.position, entry.position)
    return entry.position


def item_facts(ctx: BuildCtx, item: TimelineItem) -> ItemFacts:
    ids = item.fragment_ids
    tokens, min_tokens, shrinks, last, artifact = 0, 0, False, 0, False
    hits: list[tuple[str, Hit]] = []
    for fid in ids:
        facts = ctx.facts(fid)
        tokens += facts.cost
        min_tokens += facts.min_cost
        shrinks = shrinks or facts.shrinkable
        artifact = artifact or facts.has_artifact_text
        last = max(last, ranked_position(ctx.state, fid))
        if facts.hit is not None:
            hits.append((fid, facts.hit))
    names: frozenset[str] = frozenset()
    closed = True
    if isinstance(item, ToolGroup):
        names, closed = frozenset(c.name for c in item.calls), item.closed
    priority = ctx.facts(ids[0]).view.priority
    media = unit_media(ctx.state, ctx.media, ids) if ctx.state.media_seen else ()
    return ItemFacts(item, ids, tokens, min_tokens if shrinks else None, priority, last,
                     tuple(hits), names, closed, artifact, media)


@dataclass(slots=True)
class _Row:
    facts: ItemFacts
    unit: Unit | None
    """None when the item is stale (then ``stale`` lists its fragments)."""
    layer_no: int
    stale: tuple[ExcludedFragment, ...] = ()
    not_offered: bool = False
    """A group shown as a note: it calls a tool the build does not offer."""


@dataclass(slots=True)
class TimelineUnits:
    """The rows of the last build, aligned with its timeline (module docstring)."""

    mark: TimelineMark | None = None
    """Where the timeline was when ``rows`` were brought up to date with it."""
    rows: list[_Row] = field(default_factory=list)
    members: dict[str, tuple[str, ...]] = field(default_factory=dict)
    layer_no: dict[str, int] = field(default_factory=dict)
    unit_of: dict[str, Unit] = field(default_factory=dict)
    required_units: dict[str, Unit] = field(default_factory=dict)
    sorted_layers: dict[str, list[Unit]] = field(default_factory=dict)
    """Optional units by layer, sorted by rank (final: see the module docstring), for
    ``select_units(presorted=...)``."""
    overlaid: list[str] = field(default_factory=list)
    """Ids of the units ``overlay`` added (not from the timeline)."""
    sorted_version: int = 0
    """Counts the changes to ``sorted_layers`` (equal versions: the same lists)."""
    row_of: dict[str, int] = field(default_factory=dict)
    """Fragment id -> index of the row it belongs to."""
    row_of_unit: dict[str, int] = field(default_factory=dict)
    """Unit id -> index of its row."""
    artifact_units: set[str] = field(default_factory=set)
    """Units with a member whose text lives in an artifact (loaded when kept)."""
    stale_rows: dict[int, None] = field(default_factory=dict)
    noted_rows: dict[int, None] = field(default_factory=dict)
    """Rows of groups shown as notes (laid out apart: ``layout``)."""
    hits: dict[str, Hit] = field(default_factory=dict)
    horizon: int = -1
    blocked: frozenset[str] | None = None
    recent: frozenset[int] = frozenset()
    current: int | None = None
    required: frozenset[str] = frozenset()
    floor: frozenset[str] = frozenset()
    touched: set[str] = field(default_factory=set)
    """Ids of the units the last update derived afresh or removed (their members or size may
    have changed, or they are gone)."""
    generation: int = 0
    """Counts the updates that derived units afresh; ``log`` keeps the recent ones' ids."""
    log: deque[tuple[int, frozenset[str]]] = field(default_factory=lambda: deque(maxlen=_LOG_LENGTH))
    laid: object = None
    """The layout's messages of the kept items as the last build that used these rows laid them
    out (``layout._Laid``): patched by the next one, and dropped with the rows."""

    def touched_since(self, generation: int) -> set[str] | None:
        """Ids of the units derived afresh after ``generation``; None when the log no longer
        reaches back that far (the caller starts over)."""
        if generation == self.generation:
            return set()
        if not self.log or self.log[0][0] > generation + 1:
            return None
        # From the newest back, stopping at ``generation``: the log's generations ascend, and the
        # caller is most often one or two updates behind a full log of 64 (a comprehension over
        # all of it was ~1% of a plain first build's bytecodes).
        out: set[str] = set()
        for gen, ids in reversed(self.log):
            if gen <= generation:
                break
            out.update(ids)
        return out

    def _drop(self, i: int) -> None:
        row = self.rows[i]
        for fid in row.facts.ids:
            if self.row_of.get(fid) == i:
                del self.row_of[fid]
        unit = row.unit
        if unit is not None and self.unit_of.get(unit.id) is unit:
            self.touched.add(unit.id)  # it may not come back (then it is gone, not changed)
            del self.row_of_unit[unit.id]
            self.artifact_units.discard(unit.id)
            del self.members[unit.id]
            del self.layer_no[unit.id]
            del self.unit_of[unit.id]
            if unit.required:
                del self.required_units[unit.id]
            else:
                layer = self.sorted_layers[unit.layer]
                self.sorted_version += 1
                at = bisect_left(layer, unit.rank, key=RANK)
                if layer[at] is not unit:
                    raise AssertionError(f"unit {unit.id} missing from its sorted layer")
                del layer[at]
        for fid, _ in row.facts.hits:
            self.hits.pop(fid, None)
        self.stale_rows.pop(i, None)
        self.noted_rows.pop(i, None)

    def _set(self, i: int, row: _Row) -> None:
        if i == len(self.rows):
            self.rows.append(row)
        else:
            self.rows[i] = row
        for fid in row.facts.ids:
            self.row_of[fid] = i
        unit = row.unit
        if unit is not None:
            self.touched.add(unit.id)
            self.row_of_unit[unit.id] = i
            if row.facts.artifact:
                self.artifact_units.add(unit.id)
            self.members[unit.id] = row.facts.ids
            self.layer_no[unit.id] = row.layer_no
            self.unit_of[unit.id] = unit
            if unit.required:
                self.required_units[unit.id] = unit
            else:
                insort(self.sorted_layers.setdefault(unit.layer, []), unit, key=RANK)
                self.sorted_version += 1
        else:
            self.stale_rows[i] = None
        if row.not_offered:
            self.noted_rows[i] = None
        if row.facts.hits:
            self.hits.update(row.facts.hits)

    def overlay(self, units: list[Unit], members: dict[str, tuple[str, ...]], layer_no: dict[str, int]
                ) -> None:
        """Put a build's units that are not from the timeline (the state fragments') into
        ``unit_of``, ``members`` and ``layer_no``, replacing the last build's: the builder
        looks every unit up in these tables, and copying them per build cost more than the
        lookups. Their ids are fragment ids of state fragments, never a timeline unit's."""
        for uid in self.overlaid:
            del self.unit_of[uid], self.members[uid], self.layer_no[uid]
        for unit in units:
            if unit.id in self.row_of_unit:
                raise AssertionError(f"state unit {unit.id} collides with a timeline unit")
            self.unit_of[unit.id] = unit
        self.members.update(members)
        self.layer_no.update(layer_no)
        self.overlaid = [u.id for u in units]

    def stale_lines(self) -> list[ExcludedFragment]:
        return list(chain.from_iterable(self.rows[i].stale for i in sorted(self.stale_rows)))


def _recent(timeline: Sequence[TimelineItem], n: int) -> frozenset[int]:
    """Row indices of the newest ``n`` groups."""
    out: list[int] = []
    for i in range(len(timeline) - 1, -1, -1):
        if len(out) >= n:
            break
        if isinstance(timeline[i], ToolGroup):
            out.append(i)
    return frozenset(out)


def timeline_units(ctx: BuildCtx, timeline: Sequence[TimelineItem], mark: TimelineMark,
                   current_input: str | None) -> TimelineUnits:
    """Bring the memoised rows up to date with ``timeline`` (``RunState.live_timeline``, taken
    at ``mark``) for this build (module docstring)."""
    state = ctx.state
    memo = ctx.objects_for("timeline-units")
    key = ctx.config.recent_groups
    tu = memo.get(key)
    blocked = ctx.blocked
    if (not isinstance(tu, TimelineUnits) or tu.blocked != blocked or state.horizon < tu.horizon
            or len(timeline) < len(tu.rows)):
        tu = TimelineUnits()
        memo[key] = tu
    tu.touched = set()
    required = ctx.required
    recent = _recent(timeline, ctx.config.recent_groups)
    current = None
    if current_input is not None:  # it is near the end: only trailing notes follow it
        for i in range(len(timeline) - 1, -1, -1):
            if timeline[i].fragment_id == current_input:
                current = i
                break
    n_old = len(tu.rows)
    dirty: set[int] = set(range(n_old, len(timeline)))
    changed = state.timeline_changes_since(tu.mark) if n_old and tu.mark is not None else []
    if changed is None:  # the index was made afresh or its log is too short: compare the items
        changed = [i for i, same in enumerate(map(operator.is_, map(_ITEM, tu.rows), timeline)) if not same]
    if changed:
        if len(changed) > _MISMATCH_LIMIT:
            tu = TimelineUnits()
            memo[key] = tu
            n_old = 0
            dirty = set(range(len(timeline)))
        else:
            dirty.update(changed)
    if n_old:
        dirty.update(recent ^ tu.recent)
        if current != tu.current:
            dirty.update(i for i in (current, tu.current) if i is not None and i < len(timeline))
        if required != tu.required:
            dirty.update(tu.row_of[fid] for fid in required ^ tu.required if fid in tu.row_of)
        if ctx.floor != tu.floor:
            dirty.update(tu.row_of[fid] for fid in ctx.floor ^ tu.floor if fid in tu.row_of)
    statics: dict[int, ItemFacts] = ctx.objects_for("items")
    order = sorted(dirty)
    for i in order:  # every old row first: a shifted item may reappear in another row
        if i < len(tu.rows):
            tu._drop(i)
    for i in order:
        item = timeline[i]
        st = statics.get(item.position)
        if st is None or st.item is not item:
            st = statics[item.position] = item_facts(ctx, item)
        tu._set(i, _row(ctx, st, i in recent, i == current, required, blocked))
    if tu.touched:
        tu.generation += 1
        tu.log.append((tu.generation, frozenset(tu.touched)))
    tu.mark, tu.horizon, tu.blocked = mark, state.horizon, blocked
    tu.recent, tu.current, tu.required, tu.floor = recent, current, required, ctx.floor
    return tu


def _row(ctx: BuildCtx, st: ItemFacts, is_recent: bool, is_current: bool, required: frozenset[str],
         blocked: frozenset[str]) -> _Row:
    item = st.item
    ids = st.ids
    noted = False
    if isinstance(item, ToolGroup):
        uid = item.group_id
        if not st.closed:
            lines = []
            for fid in ids:
                f = ctx.frag(fid)
                lines.append(ExcludedFragment(
                    id=fid, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count,
                    reason="stale", detail=_UNANSWERED))
            return _Row(st, None, 0, tuple(lines))
        noted = not st.names.isdisjoint(blocked)
        layer = "recent" if is_recent else "history"
        layer_no = 7 if is_recent else 5
    else:
        uid = ids[0]
        is_input = is_current and isinstance(item, MessageItem)
        layer = "input" if is_input else "history"
        layer_no = 8 if is_input else 5
    is_required = any(fid in required for fid in ids)
    min_tokens = st.min_tokens
    if (min_tokens is not None and isinstance(item, MessageItem) and item.role == "user"
            and ctx.state.entries[uid].required):
        # marked required: constraints that must survive every build, never cut (610 of 800 rules
        # were, without a word); over the budget it is the typed error, the current input's too (a
        # 5,001-token one marked required went out as 2,980 tokens). An unmarked current input is
        # cut before anything of it is lost (the issue: the newest input truncated before dropped).
        min_tokens = None
    # the latest error: required down to its diagnosis (``RunState.latest_error_ids``), and only
    # while that fits beside the other required units (``Unit.if_fits``)
    if_fits = is_required and ids[0] in ctx.floor
    part = None
    if if_fits and min_tokens is not None:
        part = min(st.tokens, min_tokens + ERROR_DIAGNOSIS_TOKENS)
    # the newest group (the only other required group): past NEWEST_WHOLE_TOKENS, required down
    # to its head and tail, its rest competing with a share of its own
    rest_share = None
    if (is_required and not if_fits and isinstance(item, ToolGroup) and min_tokens is not None
            and st.tokens > NEWEST_WHOLE_TOKENS):
        part = min_tokens + ERROR_DIAGNOSIS_TOKENS
        rest_share = NEWEST_REST_SHARE
    # scored from its newest member's position (an answered call ranks as new as its answer; a
    # lost or cancelled one as its call: ``ranked_position``)
    # a group keeps its tools; one shown as a note calls none
    tools = () if noted else tuple(sorted(st.names))
    unit = Unit(uid, layer, st.tokens, score(st.priority, st.last, st.tokens), item.position,
                is_required, min_tokens, tools, part, if_fits, rest_share, st.media)
    return _Row(st, unit, layer_no, not_offered=noted)

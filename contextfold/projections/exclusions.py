"""The manifest lines of dropped units, kept sorted across builds.

Why: a long run drops most of its history at every build (a 10k-message run
at a 128k window lists about 9,000 excluded fragments), and the manifest lists
them sorted by (reason, id). Rebuilding and sorting that list per build was a
large part of a build. Nearly all of it is ``low_priority`` lines, and from one
build to the next only a few units enter or leave that set, so the sorted
``low_priority`` lines are kept per build configuration and patched with the
difference (units that left, units that came, units whose lines changed).

The sorted lines are held in chunks of about ``_CHUNK`` lines, and a patch makes again only the
chunks it touched: the manifest's :class:`~contextfold.domain.excluded_lines.ExcludedLines`
shares the rest with the last build's (why: that module's docstring).

A unit's lines are a function of its members, its size and the reason (the
fragment views are fixed per facts table), cached per unit id. An ``over_budget`` unit priced by
its redacted payloads (``redacted_units``) lists their redacted tokens: the price the walk used.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter

from contextfold.domain.manifest import ExcludedFragment, ExcludedLines, ExclusionReason
from contextfold.projections.fragment_facts import BuildCtx
from contextfold.projections.redacted_units import redacted_unit
from contextfold.projections.selection import Selection, Unit
from contextfold.projections.stale_reads import rest_of
from contextfold.projections.timeline_units import TimelineUnits

__all__ = ["LowPriorityLines", "copy_lines", "dropped_lines", "superseded_lines"]

_ID = attrgetter("id")
_REBUILD_FRACTION = 4
"""Patch while the difference is under 1/this of the set; else sort afresh."""
_CHUNK = 256
"""Lines per chunk when the chunks are made afresh; a patched chunk is split past twice this."""


@dataclass(slots=True)
class LowPriorityLines:
    """The ``low_priority`` lines of the last build of one configuration, sorted by id, in
    chunks: ``firsts`` holds each chunk's first id."""

    chunks: list[tuple[ExcludedFragment, ...]] = field(default_factory=list)
    firsts: list[str] = field(default_factory=list)
    of_unit: dict[str, tuple[ExcludedFragment, ...]] = field(default_factory=dict)
    timeline: TimelineUnits | None = None
    generation: int = -1
    """The timeline units' generation these lines are up to date with."""
    kept: Collection[str] = frozenset()
    over: frozenset[str] = frozenset()
    others: Collection[str] = ()
    """The last build's kept units, ``over_budget`` units and units not from the timeline."""
    frozen: ExcludedLines | None = None
    """The chunks as the manifest's sequence, made again only after they change: the manifests
    of the builds that drop the same units share it (and those of later builds, its chunks)."""


def _unit_lines(ctx: BuildCtx, uid: str, unit: Unit, members: tuple[str, ...],
                reason: ExclusionReason) -> tuple[ExcludedFragment, ...]:
    cache = ctx.dropped_lines
    key = (members, unit.tokens, reason, unit.if_fits)
    hit = cache.get(uid)
    if hit is None or hit[0] != key:
        detail = f"unit {uid} needs {unit.tokens} tokens"
        if unit.if_fits:  # left out although required: say which rule let it go (``Unit.if_fits``)
            smallest = unit.tokens if unit.min_tokens is None else unit.min_tokens
            detail += (f", {smallest} cut as far as it may be: the latest error, required only where "
                       "it fits beside the other required content")
        # A unit the walk reached is priced by its large payloads' redacted texts where that is
        # dearer (``redacted_units``): its lines say those texts' tokens, the price its ``needs``
        # holds. Its logged tokens beside that need told a price the selection never used.
        priced = reason == "over_budget" and redacted_unit(ctx, unit, members) is not None
        lines = []
        for fid in members:
            red = ctx.redacted_facts(fid) if priced else None
            # the entry (or redacted view): no fragment made for a line
            f = (red or ctx.facts(fid)).view
            lines.append(ExcludedFragment(
                id=fid, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count, reason=reason,
                detail=detail))
        hit = cache[uid] = (key, tuple(lines))
    out: tuple[ExcludedFragment, ...] = hit[1]
    return out


def dropped_lines(ctx: BuildCtx, selection_key: str, selection: Selection, unit_of: Mapping[str, Unit],
                  members: Mapping[str, tuple[str, ...]], timeline: TimelineUnits,
                  others_ids: Collection[str]
                  ) -> tuple[list[ExcludedFragment], ExcludedLines]:
    """(lines of the units dropped for another reason, ``low_priority`` lines sorted by id).

    ``selection_key`` names the memo of the lines: builds that select alike (a loop's builds for
    two providers, a rebuild) share one, so the second finds nothing to patch and returns the
    same tuple. Any key is correct: the difference is taken from whatever build used the memo
    last.

    ``unit_of`` holds every unit selection saw but the tools; each optional one was kept or
    dropped, so a unit is ``low_priority`` exactly when it is in ``unit_of``, optional, not kept
    and not ``over_budget``. That is what lets a build find the difference from this
    configuration's previous build without listing every dropped unit: a unit can only have
    entered or left the set, or changed its lines, if it was kept or over budget in one of the
    two builds, was derived afresh or removed since (``touched_since``), or is not from the
    timeline (``others_ids``, derived every build). Looking at those is O(kept + changes), not
    O(history).
    """
    kept = selection.kept
    over = frozenset(uid for uid in selection.over_budget if uid in unit_of)
    others = [line for uid in sorted(over) for line in
              _unit_lines(ctx, uid, unit_of[uid], members[uid], "over_budget")]
    memo = ctx.objects_for("low-priority")
    low = memo.get(selection_key)
    if not isinstance(low, LowPriorityLines):
        low = memo[selection_key] = LowPriorityLines()
    touched = timeline.touched_since(low.generation) if low.timeline is timeline else None
    prev = low.of_unit

    def is_low(uid: str) -> bool:
        unit = unit_of.get(uid)
        return unit is not None and not unit.required and uid not in kept and uid not in over

    low.timeline, low.generation = timeline, timeline.generation
    kept_before, over_before, others_before = low.kept, low.over, low.others
    # The build's own dict (selection hands out a copy, read and never changed after it): no
    # copy of ~1,000 ids per build.
    low.kept, low.over, low.others = kept, over, list(others_ids)
    if touched is not None:
        touched.update(others_ids)
        touched.update(others_before)
        removed: set[str] = set()
        added: set[str] = set()
        # The units kept now or before, not both, in one pass: the few that entered or left.
        moved = kept.keys() ^ kept_before
        entered = [uid for uid in moved if uid in kept]
        # in the set before: left it if kept (the set held no unit kept before) or over now, or
        # gone; new lines if derived afresh
        for uid in chain((uid for uid in entered if uid in prev), over & prev.keys(), touched & prev.keys()):
            if not is_low(uid):
                removed.add(uid)
            elif uid in touched and _unit_lines(ctx, uid, unit_of[uid], members[uid],
                                                "low_priority") is not prev[uid]:
                removed.add(uid)
                added.add(uid)
        # not in it before: entered it if kept or over before (and not kept now), or derived
        # afresh, and low now
        # (membership tests, not ``left - prev.keys()``: a set minus a keys view copies the set
        # and walks every key of the view, ~9,800 on a long run)
        left = moved.difference(entered) | over_before | touched
        added.update(uid for uid in left if uid not in prev and is_low(uid))
        if (len(removed) + len(added)) * _REBUILD_FRACTION <= len(prev):
            if removed or added:
                _patch(low, removed, added, ctx, unit_of, members)
                low.frozen = None
            return others, _frozen(low)
    low.of_unit = {uid: _unit_lines(ctx, uid, unit, members[uid], "low_priority")
                   for uid, unit in unit_of.items()
                   if not unit.required and uid not in kept and uid not in over}
    lines = sorted(chain.from_iterable(low.of_unit.values()), key=_ID)
    low.chunks = [tuple(lines[i:i + _CHUNK]) for i in range(0, len(lines), _CHUNK)]
    low.firsts = [chunk[0].id for chunk in low.chunks]
    low.frozen = None
    return others, _frozen(low)


def _frozen(low: LowPriorityLines) -> ExcludedLines:
    if low.frozen is None:
        low.frozen = ExcludedLines.from_chunks(low.chunks)
    return low.frozen


def _patch(low: LowPriorityLines, removed: set[str], added: set[str], ctx: BuildCtx,
           unit_of: Mapping[str, Unit], members: Mapping[str, tuple[str, ...]]) -> None:
    """Bring the sorted chunks from the previous build's set to this one's: each chunk that
    loses or gains lines is made again once (split past ``2 * _CHUNK`` lines), the rest kept."""
    prev = low.of_unit
    gone: dict[int, list[ExcludedFragment]] = {}
    came: dict[int, list[ExcludedFragment]] = {}
    for uid in removed:
        for line in prev.pop(uid):
            gone.setdefault(_chunk_of(low, line.id), []).append(line)
    for uid in added:
        lines = prev[uid] = _unit_lines(ctx, uid, unit_of[uid], members[uid], "low_priority")
        for line in lines:
            came.setdefault(_chunk_of(low, line.id), []).append(line)
    if not low.chunks:
        low.chunks, low.firsts = [()], [""]
    for c in sorted(gone.keys() | came.keys(), reverse=True):  # from the end: indices stay valid
        chunk = low.chunks[c]
        drop = set(map(id, gone.get(c, ())))
        left = [line for line in chunk if id(line) not in drop] if drop else list(chunk)
        if len(left) != len(chunk) - len(drop):
            raise AssertionError(f"an excluded line of chunk {c} is missing from the sorted lines")
        merged = sorted(left + came.get(c, []), key=_ID)  # two sorted runs: one merge
        pieces = ([tuple(merged[i:i + _CHUNK]) for i in range(0, len(merged), _CHUNK)]
                  if len(merged) > 2 * _CHUNK else [tuple(merged)] if merged else [])
        low.chunks[c:c + 1] = pieces
        low.firsts[c:c + 1] = [p[0].id for p in pieces]


def _chunk_of(low: LowPriorityLines, line_id: str) -> int:
    """The chunk a line with ``line_id`` is in, or would be inserted into."""
    return max(bisect_right(low.firsts, line_id) - 1, 0)


def _left_out_line(end: str, excluded: Sequence[ExcludedFragment],
                   low_priority: Sequence[ExcludedFragment]) -> ExcludedFragment | None:
    """The line that leaves ``end`` out of this build: among the few lines of other reasons, else
    among the ``low_priority`` ones (sorted by id: a bisection, not a walk of ~9,000 lines)."""
    line = next((e for e in excluded if e.id == end), None)
    if line is not None:
        return line
    i = bisect_left(low_priority, end, key=_ID)
    return low_priority[i] if i < len(low_priority) and low_priority[i].id == end else None


def superseded_lines(ctx: BuildCtx, kept: Collection[str], excluded: Sequence[ExcludedFragment],
                     low_priority: Sequence[ExcludedFragment]) -> list[ExcludedFragment]:
    """A ``superseded`` line for every fragment a newer version replaced, naming the version the
    projection holds: the end of its chain of replacements. Only the last link of a chain was listed
    (a file read three times: the first read was neither selected nor excluded, and ``why`` said
    it was not part of the projection). A chain whose end is no longer active is not listed.

    When the end is not in the request either (``kept``: this build's kept fragments), the line's
    detail says so and why, from the end's own line in ``excluded`` or ``low_priority``: a read
    was listed as "replaced by e15" while e15 was left out as ``low_priority``, and the manifest
    (and ``why``) read as if the model saw the newer version when it saw neither. ``replaced_by``
    still names the newer version (the manifest's schema and meaning unchanged).

    A read whose other lines a newer partial read kept as a stale rest (``stale_reads``) says so in
    its detail: "replaced by e15" alone read as if its other lines were gone too."""
    state = ctx.state
    by = state.superseded_by
    rests = rest_of(state.stale_reads, state.active) if state.stale_reads else {}
    current: dict[str, str | None] = {}
    why_not: dict[str, str] = {}
    lines = []
    for old in sorted(by):
        path, node = [], old
        while node in by and node not in current:  # each link walked once per build
            path.append(node)
            node = by[node]
        end = current.get(node, node if node in state.active else None)
        current.update(dict.fromkeys(path, end))
        if end is None or state.entries[old].fragment.kind == "tool_spec":
            continue
        if end not in kept and end not in why_not:
            line = _left_out_line(end, excluded, low_priority)
            why_not[end] = (f"the newer version {end} is not in this request either"
                            + ("" if line is None else f": {line.reason}"
                               + (f", {line.detail}" if line.detail else "")))
        f = ctx.seen_frag(old)
        detail = "" if end in kept else why_not[end]
        if (rest := rests.get(old)) is not None:
            detail = "; ".join(filter(None, (
                f"its lines no newer read covers are kept, marked stale, as {rest}"
                + ("" if rest in kept else " (not in this request)"), detail)))
        lines.append(ExcludedFragment(id=old, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count,
                                      reason="superseded", replaced_by=end, detail=detail))
    return lines


def copy_lines(ctx: BuildCtx, kept: Collection[str], excluded: Sequence[ExcludedFragment],
               low_priority: Sequence[ExcludedFragment], twins: Mapping[str, str]) -> list[ExcludedFragment]:
    """``excluded`` with each ``duplicate`` line whose copy is not in the request either told so.

    Why: the copies of one text are deduped before selection (``units``) and again after it,
    against the conversation (``twins``); a line said "duplicate of e2" when e2 was itself left
    out, as a copy of the user input e1 or for room, and the manifest (and ``why``) read as if
    the model saw e2's copy. The seed (5.2) wants the manifest to record what replaced what.

    A copy that a conversation fragment stands in for names that fragment, which holds the text in
    the request (the copy first chosen is named in the detail); a copy left out for another reason
    keeps its name, and the detail says why it is not sent either, as :func:`superseded_lines` does
    for a newer version."""
    out: list[ExcludedFragment] = []
    for line in excluded:
        copy = line.replaced_by
        if line.reason != "duplicate" or copy is None or copy in kept:
            out.append(line)
            continue
        twin = twins.get(copy)
        if twin is not None:
            detail = (f"the same text as {ctx.state.entries[twin].kind} {twin}, kept in the conversation "
                      f"(the copy {copy} it was set aside for is one too)")
            out.append(line.model_copy(update={"replaced_by": twin, "detail": detail}))
            continue
        gone = _left_out_line(copy, excluded, low_priority)
        why = f"the copy {copy} is not in this request either" + (
            "" if gone is None else f": {gone.reason}" + (f", {gone.detail}" if gone.detail else ""))
        detail = f"{line.detail}; {why}" if line.detail else why
        out.append(line.model_copy(update={"detail": detail}))
    return out

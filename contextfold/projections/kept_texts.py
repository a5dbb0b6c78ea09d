"""The texts of a selection's kept units: which render as logged, which are read back, redacted
or cut to their grant (:func:`kept_texts`).

Why apart from the builder: this is the one step of a build that may read payloads back
(``load_text``) and run the truncation search, and it holds the memos that let a build skip both
for the units the last build already found unchanged (``_plain_timeline_loads``). The builder
only needs its outcome (:class:`KeptTexts`).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from contextfold.domain.manifest import TruncationRecord
from contextfold.projections.cut_text import split_room, truncate_fragment
from contextfold.projections.fragment_facts import BuildCtx
from contextfold.projections.media_repeats import reduction_saving, repeat_room
from contextfold.projections.repeat_charges import Repeat
from contextfold.projections.selection import Selection, Unit
from contextfold.projections.timeline_units import TimelineUnits
from contextfold.projections.truncate import Truncation
from contextfold.projections.units import Units

__all__ = ["KeptTexts", "kept_texts"]

_NO_REPEAT = Repeat(0, frozenset())


@dataclass(slots=True)
class KeptTexts:
    """What :func:`kept_texts` decided for the kept units' fragments."""

    texts: dict[str, str] = field(default_factory=dict)
    """Fragment id -> its text where that is not the logged one: cut, or redacted."""
    truncations: list[TruncationRecord] = field(default_factory=list)
    truncated: set[str] = field(default_factory=set)
    """Fragments shown cut (their block says so): text cut, or media at detail low."""
    text_cut: dict[str, int] = field(default_factory=dict)
    """Fragments whose text was cut (or re-serialised), with its tokens now."""
    reduced: set[str] = field(default_factory=set)
    """Fragments whose media go at detail low."""
    original_tokens: dict[str, int] = field(default_factory=dict)
    deferred: set[str] = field(default_factory=set)
    """Artifact-backed payloads shown as logged, read back only if the layout needs them."""
    plain_fids: frozenset[str] = frozenset()
    """The payloads of the uncut timeline units that render as logged (the memo's answer)."""
    worked: list[str] = field(default_factory=list)
    """The units looked at one by one (cut, or with a payload to load), sorted."""


def kept_texts(ctx: BuildCtx, selection: Selection, candidates: Units, twins: dict[str, str]) -> KeptTexts:
    """Load, redact and cut the texts of ``selection``'s kept units (``candidates``' units; the
    state fragments in ``twins`` are sent once, in the conversation, and need nothing here).

    Units granted less than their tokens are cut: first the safe media step (a cheaper rendition
    of the same image), then each shrinkable text gets its share of the room left
    (``split_room``) and is truncated at a safe boundary (``truncate_fragment``). A unit's tokens
    here are less what the selection saved on its repeated media (``Selection.repeats``): those
    were charged as repeat lines, and are never reduced."""
    out = KeptTexts()
    texts, truncations, truncated = out.texts, out.truncations, out.truncated
    text_cut, reduced, deferred = out.text_cut, out.reduced, out.deferred
    original_tokens = out.original_tokens
    members, unit_by_id = candidates.members, candidates.unit_of
    # a state unit is one fragment, its id the fragment's; the timeline keeps its own set
    timeline_loads = selection.kept.keys() & candidates.timeline.artifact_units
    loads = timeline_loads | {uid for uid in candidates.state_ids
                              if uid in selection.kept and ctx.has_artifact_text(uid)}
    uncut = timeline_loads.difference(selection.cut)
    # none (a short run's outputs): the last record stays one to patch from, nothing changed it
    plain, plain_fids = (_plain_timeline_loads(ctx, _plain_memo(ctx), candidates.timeline, uncut) if uncut
                         else (uncut, frozenset()))
    out.plain_fids = plain_fids
    worked = out.worked = sorted(loads.union(selection.cut) - plain - twins.keys())
    repeats = (_repeat_room(ctx, selection, candidates, twins) if ctx.state.media_seen and selection.cut
               else {})
    for uid in worked:  # units cut to fit, or with a payload to load: the rest render as logged
        grant = selection.kept[uid]
        unit = unit_by_id[uid]
        ids = members[uid]
        saved, repeated = selection.repeats.get(uid, _NO_REPEAT)
        need = unit.tokens - saved  # what it costs, its repeated media as their lines
        # an uncut timeline unit not in ``plain`` was just found to hold a secret
        if (grant >= need and uid not in timeline_loads
                and _shown_as_logged(ctx, _plain_memo(ctx), uid, unit, ids, deferred)):
            continue
        for fid in ids:
            if ctx.has_artifact_text(fid):
                # Redacted before anything is sized: selection priced the unit by its redacted
                # payloads (``redacted_units``), so a unit kept whole holds them whole.
                ctx.redact(fid)  # memoised by content: reads the text back only the first time
                if grant < need:
                    continue
                if fid not in ctx.redacted:  # shown as logged: read back if the layout needs it
                    deferred.add(fid)
                    continue
                texts[fid] = ctx.full_text(fid)  # redacted
        if grant >= need:
            continue
        deficit = need - grant
        for fid in ids:  # the room its repeats free: a shown copy they stand for is never reduced
            deficit -= repeats.get(fid, 0)
        for fid in ids:  # the safe media step first: a cheaper rendition of the same image
            m = ctx.media(fid)
            if (deficit > 0 and m is not None and m.reducible and fid not in repeats  # truncated="true"
                    and (saving := reduction_saving(m, repeated)) > 0):
                deficit -= saving - ctx.truncated_extra(fid)
                reduced.add(fid)
                truncated.add(fid)
                original_tokens[fid] = ctx.content_tokens(fid)
                truncations.append(TruncationRecord(
                    id=fid, strategy="media_detail_low", original_tokens=m.tokens, tokens=m.reduced_tokens,
                    original_chars=0, kept=f"{len(m.blocks)} media at detail low ({m.tokens} -> "
                    f"{m.reduced_tokens} tokens)"))
        if deficit <= 0:
            continue
        shrink = [fid for fid in ids if ctx.text_shrinkable(fid)]
        fixed = sum(ctx.cost(fid) - (ctx.text_tokens(fid) if fid in shrink else 0) for fid in ids)
        fixed += sum(ctx.truncated_extra(fid) for fid in shrink if fid not in reduced)  # truncated="true"
        room = grant - fixed + saved + (need - grant - deficit)  # media savings lower the fixed part
        shares_of = split_room(room, [ctx.text_tokens(fid) for fid in shrink])
        for fid, share in zip(shrink, shares_of, strict=True):
            # Redacted (and recorded as this build's) here, not as a side effect of cutting it:
            # a cut remembered from an earlier build reads no text, and the manifest's
            # redaction records and the fragment's facts must not depend on that.
            ctx.redact(fid)
            result = truncate_fragment(ctx, fid, max(share, 1))
            texts[fid] = result.text
            # JSON whose compact form fits is shown whole (strategy "none"): re-serialised, not
            # truncated, so its block, its manifest line (whose reason says "compacted") and the
            # manifest's truncations do not say data is missing. A record of it there read as a
            # cut: auto-compaction took it for pressure and masked a result the build had sent.
            if result.truncated:
                truncated.add(fid)
                truncations.append(_truncation_record(fid, result))
            text_cut[fid] = result.tokens
            original_tokens[fid] = (ctx.content_tokens(fid) if ctx.media(fid) is not None
                                    else result.original_tokens)
    return out


def _truncation_record(fid: str, result: Truncation) -> TruncationRecord:
    kept_ranges = ", ".join(f"{r.start}-{r.end}" for r in result.kept)
    return TruncationRecord(id=fid, strategy=result.strategy, original_tokens=result.original_tokens,
                            tokens=result.tokens, original_chars=result.original_chars,
                            kept=f"{result.unit}s {kept_ranges}" if kept_ranges else "marker only")


def _plain_memo(ctx: BuildCtx) -> dict[Any, Any]:
    """The "shown as logged" answers of this config's ``TimelineUnits`` (one per ``recent_groups``)."""
    return ctx.objects_for(f"plain-loads:{ctx.config.recent_groups}")


def _plain_timeline_loads(ctx: BuildCtx, memo: dict[Any, Any], tu: TimelineUnits, uncut: set[str]
                          ) -> tuple[set[str], frozenset[str]]:
    """Which of the kept, uncut timeline units with a payload to load (``uncut``) render as
    logged (none of their payloads has a secret), and those payloads (``deferred``).

    Taken from the last build on these units and patched by what changed: a long run keeps
    ~40 such units and between two builds a few enter or leave, so asking each one again
    (``_shown_as_logged``) was ~0.1-0.15 ms of every build, cold. A unit's answer depends on
    its unit object (new whenever its row is derived afresh: ``touched_since`` lists it), its
    fragments' entries (set once, when the fold step that creates the fragment ends: the fold
    never replaces the entry of an existing id afterwards) and the redaction policy. ``memo``
    is this config's and ``recent_groups``' table, as ``tu`` is, so the last build it records
    is the last on ``tu``; any build may follow any other (another budget keeps other units):
    the difference is taken from whatever that one kept, and a new ``tu`` starts over. Units
    found to hold a secret are remembered alike (the builder redacts them)."""
    last = memo.get("last")
    memo["last"] = None  # a build that fails half-way leaves nothing to patch from
    mine: tuple[Any, ...] | None = last if isinstance(last, tuple) and last[0] is tu else None
    touched = tu.touched_since(mine[1]) if mine is not None else None
    fids: set[str] = set()
    stay: set[str] = set()
    secret: set[str] = set()
    if mine is not None and touched is not None:
        _, _, prev, prev_secret, prev_fids = mine
        stay = (uncut & prev) - touched
        secret = (uncut & prev_secret) - touched
        if len(stay) == len(prev) and len(stay) + len(secret) == len(uncut):  # none entered or changed
            memo["last"] = (tu, tu.generation, prev, secret, prev_fids)
            return prev, prev_fids
        fids.update(prev_fids)
        for uid in prev - stay:  # before a re-derived unit's new answer below replaces its memo
            fids.difference_update(memo[uid][2])
    for uid in sorted(uncut - stay - secret):
        plain = _shown_as_logged(ctx, memo, uid, tu.unit_of[uid], tu.members[uid], fids)
        (stay if plain else secret).add(uid)
    deferred = frozenset(fids)
    memo["last"] = (tu, tu.generation, stay, secret, deferred)
    return stay, deferred


def _shown_as_logged(ctx: BuildCtx, memo: dict[str, Any], uid: str, unit: Unit, ids: tuple[str, ...],
                     deferred: set[str]) -> bool:
    """Whether an uncut unit's payloads all render as logged (none has a secret): then they are
    added to ``deferred``. Known from an earlier build while the unit and its entries are the
    same objects: a long run keeps ~40 artifact-backed units, and asking the redaction memo
    for each of their fragments again was ~0.3 ms of every build."""
    hit = memo.get(uid)
    entries = ctx.state.entries
    if hit is not None and hit[0] is unit and all(map(operator.is_, map(entries.__getitem__, ids), hit[1])):
        deferred.update(hit[2])
        return True
    loads = tuple(fid for fid in ids if ctx.has_artifact_text(fid))
    if any(map(ctx.redacts, loads)):  # memoised by content: reads the text back the first time
        return False
    memo[uid] = (unit, tuple(map(entries.__getitem__, ids)), loads)
    deferred.update(loads)
    return True


def _repeat_room(ctx: BuildCtx, selection: Selection, candidates: Units, twins: dict[str, str]
                 ) -> dict[str, int]:
    """The room the kept repeats of a medium free for the fragment that shows it
    (``media_repeats.repeat_room``): a repeat is one line, though priced as the medium."""
    repeats = selection.repeats
    kept = [(fid, m, grant >= candidates.unit_of[uid].tokens - repeats.get(uid, _NO_REPEAT).saved)
            for uid, grant in selection.kept.items()
            if uid not in twins for fid in candidates.members[uid] if (m := ctx.media(fid)) is not None]
    repeated = frozenset().union(*(r.keys for r in repeats.values())) if repeats else frozenset()
    return repeat_room(ctx.state, kept, repeated)

"""What changed between two builds: pure, over manifests only (hashes, ids, reasons).

Used by ``contextfold diff`` and by the audit (each turn against the previous
one), so both explain a change the same way: the reason a fragment left is
the reason the later manifest records for it.
"""

from __future__ import annotations

import re
from typing import Any

from contextfold.domain.manifest import ContextManifest

__all__ = ["answer_group", "config_changes", "diff_manifests", "logged_as", "stand_in_for"]


def diff_manifests(a: ContextManifest, b: ContextManifest) -> dict[str, Any]:
    """What entered, left, was truncated or replaced between two builds, with reasons.

    ``replaced`` lists the fragments that left because a newer or more
    authoritative one took their place (superseded or duplicate, or compacted:
    masked to a stub or folded into a summary that ``b`` selected), with its id.

    A cut is a change in either direction: ``truncated`` lists what ``b`` cut that ``a``
    sent whole or cut to another size (``was_truncated`` tells which), ``restored`` what
    ``a`` cut and ``b`` sends whole again (a larger window, a smaller history). Listing
    only ``b``'s cuts hid the second: the model saw more of a fragment and the diff was silent.
    """
    fa = {f.id: f for f in a.fragments}
    fb = {f.id: f for f in b.fragments}
    # Only the few fragments that left are looked up among ``b``'s exclusions (a long run's
    # manifest excludes ~10,000), and the compactions' stand-ins are read only for one that is
    # not there: an audit diffs every pair of turns, and reading them all each time was most of
    # a 5,000-turn audit's time.
    gone = fa.keys() - fb.keys()
    excluded_b = {e.id: e for e in b.excluded_items if e.id in gone} if gone else {}
    stand_ins: list[tuple[int, int, str, bool, str]] | None = None
    left = []
    for fid in sorted(gone, key=_in_log_order):
        why = excluded_b.get(fid)
        if why is not None:
            left.append({"id": fid, "kind": fa[fid].kind, "tokens": fa[fid].tokens, "reason": why.reason,
                         "replaced_by": why.replaced_by, "detail": why.detail})
            continue
        if stand_ins is None:
            stand_ins = _manifest_stand_ins(b)
        by = _compacted_into(logged_as(fid, fa[fid].source_ref), stand_ins, answer_group(fa[fid].source_ref))
        left.append({"id": fid, "kind": fa[fid].kind, "tokens": fa[fid].tokens,
                     "reason": "compacted" if by else "no longer in the projection",
                     "replaced_by": by[0] if by else None, "detail": by[1] if by else ""})
    entered = [{"id": fid, "kind": fb[fid].kind, "tokens": fb[fid].tokens,
                "reason": fb[fid].selection_reason} for fid in sorted(set(fb) - set(fa), key=_in_log_order)]
    # only a fragment cut in either build can be truncated or restored: the few are sorted, not the
    # thousands both builds kept (sorting those was most of a 10,000-event audit's diff time)
    kept = sorted((fid for fid, f in fb.items() if fid in fa and (f.truncated or fa[fid].truncated)),
                  key=_in_log_order)
    truncated = [{"id": fid, "kind": fb[fid].kind, "before": fa[fid].tokens, "after": fb[fid].tokens,
                  "was_truncated": fa[fid].truncated}
                 for fid in kept
                 if fb[fid].truncated and (not fa[fid].truncated or fa[fid].tokens != fb[fid].tokens)]
    restored = [{"id": fid, "kind": fb[fid].kind, "before": fa[fid].tokens, "after": fb[fid].tokens}
                for fid in kept if fa[fid].truncated and not fb[fid].truncated]
    replaced = [{"id": e["id"], "by": e["replaced_by"], "reason": e["reason"]}
                for e in left if e["replaced_by"]]
    return {
        "from_turn": a.turn, "to_turn": b.turn,
        "config_changed": config_changes(a, b),
        "tokens": {"from": a.selected_tokens, "to": b.selected_tokens},
        "cache_key_changed": a.cache_key != b.cache_key,
        "entered": entered, "left": left, "truncated": truncated, "restored": restored, "replaced": replaced,
        "tools_entered": sorted({t.name for t in b.tools} - {t.name for t in a.tools}),
        "tools_left": sorted({t.name for t in a.tools} - {t.name for t in b.tools}),
    }


def config_changes(a: ContextManifest, b: ContextManifest) -> dict[str, dict[str, Any]]:
    """The build settings that differ between ``a`` and ``b`` (``{name: {"from", "to"}}``), and
    ``budget_tokens`` when the budget differs (a usage calibration shrinks it with the settings
    unchanged). Why: two turns built under another window or provider differ for that reason
    too, and a diff that lists only what entered and left blames the log for it."""
    changed: dict[str, dict[str, Any]] = {}
    if a.config_hash != b.config_hash:  # the canonical hash of the config: equal hash, equal config
        da, db = a.config.model_dump(mode="json"), b.config.model_dump(mode="json")
        changed = {k: {"from": da.get(k), "to": db.get(k)} for k in sorted(da.keys() | db.keys())
                   if da.get(k) != db.get(k)}
    if a.budget_tokens != b.budget_tokens:
        changed["budget_tokens"] = {"from": a.budget_tokens, "to": b.budget_tokens}
    return changed


_DIGITS = re.compile(r"(\d+)")


def _in_log_order(fid: str) -> tuple[tuple[int, str, int], ...]:
    """A sort key that reads the numbers in an id as numbers: ``e3`` before ``e10``, ``e12.c2``
    before ``e12.c10`` (ids name log positions; as text, ``e10`` sorted before ``e3``)."""
    return tuple((1, "", int(part)) if part.isdigit() else (0, part, 0)
                 for part in _DIGITS.split(fid) if part)


_REF = re.compile(r"events?://.+/(\d+)(?:-(\d+))?")
_FID = re.compile(r"e(\d+)(?:\.c\d+)?")


def logged_as(fid: str, source_ref: str) -> str:
    """The id of the logged event a fragment stands for: for a stub (``e13.c1``, logged at the
    compaction's position), the earlier event its ``event://RUN/N`` source names; else ``fid``.
    A stub that a later summary folded in was reported as "no longer in the projection": the
    summary covers the result's position, not the mask's. (An event's own fragment, or one whose
    source a user set, names a later or no position: it stays at its id's.)"""
    ref, own = _REF.fullmatch(source_ref), _FID.fullmatch(fid)
    if ref is None or ref.group(2) is not None or own is None or "." not in fid:
        return fid
    return f"e{ref.group(1)}" if int(ref.group(1)) < int(own.group(1)) else fid


_CALL_REF = re.compile(r"call://.*@(\d+)", re.DOTALL)


def answer_group(source_ref: str) -> int | None:
    """The log position of the tool group a call's answer belongs to (the issuing response's),
    read from the answer fragment's source (``call://RUN/ID@N``; the fold's ``answer_group``),
    or None for any other fragment."""
    m = _CALL_REF.fullmatch(source_ref)
    return None if m is None else int(m.group(1))


def stand_in_for(manifest: ContextManifest, fid: str, group: int | None = None) -> tuple[str, str] | None:
    """The fragment of ``manifest`` standing in for the logged fragment ``fid`` (a summary or a
    mask stub) and how, or None when no compaction the manifest shows covers it. ``why`` and
    ``diff`` name the same one: the stand-in the request holds, not the first compaction that
    covers the position (a mask, which hides tool results only, before the summary). ``group``:
    for a call's answer, its group's position (:func:`answer_group`)."""
    return _compacted_into(fid, _manifest_stand_ins(manifest), group)


def _manifest_stand_ins(m: ContextManifest) -> list[tuple[int, int, str, bool, str]]:
    return _stand_ins([(f.id, f.source_ref, "") for f in m.fragments]
                      + [(e.id, e.source_ref, e.reason) for e in m.excluded_items])


def _stand_ins(items: list[tuple[str, str, str]]) -> list[tuple[int, int, str, bool, str]]:
    """(from, to, id, is_summary, exclusion reason or "") of each fragment (id, source_ref, reason)
    of a compaction that stands in for logged events: a mask stub cites ``event://RUN/N`` under
    the compaction's id (``e35.c1``), a summary ``events://RUN/A-B`` (both logged at the
    compaction's position, after what they cover)."""
    out = []
    for item_id, source_ref, reason in items:
        ref, fid = _REF.fullmatch(source_ref), _FID.fullmatch(item_id)
        if ref and fid:
            lo, hi = int(ref.group(1)), int(ref.group(2) or ref.group(1))
            if int(fid.group(1)) > hi:
                out.append((lo, hi, item_id, ref.group(2) is not None, reason))
    return out


def _compacted_into(fid: str, stand_ins: list[tuple[int, int, str, bool, str]],
                    group: int | None = None) -> tuple[str, str] | None:
    """The fragment standing in for ``fid``'s event, and how, when a compaction replaced it.

    ``group``: the position of the tool group ``fid`` answers, if it is an answer. A summary takes
    a group whose runtime recovery answer (lost, cancelled) was logged after its cover
    (``masking.wholly_inside``) and hides that answer with it: compared by its own position only,
    the answer was reported "no longer in the projection", with no replacement, while its call was
    "compacted"."""
    m = _FID.fullmatch(fid)
    if m is None:
        return None
    pos = int(m.group(1))
    for lo, hi, by, summary, dropped in stand_ins:
        with_call = summary and group is not None and not lo <= pos <= hi and lo <= group <= hi
        if lo <= pos <= hi or with_call:
            how = (f"summarized: {by} covers events {lo}-{hi}" if summary
                   else f"masked: the stub {by} stands in for event {pos}")
            how += f" (with the call at event {group} it answers)" if with_call else ""
            return by, how + (f" ({by} itself excluded: {dropped})" if dropped else "")
    return None

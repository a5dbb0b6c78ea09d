"""What changed between two builds: pure, over manifests only (hashes, ids, reasons).

Used by ``contextfold diff`` and by the audit (each turn against the previous
one), so both explain a change the same way: the reason a fragment left is
the reason the later manifest records for it.
"""

from __future__ import annotations

from typing import Any

from contextfold.domain.manifest import ContextManifest

__all__ = ["diff_manifests"]


def diff_manifests(a: ContextManifest, b: ContextManifest) -> dict[str, Any]:
    """What entered, left, was truncated or replaced between two builds, with reasons.

    ``replaced`` lists the fragments that left because a newer or more
    authoritative one took their place (superseded or duplicate), with its id.
    """
    fa = {f.id: f for f in a.fragments}
    fb = {f.id: f for f in b.fragments}
    excluded_b = {e.id: e for e in b.excluded_items}
    left = []
    for fid in sorted(set(fa) - set(fb)):
        why = excluded_b.get(fid)
        left.append({"id": fid, "kind": fa[fid].kind, "tokens": fa[fid].tokens,
                     "reason": why.reason if why else "no longer in the projection",
                     "replaced_by": why.replaced_by if why else None,
                     "detail": why.detail if why else ""})
    entered = [{"id": fid, "kind": fb[fid].kind, "tokens": fb[fid].tokens,
                "reason": fb[fid].selection_reason} for fid in sorted(set(fb) - set(fa))]
    truncated = [{"id": fid, "before": fa[fid].tokens, "after": fb[fid].tokens}
                 for fid in sorted(set(fa) & set(fb))
                 if fb[fid].truncated and (not fa[fid].truncated or fa[fid].tokens != fb[fid].tokens)]
    replaced = [{"id": e["id"], "by": e["replaced_by"], "reason": e["reason"]}
                for e in left if e["replaced_by"]]
    return {
        "from_turn": a.turn, "to_turn": b.turn,
        "tokens": {"from": a.selected_tokens, "to": b.selected_tokens},
        "cache_key_changed": a.cache_key != b.cache_key,
        "entered": entered, "left": left, "truncated": truncated, "replaced": replaced,
        "tools_entered": sorted({t.name for t in b.tools} - {t.name for t in a.tools}),
        "tools_left": sorted({t.name for t in a.tools} - {t.name for t in b.tools}),
    }

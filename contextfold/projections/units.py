"""The selection units of one build: state fragments (deduped) and the timeline's units.

Why apart from the fragments' facts (``fragment_facts``): the facts are per fragment and cached
for the life of the state; the units are this build's candidates, made from them, with the
build's dedupe of the state fragments (``_state_units``) and the timeline's memoised units
(``timeline_units``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from contextfold.domain.fragments import TRUST_RANK
from contextfold.domain.manifest import ExcludedFragment
from contextfold.projections.chunk_copies import chunk_copies
from contextfold.projections.fact_sources import copy_of, file_reads, file_sources
from contextfold.projections.fragment_facts import BuildCtx
from contextfold.projections.media_repeats import unit_media
from contextfold.projections.selection import Unit, score
from contextfold.projections.state import MessageItem, TimelineItem, TimelineMark
from contextfold.projections.timeline_units import TimelineUnits, timeline_units

__all__ = ["Units", "make_units"]

_STATE_LAYER = {"policy": "policy", "instruction": "policy", "goal": "goal", "success_contract": "goal",
                "plan": "plan", "evidence": "retrieval", "memory": "retrieval"}
_STATE_LAYER_NO = {"policy": 1, "goal": 3, "plan": 4}
"""A state layer's number (retrieval and memory: 6)."""


@dataclass
class Units:
    """The candidates of one build: units, their fragments, layers, and early exclusions."""

    units: list[Unit] = field(default_factory=list)
    """State fragments' units and the timeline's required ones (its optional ones are in
    ``presorted``)."""
    presorted: dict[str, list[Unit]] = field(default_factory=dict)
    """The timeline's optional units by layer, sorted by rank (``select_units(presorted=)``)."""
    unit_of: dict[str, Unit] = field(default_factory=dict)
    """Every unit by id."""
    state_ids: list[str] = field(default_factory=list)
    """Units of state fragments (policy ... memory): derived every build."""
    timeline: TimelineUnits = field(default_factory=TimelineUnits)
    """The timeline's memoised units (what changed since when: ``touched_since``)."""
    members: dict[str, tuple[str, ...]] = field(default_factory=dict)
    layer_no: dict[str, int] = field(default_factory=dict)
    excluded: list[ExcludedFragment] = field(default_factory=list)


def _copy_line(ctx: BuildCtx, fid: str, winner: str, files: Mapping[str, str]) -> ExcludedFragment:
    f = ctx.frag(fid)
    return ExcludedFragment(id=fid, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count,
                            reason="duplicate", replaced_by=winner)


def _chunk_copy_line(ctx: BuildCtx, fid: str, read: str) -> ExcludedFragment:
    """A retrieved chunk a read of its file shows (``chunk_copies``): a copy, not a version."""
    f = ctx.frag(fid)
    return ExcludedFragment(id=fid, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count,
                            reason="duplicate", replaced_by=read,
                            detail=f"retrieved lines that {read}, a read of the file at the same "
                                   "revision, shows")


def _semantic_line(ctx: BuildCtx, fid: str, winner: str, files: Mapping[str, str]) -> ExcludedFragment:
    """The line of a fragment left out for another under its semantic key. Different content
    under one key from a newer event is a newer version: ``superseded`` (DESIGN 7: a newer
    revision supersedes the older one), as a file read again at a new revision is. It was called a
    ``duplicate`` (wiki/deploy at rev 41 and rev 42: the model was told the old deploy window was
    a copy of the new one). A newer version set aside for an older, more authoritative one is
    ``superseded`` as well, by authority (DESIGN 7: the more authoritative or newer version wins):
    a web page contradicting the workspace's deploy rule was reported a ``duplicate`` of it, and
    an auditor was never told a conflicting version was set aside. Only the same content is a
    ``duplicate``."""
    f, w = ctx.frag(fid), ctx.frag(winner)
    if w.content_hash == f.content_hash:
        return ExcludedFragment(id=fid, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count,
                                reason="duplicate", replaced_by=winner, detail="")
    newer = ctx.state.entries[winner].position > ctx.state.entries[fid].position
    kept_over = "a different version under the same semantic key: the"
    if newer:
        detail = "a newer version under the same semantic key"
    elif w.trust != f.trust:
        detail = f"{kept_over} {w.trust} one is kept over this {f.trust} one, as the more authoritative"
    elif winner in files and fid not in files:
        detail = (f"{kept_over} {w.kind} from file {files[winner]} is kept over this newer {f.kind}, "
                  "which shows no file")
    else:  # an instruction: it stays in the cached prefix
        detail = f"{kept_over} {w.kind} is kept over this newer {f.kind}"
    return ExcludedFragment(id=fid, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count,
                            reason="superseded", replaced_by=winner, detail=detail)


def _state_units(ctx: BuildCtx, state_ids: list[str]
                 ) -> tuple[list[Unit], dict[str, tuple[str, ...]], dict[str, int], list[ExcludedFragment]]:
    """The state fragments' units, member tables and the lines of the copies and older versions
    left out (``make_units``)."""
    entries = ctx.state.entries
    units: list[Unit] = []
    members: dict[str, tuple[str, ...]] = {}
    layer_no: dict[str, int] = {}
    excluded: list[ExcludedFragment] = []
    left_out: set[str] = set()
    for gone in _refetched(ctx, state_ids):
        excluded.append(gone)
        left_out.add(gone.id)
    # A retrieved chunk of a file that a read of it at its revision shows, text and all, is a copy
    # of the read, never its newer version (``chunk_copies``)
    if ctx.state.source_kinds:
        for fid, read in chunk_copies(ctx.state, set(state_ids)).items():
            if fid not in ctx.required:
                excluded.append(_chunk_copy_line(ctx, fid, read))
                left_out.add(fid)
    # The same text from two files is two facts: a copy by content only from the same file
    # (``fact_sources``), or from no file (a mirror's page, a memory).
    candidates = [fid for fid in state_ids if fid not in left_out]
    reads = file_reads(ctx.state)
    files = file_sources(ctx.state, candidates, ctx.frag, reads)
    # copies of one content or semantic key (a whole-file read is keyed by its path): the more
    # authoritative, then an instruction (the cached stable prefix: reading AGENTS.md moved its
    # instruction to the retrieval layer and changed the cache key), then one that shows a file
    # (``_shows_no_file``), then the newer
    ranked = sorted(candidates,
                    key=lambda fid: (-TRUST_RANK[ctx.frag(fid).trust], entries[fid].kind != "instruction",
                                     _shows_no_file(fid, files), -entries[fid].position, fid))
    kept_texts: dict[str, list[str]] = {}
    seen_semantic: dict[str, str] = {}
    for fid in ranked:
        f = ctx.frag(fid)
        semantic = ctx.state.semantic_keys.get(fid)  # the same fact under two sources: one copy
        winner = copy_of(fid, kept_texts.get(f.content_hash, ()), files)
        line = _copy_line
        if winner is None and semantic is not None:
            winner, line = seen_semantic.get(semantic), _semantic_line
            if winner is not None and _reads_of_one_file(fid, winner, reads):
                winner = None
        if winner is not None and fid not in ctx.required:
            excluded.append(line(ctx, fid, winner, files))
            left_out.add(fid)
            continue
        kept_texts.setdefault(f.content_hash, []).append(fid)
        if semantic is not None:
            seen_semantic.setdefault(semantic, fid)
    for fid in state_ids:
        if fid in left_out:
            continue
        facts = ctx.facts(fid)
        f = facts.frag
        pos = entries[fid].position
        tokens = facts.cost
        layer = _STATE_LAYER.get(f.kind, "retrieval")
        media = unit_media(ctx.state, ctx.media, (fid,)) if facts.media is not None else ()
        units.append(Unit(fid, layer, tokens, score(f.priority, pos, tokens), pos,
                          fid in ctx.required, facts.min_cost if facts.shrinkable else None, media=media))
        members[fid] = (fid,)
        layer_no[fid] = _STATE_LAYER_NO.get(layer, 6)
    return units, members, layer_no, excluded


_WHOLE_DOCUMENTS = {"web": "web page", "email": "e-mail", "document": "document"}
"""The ``source_kind`` of a retrieval that fetched its source whole (``EvidenceRetrieved``), named."""


def _refetched(ctx: BuildCtx, state_ids: list[str]) -> list[ExcludedFragment]:
    """The lines of the retrievals a newer fetch of their whole document (a web page, an e-mail, a
    document) replaced: a newer version of the source supersedes what was retrieved of it before,
    chunks too, whatever their trust (a stale cached copy declared workspace hid a fresh external
    fetch).

    Only a whole document's fetch: chunks of one source (``source_kind="chunk"``, the default, as
    LangChain and LlamaIndex retrievers log a document's passages under its URL) are its
    passages, not its versions, and a top-3 retrieval from one page sent only the last, the
    other two "superseded". Of chunks, only copies go (one content hash or semantic key, one
    file's lines: ``_state_units``). A memory is one by its memory_id and file reads supersede by
    path and revision, in the fold."""
    entries, kinds = ctx.state.entries, ctx.state.source_kinds
    newest: dict[str, str] = {}
    for fid in state_ids:
        if kinds.get(fid) in _WHOLE_DOCUMENTS and entries[fid].kind == "evidence":
            ref = ctx.frag(fid).source_ref
            old = newest.get(ref)
            if not ref.startswith("file://") and (old is None
                                                  or entries[fid].position > entries[old].position):
                newest[ref] = fid
    lines: list[ExcludedFragment] = []
    if not newest:
        return lines
    for fid in state_ids:
        if entries[fid].kind != "evidence" or fid in ctx.required:
            continue
        f = ctx.frag(fid)
        newer = newest.get(f.source_ref)
        if newer is not None and entries[newer].position > entries[fid].position:
            lines.append(ExcludedFragment(
                id=fid, kind=f.kind, source_ref=f.source_ref, tokens=f.token_count, reason="superseded",
                replaced_by=newer, detail=f"a newer retrieval of the whole {_WHOLE_DOCUMENTS[kinds[newer]]} "
                                          "from the same source"))
    return lines


def _reads_of_one_file(fid: str, winner: str, reads: Mapping[str, str]) -> bool:
    """Both are current reads of one file (``fact_sources.file_reads``): the fold decided between
    them (``fold_files``), so the key they share keeps out only the copies that are no read of the
    file. A partial re-read at a new revision and the stale rest of the whole read it superseded
    carry the whole read's key (the file as it is now) and are shown side by side: the key kept one
    of the two and left the other out as "a newer version"."""
    path = reads.get(fid)
    return path is not None and reads.get(winner) == path


def _shows_no_file(fid: str, files: Mapping[str, str]) -> bool:
    """Of two equally authoritative copies, one that shows a file stands for the text before one
    that shows none (a memory, a page, an index's chunk keyed by the file's path).

    A copy is told by its file (``fact_sources.copy_of``): a memory with a file's text is a copy
    of the read, not the other way round, so when the memory was the newer it was kept first, the
    read was no copy of it, and the text was sent twice (once, in the other order). And a chunk
    of a code index keyed by a file's path, newer than the agent's read of the whole file, won
    the key by age: the read was left out as superseded and the model saw one line of a 59-line
    file. Between two fragments that show the file, the newer still wins."""
    return fid not in files


def make_units(ctx: BuildCtx, timeline: Sequence[TimelineItem], mark: TimelineMark,
               current_input: str | None) -> Units:
    """State fragments (deduped) and timeline units (a tool group is one atomic unit).

    Dedupe: a newer fetch of a whole document supersedes what was retrieved of its source before
    (``_refetched``); a retrieved chunk a read of its file shows is a copy of the read
    (``chunk_copies``); optional state fragments that share a content hash or a semantic key
    (the ``semantic_key`` evidence was retrieved under, a whole file read's path) keep one
    copy: the more authoritative, then the newer. The others are ``duplicate``, or ``superseded``
    when a newer version (different content) under the semantic key replaced them.
    A group with a call still open is excluded as ``stale``; one that uses a tool the
    request does not offer (``ctx.blocked``) is a unit shown as a note (``not_offered``).
    """
    state = ctx.state
    entries = state.entries
    state_ids = [fid for fid in state.active if entries[fid].kind != "tool_spec"]
    facts = list(map(ctx.note, state_ids))
    # The state fragments (policy, goal, plan, instructions, evidence) rarely change between
    # builds: their units are the same while the fragments' facts and entries are the same
    # objects and the same ones are required (a short run's build ranked and scored them anew
    # every time, ~4% of it).
    key = (state_ids, facts, list(map(entries.__getitem__, state_ids)),
           [fid in ctx.required for fid in state_ids])
    memo = ctx.objects_for("state-units")
    hit = memo.get("last")
    if hit is None or hit[0] != key:
        hit = memo["last"] = (key, *_state_units(ctx, state_ids))
    _, kept_units, members, layer_no, duplicates = hit
    units = list(kept_units)  # the timeline's required units are added below
    excluded = list(duplicates)

    tu = timeline_units(ctx, timeline, mark, current_input)
    ctx.redacted.update(tu.hits)
    # The timeline's tables hold ~10,000 entries on a long run, with holes from rows
    # replaced: copying them to add the few state units cost ~1 ms a table per build. The
    # state units are written into them instead (this build's replace the last one's).
    tu.overlay(units, members, layer_no)
    state_units = [u.id for u in units]
    units.extend(tu.required_units.values())
    excluded.extend(tu.stale_lines())
    # Made here, whole: a default Units() would make a TimelineUnits (~15 empty tables) only
    # to drop it.
    return Units(units=units, presorted=tu.sorted_layers, unit_of=tu.unit_of, state_ids=state_units,
                 timeline=tu, members=tu.members, layer_no=tu.layer_no, excluded=excluded)


def current_input_of(timeline: Sequence[TimelineItem]) -> str | None:
    """The user input this request answers: the newest item, past trailing notes."""
    current: str | None = None
    for item in reversed(timeline):
        if isinstance(item, MessageItem) and item.role == "user":
            current = item.fragment_id
        if not (isinstance(item, MessageItem) and item.role == "note"):
            break
    return current


__all__ += ["current_input_of"]

"""CLI command ``why``: the reason the manifest records for keeping or dropping a fragment.

``why RUN --turn N FRAGMENT_OR_SOURCE [--record first|last|K]``: by fragment id, tool name,
source substring or file path, in the turn's first record or the one picked; for a tool the
request did not declare, the exposure decision re-derived from the log; for words none of those
match, the fragments of the events whose logged text holds them (``_by_text``). Apart from
``cli_audit`` (which it shares the past-turn flags with) to keep each module one command's size.

Exit codes: 0 something matched; 1 nothing did; 2 our typed errors (cli.main).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

from contextfold.api import Run
from contextfold.audit.diff import logged_as, stand_in_for
from contextfold.audit.outputs import WhyOutput
from contextfold.audit.text import visible
from contextfold.cli import store_for
from contextfold.cli_audit import given_config
from contextfold.cli_build import not_exposed_reasons, turn_record
from contextfold.cli_files import shown_json
from contextfold.cli_progress import fold_bar
from contextfold.domain.errors import InvalidInputError
from contextfold.domain.events import ContextBuilt, HistoryCompacted, UsageObserved
from contextfold.domain.manifest import ContextManifest
from contextfold.projections.progress import Progress
from contextfold.projections.redact_shown import masked, masked_value
from contextfold.projections.state import ToolGroup
from contextfold.projections.tool_names import renamed_to, tool_name_alias
from contextfold.rebuild_api import check_given, nearest_config, previewed, read_turn, rebuild

__all__ = ["call_positions", "explain", "match_line", "position_named"]


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _checked_query(query: str) -> str:
    """``query`` unless it is empty or blank: as a substring it matched every fragment's source, so
    ``why RUN --turn N ""`` listed the whole manifest as if each fragment were the one asked about."""
    if not query.strip():
        raise InvalidInputError(f"why needs a fragment id (e12), tool name or source/path substring to "
                                f"look for, got {query!r}")
    return query


_WHOLE_REF = re.compile(r"[a-z]+://.*\d")
_EVENT_REF = re.compile(r"event://.+/(\d+)")
"""A query naming one logged event by its ref: the event's own fragment is ``e{position}``."""
_CALL_REF = re.compile(r"call://(.+)/([^/@]+)@(\d+)")
"""A query naming a call by the ref its result's fragment carries: run, call id, response position."""
_FRAGMENT_ID = re.compile(r"e(\d+)(?:\.c\d+)?")
"""A query naming a fragment by its id: ``e{position}``, or ``e{position}.c{n}`` (a stub among them)."""


def position_named(query: str) -> re.Match[str] | None:
    """``query`` as a fragment id (``e27``, ``e32.c4``) or an event ref (``event://RUN/27``): the
    match whose first group is the log position it names; None for anything else (a call, a tool,
    a source, words)."""
    return _FRAGMENT_ID.fullmatch(query) or _EVENT_REF.fullmatch(query)


def _sourced(query: str, source_ref: str, *, whole_words: bool = False) -> bool:
    """Whether a fragment from ``source_ref`` is one ``query`` asks about: a ref ending in a
    position (``event://r1/4``) names that one (as a substring it also matched ``event://r1/41``);
    anything else, a path or part of one, matches as a substring, or with ``whole_words`` only
    where no letter or digit adjoins it (``c1`` in ``call://r/c1``, not in ``call://r/c10``).
    Both are compared in NFC: a path read under its NFD spelling (macOS) is the one a typed
    ``café`` asks about."""
    if not (query.isascii() and source_ref.isascii()):
        query, source_ref = unicodedata.normalize("NFC", query), unicodedata.normalize("NFC", source_ref)
    if _WHOLE_REF.fullmatch(query):
        return source_ref == query or source_ref.startswith(query + "#")
    if whole_words:
        return re.search(rf"(?<![A-Za-z0-9]){re.escape(query)}(?![A-Za-z0-9])", source_ref) is not None
    return query in source_ref


def _asked_about(query: str, sources: list[str]) -> Callable[[str], bool]:
    """Which sources ``query`` asks about: those it names as whole words, if any of ``sources``
    has one (``why RUN c1`` listed c10-c12 too), else those holding it (a part of a name)."""
    whole = any(_sourced(query, ref, whole_words=True) for ref in sources)
    return lambda ref: _sourced(query, ref, whole_words=whole)


def explain(manifest: ContextManifest, query: str) -> list[dict[str, Any]]:
    """Fragments/tools of ``manifest`` matching ``query`` (id, tool name, or source_ref/path substring)."""
    _checked_query(query)
    found: list[dict[str, Any]] = []
    event = _EVENT_REF.fullmatch(query)
    ids = {query, f"e{event.group(1)}"} if event else {query}
    exact = [f for f in manifest.fragments if f.id in ids]
    exact_x = [e for e in manifest.excluded_items if e.id in ids]
    # a made-up tool name an API refuses is exposed under its alias (the repair names both; a long
    # name clipped, so the alias is found from the name, as the build made it)
    alias = tool_name_alias(query)
    renamed = renamed_to(manifest.repairs, alias)
    tools = [t for t in manifest.tools if t.name == query or (renamed and t.name == alias)]
    asked = _asked_about(query, [x.source_ref for x in (*manifest.fragments, *manifest.excluded_items)])
    sel = exact or ([] if exact_x or tools else [f for f in manifest.fragments if asked(f.source_ref)])
    exc = exact_x or ([] if exact or tools else [e for e in manifest.excluded_items if asked(e.source_ref)])
    for f in sel:
        found.append({"id": f.id, "verdict": "kept", "kind": f.kind, "trust": f.trust, "layer": f.layer,
                      "source_ref": f.source_ref, "tokens": f.tokens, "truncated": f.truncated,
                      "reason": f.selection_reason})
    for e in exc:
        found.append({"id": e.id, "verdict": "dropped", "kind": e.kind, "source_ref": e.source_ref,
                      "tokens": e.tokens, "reason": e.reason, "replaced_by": e.replaced_by,
                      "detail": e.detail})
    for t in tools:
        shown = f" (the history's {query!r}: a name the API refuses)" if t.name != query else ""
        found.append({"id": t.name, "verdict": "kept", "kind": "tool_spec", "tokens": t.tokens,
                      "reason": f"tool exposed: {t.reason}{shown}"})
    return found


def _not_exposed(run: Run, manifest: ContextManifest, query: str, progress: Progress) -> list[dict[str, Any]]:
    """``query`` as a tool the build did not expose, with the reason (see ``not_exposed_reasons``)."""
    reason = not_exposed_reasons(run, manifest, [query], progress)[query]
    return [] if reason is None else [{"id": query, "verdict": "not exposed", "kind": "tool_spec",
                                       "reason": reason}]


def _not_found(run: Run, manifest: ContextManifest, query: str) -> str | None:
    """What to say of ``query`` that nothing in ``manifest`` matched: the position it names does not
    exist or was logged after the build, or a compaction took it; None when there is nothing to add
    (``why`` then looks for it as words, or says ``_nothing``). Why a value: the caller chose the text
    search by comparing this message with ``_nothing``'s, which any rewording would have broken."""
    m = position_named(query)
    if not m:  # a call, by its id or its ref: told of as its answer's event, else its response's
        for pos in call_positions(run, manifest, query):
            if (said := _compacted_at(run, manifest, query, pos)) is not None:
                return said
        return None
    pos = int(m.group(1))
    if pos > (version := run.version) or pos < 1:  # not "logged after the build": never logged
        return (f"{query}: run {run.run_id!r} has no position {pos} (its log holds positions "
                f"1..{version}); nothing in turn {manifest.turn}'s manifest matches it")
    stub = m.re is _FRAGMENT_ID and "." in query
    if stub and pos <= manifest.log_version:  # a stub: the event it stood for
        entry = run.state().entries.get(query)
        if entry is None:  # no such fragment was ever folded: nothing to tell of it
            return None
        pos = int(logged_as(query, entry.source_ref)[1:])
    if pos > manifest.log_version:
        return (f"{query} was logged at position {pos}, after turn {manifest.turn}'s build "
                f"(log position {manifest.log_version}): it did not exist yet")
    return _compacted_at(run, manifest, query, pos)


def call_positions(run: Run, manifest: ContextManifest, query: str) -> list[int]:
    """The log positions of the call ``query`` names (``call://RUN/ID@POS`` or a bare id), as of
    ``manifest``'s build: its answers', then its response's; none for no call of the run.

    Why: ``why RUN c0`` of a call a summary stands for said "not part of the projection at that
    turn", though the summary names the call, and its answer's event was said to be compacted.
    An id re-used by a later call (real logs re-use them) names the latest logged before the build."""
    ref = _CALL_REF.fullmatch(query)
    if ref is not None and ref.group(1) != run.run_id:
        return []
    state = run.state()
    heads = [pos for pos, item in state.items.items()
             if pos <= manifest.log_version and isinstance(item, ToolGroup)
             and (ref is None or pos == int(ref.group(3)))
             and any(slot.call_id == (query if ref is None else ref.group(2)) for slot in item.calls)]
    if not heads:
        return []
    group = state.items[max(heads)]
    assert isinstance(group, ToolGroup)
    call = query if ref is None else ref.group(2)
    answers = [slot.answer_position for slot in group.calls
               if slot.call_id == call and slot.answer_position is not None
               and slot.answer_position <= manifest.log_version]
    return [*answers, group.position]


def _compacted_at(run: Run, manifest: ContextManifest, query: str, pos: int) -> str | None:
    """What ``manifest`` holds in place of the event logged at ``pos`` (a mask's stub, a summary),
    or the compaction that covers it, said of ``query``; None when no compaction took it."""
    shown = stand_in_for(manifest, f"e{pos}")  # what the request holds in its place, as diff says
    # a recovery answer logged after a summary's cover is hidden with its call's group
    # (``masking.wholly_inside``): compared by its own position only, it matched nothing
    group = None if shown is not None else run.state().answer_group.get(pos)
    if group is not None:
        shown = stand_in_for(manifest, f"e{pos}", group)
    if shown is not None:
        return f"{query} was compacted: {shown[1]}"
    covering = [(rec.position, ev) for rec in run.store.events.fold_events(run.run_id,
                                                                          upto=manifest.log_version)
                if isinstance(ev := rec.event, HistoryCompacted)
                and (ev.covers_from <= pos <= ev.covers_to
                     or (ev.strategy == "summary" and group is not None
                         and ev.covers_from <= group <= ev.covers_to < pos))]
    if covering:  # none of their stand-ins is in the manifest: name the newest
        at, ev = covering[-1]
        return (f"{query} is covered by the compaction at position {at} (covers "
                f"{ev.covers_from}-{ev.covers_to}), whose stand-in the request does not hold")
    return None


def _nothing(manifest: ContextManifest, query: str, *, text: bool = False) -> str:
    searched = ", nor does any logged text up to its build" if text else ""
    return (f"nothing in turn {manifest.turn}'s manifest matches {query!r} (by id, tool name or source)"
            f"{searched}; it was not part of the projection at that turn")


_NOT_TEXT = frozenset({"type", "v"})
"""An event's keys whose values are its schema's, not its text: never a match for words."""


def _strings(value: Any) -> Iterator[str]:
    """The string values of an event's JSON (its texts, refs, ids, arguments), its keys' names and
    its ``type`` and version left out."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _NOT_TEXT:
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


def _by_text(run: Run, manifest: ContextManifest, query: str) -> list[dict[str, Any]]:
    """The manifest's lines of the fragments of each event logged before ``manifest``'s build whose
    text holds ``query`` (any case; what an artifact holds is not read), marked with the event;
    or, for an event a compaction took, what stands in for it.

    Why: the seed (9) has the manifest answer why a constraint was lost, and a person asking knows
    its words, not its fragment id: ``why RUN --turn N "payments table"`` said "not part of the
    projection" of a user input that was, dropped for room. Tried only when no id, tool name or
    source matched, so those queries read as they did; a context_built record is a build, not text
    the model was shown."""
    needle = _fold(query)
    # an event whose JSON does not hold the words holds no string that does, unless JSON escapes
    # them (a quote, a backslash, a control character): a cheap test first, of most events
    plain = not any(c in needle for c in '"\\') and needle.isprintable()
    lines = {line.id: line for line in (*manifest.fragments, *manifest.excluded_items)}
    found: list[dict[str, Any]] = []
    for rec in run.store.events.fold_events(run.run_id, upto=manifest.log_version):
        ev = rec.event
        if isinstance(ev, ContextBuilt | UsageObserved):
            continue
        # dumped once: a hit reads its strings back from this JSON (a second dump, as a dict, cost
        # as much again for each event holding the words)
        dumped = ev.model_dump_json()
        if plain and needle not in _fold(dumped):
            continue
        if not any(needle in _fold(s) for s in _strings(json.loads(dumped))):
            continue
        own = f"e{rec.position}"
        ids = [fid for fid in lines if fid == own or fid.startswith(own + ".")]
        matches = [m for fid in ids for m in explain(manifest, fid) if m["id"] == fid]
        if not matches and (said := _compacted_at(run, manifest, own, rec.position)) is not None:
            matches = [{"id": own, "verdict": "compacted", "kind": ev.type, "reason": said}]
        found += [{**m, "matched": f"text of event {rec.position}"} for m in matches]
    return found


def match_line(f: dict[str, Any]) -> str:
    """One match as a line (sources, reasons and details are untrusted text: made visible)."""
    f = {k: visible(v) if isinstance(v, str) else v for k, v in f.items()}
    if f["verdict"] == "not exposed":  # a tool the request did not declare: no size, no source
        return f"NOT EXPOSED {f['id']}: {f['reason']}"
    if f["verdict"] == "compacted":  # found by its text: what stands in for its event
        return f"COMPACTED {f['id']} ({f['kind']}): {f['reason']}"
    source = f", {f['source_ref']}" if f.get("source_ref") else ""  # an exposed tool has none
    what = f"{f['id']} ({f['kind']}, {f['tokens']} tokens{source})"
    if f["verdict"] == "kept":
        flag = ", truncated" if f.get("truncated") else ""
        return f"KEPT    {what}{flag}: {f['reason']}"
    by = f" -> replaced by {f['replaced_by']}" if f["replaced_by"] else ""
    detail = f" ({f['detail']})" if f["detail"] else ""
    return f"DROPPED {what}: {f['reason']}{by}{detail}"


def _handle_why(args: argparse.Namespace) -> int:
    _checked_query(args.query)  # before the store is opened or a turn rebuilt
    if args.turn is None:
        from contextfold.cli_why_turns import why_every_turn

        return why_every_turn(args)
    given = given_config(args)  # an invalid value (--window -5) is refused whichever the turn
    with store_for(args) as store:
        run = store.run(args.run)
        # an explicit --record is that record or RecordNotFoundError, never a rebuild in its place
        read = read_turn(run, args.turn)  # with the later records' configs (nearest_config reads them)
        picked = turn_record(run, args.turn, args.record, read=read)
        preview = False
        if picked is not None:  # it is read as recorded: settings given that differ were ignored
            check_given(args.turn, picked.manifest.config, given or {})
            manifest, source = picked.manifest, "recorded"
        else:
            # the records' settings, then the log up to the turn: neither reads a manifest whole
            cfg = nearest_config(run, args.turn, given, read=read)
            with fold_bar(store, args, f"rebuilding {args.run} turn {args.turn}") as advance:
                manifest = rebuild(run, args.turn, cfg, record=False, progress=advance, records=[]).manifest
            preview = previewed(args.turn, (), run.next_turn())  # (no record: turn_record found none)
            source = ("previewed (no record: the next request)" if preview
                      else "rebuilt from the log (no record)")
        found = explain(manifest, args.query)
        if not found:  # a tool the request did not declare: the exposure decision, re-derived
            with fold_bar(store, args, f"folding {args.run} to turn {args.turn}") as advance:
                found = _not_exposed(run, manifest, args.query, advance)
        said = None if found else _not_found(run, manifest, args.query)
        by_text = (not found and said is None
                   and not position_named(args.query))
        if by_text:  # words, not a name: the fragments whose logged text holds them
            found = _by_text(run, manifest, args.query)
        missing = ("" if found else said if said is not None
                   else _nothing(manifest, args.query, text=by_text))
    if not args.reveal:  # what a source, a reason or a stand-in quotes: shown masked (redact_shown)
        found, missing = masked_value(found), masked(missing)
    if args.json:
        which = picked.as_json() if picked is not None else {"record": None, "records": 0, "rebuild": None}
        shown = WhyOutput.model_validate({"turn": args.turn, "manifest": source, **which, "query": args.query,
                                          "matches": found, "note": missing})
        _out(shown_json(json.dumps(shown.model_dump(mode="json"), ensure_ascii=False)))
        return 0 if found else 1
    which_text = f", {picked.label()}" if picked is not None and picked.count > 1 else ""
    origin = ("recorded manifest" if picked is not None
              else "the next request, previewed: the turn has no record yet" if preview
              else "manifest rebuilt from the log: the turn has no record")
    _out(f"turn {args.turn} ({origin}{which_text}, request {manifest.request_hash[:16]}):")
    if by_text and found:
        _out(f"  (no id, tool name or source matches {visible(args.query)!r}: the fragments whose logged "
             "text holds it)")
    for f in found:
        _out(f"  {match_line(f)}")
    if missing:
        _out(f"  {visible(missing)}")
        return 1
    return 0

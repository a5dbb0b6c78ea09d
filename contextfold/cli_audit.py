"""CLI commands that audit what the model saw: ``audit``, ``why``, ``usage``.

- ``audit RUN --html report.html``: the self-contained HTML report;
- ``audit RUN [--json]``: the run summary (integrity, prefix stability, tool
  schema tokens, whether retrieval crowded out history, ...);
- ``audit RUN --turn N [--json]``: exactly what the model saw at turn N, the
  request re-derived from the log and checked against the recorded hashes,
  the log's integrity and whether the builder configuration changed;
- ``why RUN --turn N FRAGMENT_OR_SOURCE [--record first|last|K]``: the reason the
  manifest records for keeping or dropping a fragment (by id, source substring or file
  path), in the turn's first record or the one picked;
- ``usage RUN --turn N --input-tokens X``: record provider-reported usage,
  which later builds calibrate their budget with.

Exit codes: 0 ok; 1 a check failed (hash mismatch, changed config, nothing
matched); 3 the log's integrity is broken; 2 our typed errors (cli.main).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from contextfold.api import Run
from contextfold.audit.data import ConfigChoice, RunAudit, audit_run, config_for_turn, unbuilt_answer
from contextfold.audit.diff import logged_as, stand_in_for
from contextfold.audit.effects import WINDOW_TURNS, describe
from contextfold.audit.report import render_report
from contextfold.audit.text import visible
from contextfold.cli import register, store_for
from contextfold.cli_build import (
    EXCLUDED_SHOWN,
    PROVIDER_CHOICES,
    RECORD_HELP,
    excluded_count,
    manifest_table,
    not_exposed_reasons,
    record_choice,
    turn_record,
)
from contextfold.cli_files import nonempty, output_file, write_output
from contextfold.cli_progress import fold_bar
from contextfold.domain.errors import IntegrityError, InvalidInputError
from contextfold.domain.events import ContextBuilt, HistoryCompacted
from contextfold.domain.manifest import BuildConfig, ContextManifest, checked_config, config_of
from contextfold.projections.builder import BuildResult, canonical_hash
from contextfold.projections.progress import Progress
from contextfold.projections.tool_names import renamed_to, tool_name_alias
from contextfold.rebuild_api import check_given, named_settings, previewed, rebuild

__all__ = ["audit_turn", "explain"]



def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--provider", choices=PROVIDER_CHOICES, default=None,
                   help="for turns without a record: request format (default: the nearest record's; a "
                        "recorded turn keeps its own: another value beside its --turn is refused)")
    p.add_argument("--window", type=int, default=None, metavar="TOKENS",
                   help="for turns without a record: window (default: the nearest record's; a recorded "
                        "turn keeps its own: another value beside its --turn is refused)")
    p.add_argument("--reserve", type=int, default=None, metavar="TOKENS",
                   help="for turns without a record: reserve (default: the nearest record's; a recorded "
                        "turn keeps its own: another value beside its --turn is refused)")


def _given_config(args: argparse.Namespace) -> dict[str, Any] | None:
    """The flags given (checked here, before any work), to replace just those fields of the
    nearest record's config; None when none is."""
    given = {name: value for name in ("provider", "window", "reserve")
             if (value := getattr(args, name)) is not None}
    if given:
        checked_config(**given)
    return given or None


# ---------------------------------------------------------------- audit --turn


def audit_turn(run: Run, turn: int, given: ConfigChoice = None, *,
               progress: Progress | None = None) -> tuple[dict[str, Any], BuildResult]:
    """Re-derive turn ``turn`` from the log and check it against its record and the log's chain
    (``progress(n)``: told of the events folded for the rebuild)."""
    report = run.verify()
    integrity = {"ok": report.ok, "events": report.events, "first_bad_position": report.first_bad_position,
                 "reason": report.reason}
    events = run.events()
    records = [r.event for r in events if isinstance(r.event, ContextBuilt) and r.event.turn == turn]
    problems: list[str] = []
    if not report.ok:
        problems.append(f"integrity: the stored event at position {report.first_bad_position} was altered "
                        f"or damaged ({report.reason}); what follows is derived from a log that does not "
                        "match its hash chain")
    # Rebuilt from the log and records read above (a long run's log is read once, not three times).
    if not records:
        cfg = config_for_turn(events, turn, given)
        result = rebuild(run, turn, cfg, record=False, progress=progress, records=[], events=events)
        derived = ("the next request as a build would make it now, previewed (the model has not answered "
                   "the turn)" if previewed(turn, records, run.next_turn()) else "the request re-derived "
                   "from the log")
        check: dict[str, Any] = {"recorded": False, "note": f"turn {turn} has no context_built record: this "
                                 f"is {derived}, with nothing recorded to check it against"}
        return {"turn": turn, "integrity": integrity, "check": check, "problems": problems,
                "ok": not problems}, result
    first = records[0]
    # with its recorded config; settings given that differ from it are refused (they were ignored)
    config = given if isinstance(given, BuildConfig) else None
    named = {} if config is not None else dict(given or {})
    result = rebuild(run, turn, config_of(config, **named), record=False, progress=progress,
                     records=records, given=named_settings(config, named), events=events)
    m = result.manifest
    recorded_cfg: dict[str, Any] = dict(first.manifest.get("config", {}))
    current_cfg = m.config.model_dump(mode="json")
    check = {"recorded": True, "records": len(records), "rebuild_of_record": first.rebuild,
             "request_hash": {"recorded": first.request_hash, "rebuilt": m.request_hash},
             "cache_key": {"recorded": first.prefix_hash, "rebuilt": m.cache_key},
             "config_hash": {"recorded": first.config_hash, "rebuilt": m.config_hash}}
    if first.config_hash != m.config_hash:
        fields = sorted(k for k in set(recorded_cfg) | set(current_cfg)
                        if recorded_cfg.get(k, "<absent>") != current_cfg.get(k, "<absent>"))
        detail = ", ".join(f"{k}: recorded {recorded_cfg.get(k, '<absent>')!r} -> now "
                           f"{current_cfg.get(k, '<absent>')!r}" for k in fields)
        if first.config_hash != canonical_hash(recorded_cfg):
            detail = (detail + "; " if detail else "") + (
                "the recorded config hash does not even match the recorded config "
                "(written by another builder version?)")
        problems.append(f"builder configuration changed: config hash recorded {first.config_hash[:16]} "
                        f"!= now {m.config_hash[:16]} ({detail or 'same fields, different hashing'}); "
                        "the rebuild cannot be byte-identical to what was sent")
    if first.request_hash != m.request_hash:
        problems.append(f"request hash mismatch: recorded {first.request_hash[:16]} != re-derived "
                        f"{m.request_hash[:16]}: the request rebuilt from the log is not what the model saw")
    if first.prefix_hash != m.cache_key:
        problems.append(f"cache key mismatch: recorded {first.prefix_hash[:16]} != re-derived "
                        f"{m.cache_key[:16]}")
    return {"turn": turn, "integrity": integrity, "check": check, "problems": problems,
            "ok": not problems}, result


def _handle_audit_turn(args: argparse.Namespace, run: Run) -> int:
    try:
        with fold_bar(run.store, args, f"auditing {args.run} turn {args.turn}") as advance:
            verdict, result = audit_turn(run, args.turn, _given_config(args), progress=advance)
    except IntegrityError as exc:
        report = run.verify()
        where = f" (first bad position {report.first_bad_position}: {report.reason})" if not report.ok else ""
        sys.stderr.write(f"INTEGRITY FAILED: run {args.run!r} cannot be re-derived: {visible(exc)}{where}\n")
        return 3
    if args.json:
        data = {**verdict, "manifest": result.manifest.model_dump(mode="json")}
        if args.content:
            data["request"] = result.request
        _out(json.dumps(data, ensure_ascii=False))
    else:
        i = verdict["integrity"]
        _out(f"integrity: ok ({i['events']} events, hash chain intact)" if i["ok"] else
             f"integrity: FAILED at position {i['first_bad_position']}: {i['reason']}")
        c = verdict["check"]
        if c["recorded"]:
            req, conf = c["request_hash"], c["config_hash"]
            same = req["recorded"] == req["rebuilt"]
            _out(f"request: re-derived {req['rebuilt'][:16]} "
                 f"{'matches' if same else 'DOES NOT MATCH'} the recorded {req['recorded'][:16]}"
                 + (f" (the first of the turn's {c['records']} records: diff/why --record pick "
                    "another)" if c["records"] > 1 else ""))
            _out(f"builder config: {'unchanged' if conf['recorded'] == conf['rebuilt'] else 'CHANGED'}"
                 f" ({conf['rebuilt'][:16]})")
        else:
            _out(c["note"])
        for p in verdict["problems"]:
            sys.stderr.write(f"PROBLEM: {visible(p)}\n")
        _out("")
        _out(manifest_table(result.manifest, getattr(args, "excluded", EXCLUDED_SHOWN)))
        if args.content:
            _out(f"\nrequest body ({result.manifest.provider}) as the model saw it:")
            _out(json.dumps(result.request, indent=2, ensure_ascii=False))
        else:
            _out("\n(content not shown: hashes, refs, sizes and reasons only; --content prints the "
                 "request body)")
    if not verdict["integrity"]["ok"]:
        return 3
    return 0 if verdict["ok"] else 1


# ---------------------------------------------------------------- audit


def _configure_audit(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id")
    p.add_argument("--turn", type=int, default=None, metavar="N",
                   help="what exactly the model saw at turn N, re-derived and checked against the record "
                        "(default: a summary of every turn)")
    p.add_argument("--html", default=None, metavar="PATH", type=nonempty("path"),
                   help="write the self-contained HTML report here")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--content", action="store_true",
                   help="with --turn: also print the request body (the content the model saw); "
                        "by default an audit shows hashes, refs, sizes and reasons only")
    p.add_argument("--excluded", type=excluded_count, default=argparse.SUPPRESS, metavar="N|all",
                   help=f"with --turn: list the newest N excluded fragments of each reason (default "
                        f"{EXCLUDED_SHOWN}; 'all' lists every one), as manifest does")
    _config_args(p)


EFFECTS_SHOWN = 5


def _unbuilt_text(a: RunAudit) -> list[str]:
    """The turns without a record that their config cannot build, with the first one's error."""
    return [f"not rebuilt: {unbuilt_answer(a.unbuilt)}"] if a.unbuilt else []


def _effects_text(a: RunAudit) -> list[str]:
    """The newest compactions' before/after lines (``--json`` lists every one)."""
    effects = a.compaction_effects
    if not effects:
        return []
    more = len(effects) - EFFECTS_SHOWN
    return [f"around compactions ({WINDOW_TURNS} turns each side: tokens per request, calls repeated "
            "from earlier in the run, failed results):"] + [
        f"  {describe(e)}" for e in effects[-EFFECTS_SHOWN:]] + (
        [f"  (+{more} older: audit --json lists every one)"] if more > 0 else [])


def _summary_text(a: RunAudit) -> str:
    s = a.summary
    i = a.integrity
    lines = [
        f"run {a.run_id}: {a.events} events, {s.turns} turns ({s.recorded_turns} recorded, "
        f"{s.rebuilt_turns} rebuilt from the log)",
        "integrity: " + (f"ok ({i.events} events, hash chain intact)" if i.ok else
                         f"FAILED at position {i.first_bad_position}: {i.reason}"),
        f"prefix stability: {s.prefix_reused} of {max(0, s.turns - 1)} turns re-used the previous prefix"
        + (f" (changed at {', '.join(map(str, s.prefix_changed_turns[:20]))})"
           if s.prefix_changed_turns else ""),
        f"tool schemas: {s.tool_schema_answer}",
        f"retrieval vs history: {s.retrieval_answer}",
        *_unbuilt_text(a),
        f"protocol repairs: {s.repairs}; compactions: {s.compactions}",
        *_effects_text(a),
        "builder config: " + ("unchanged" if not s.config_changed_turns else
                              f"changed at turns {', '.join(map(str, s.config_changed_turns))}"),
        f"usage: {s.usage_turns} turns observed; latest correction "
        f"{s.latest_correction if s.latest_correction is not None else 'none yet'}",
        "largest fragments: " + ", ".join(f"{f['id']} ({f['kind']}, {f['tokens']})"
                                          for f in s.largest_fragments[:5]),
    ]
    return "\n".join(visible(line) for line in lines)


def _handle_audit(args: argparse.Namespace) -> int:
    if args.html and args.turn is not None:  # the report covers every turn: --turn would drop it
        raise InvalidInputError("--html writes the report of the whole run; it does not combine "
                                "with --turn (each turn is a section of the report)")
    # The summary and the report show neither (an audit without --turn printed it, flags ignored).
    given = [f for f, on in (("--content", args.content), ("--excluded", hasattr(args, "excluded"))) if on]
    if args.turn is None and given:
        raise InvalidInputError(f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} to one "
                                "turn: add --turn N (the run's summary and its HTML report hold hashes, "
                                "refs, sizes and reasons, never content or excluded lists)")
    html = output_file(args.html) if args.html else None
    with store_for(args) as store:
        run = store.run(args.run)
        if args.turn is not None:
            return _handle_audit_turn(args, run)
        try:
            with fold_bar(store, args, f"auditing {args.run}") as advance:
                audit = audit_run(run, config=_given_config(args), progress=advance)
        except IntegrityError as exc:
            sys.stderr.write(f"INTEGRITY FAILED: run {args.run!r} cannot be read back: {visible(exc)}\n")
            return 3
    if html is not None:
        write_output(html, render_report(audit))
        _out(f"wrote {args.html}: {audit.summary.turns} turns, integrity "
             f"{'ok' if audit.integrity.ok else 'BROKEN'}")
    if args.json:
        _out(json.dumps({"run_id": audit.run_id, "events": audit.events,
                         "integrity": audit.integrity.model_dump(mode="json"),
                         "summary": audit.summary.model_dump(mode="json"),
                         "compaction_effects": [e.model_dump(mode="json") for e in audit.compaction_effects],
                         "unbuilt": [u.model_dump(mode="json") for u in audit.unbuilt],
                         "turns": [{"turn": t.turn, "source": t.source,
                                    "selected": t.manifest.selected_tokens,
                                    "budget": t.manifest.budget_tokens, "cache_key": t.manifest.cache_key,
                                    "prefix_changed": t.prefix_changed, "config_changed": t.config_changed,
                                    "repairs": [r.model_dump(mode="json") for r in t.repairs]
                                    + list(t.build_notes),
                                    "usage": t.usage.model_dump(mode="json") if t.usage else None}
                                   for t in audit.turns]}, ensure_ascii=False))
    elif not args.html:
        _out(_summary_text(audit))
    return 0 if audit.integrity.ok else 3


register("audit", "what the model saw: run summary, --turn N checked against the log, or --html report",
         _configure_audit, _handle_audit)


# ---------------------------------------------------------------- why


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
_FRAGMENT_ID = re.compile(r"e(\d+)(?:\.c\d+)?")
"""A query naming a fragment by its id: ``e{position}``, or ``e{position}.c{n}`` (a stub among them)."""


def _sourced(query: str, source_ref: str) -> bool:
    """Whether a fragment from ``source_ref`` is one ``query`` asks about: a ref ending in a
    position (``event://r1/4``) names that one (as a substring it also matched ``event://r1/41``);
    anything else, a path or part of one, matches as a substring."""
    if _WHOLE_REF.fullmatch(query):
        return source_ref == query or source_ref.startswith(query + "#")
    return query in source_ref


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
    sel = exact or ([] if exact_x or tools else [f for f in manifest.fragments
                                                 if _sourced(query, f.source_ref)])
    exc = exact_x or ([] if exact or tools else [e for e in manifest.excluded_items
                                                 if _sourced(query, e.source_ref)])
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


def _configure_why(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id")
    p.add_argument("--turn", type=int, required=True, metavar="N", help="the turn to explain")
    p.add_argument("query", metavar="FRAGMENT_OR_SOURCE",
                   help="fragment id (e12), tool name, or a source_ref / file path substring")
    p.add_argument("--record", type=record_choice, default=None, metavar="WHICH", help=RECORD_HELP)
    p.add_argument("--json", action="store_true", help="print JSON")
    _config_args(p)


def _not_exposed(run: Run, manifest: ContextManifest, query: str, progress: Progress) -> list[dict[str, Any]]:
    """``query`` as a tool the build did not expose, with the reason (see ``not_exposed_reasons``)."""
    reason = not_exposed_reasons(run, manifest, [query], progress)[query]
    return [] if reason is None else [{"id": query, "verdict": "not exposed", "kind": "tool_spec",
                                       "reason": reason}]


def _not_found(run: Run, manifest: ContextManifest, query: str) -> str:
    m = _FRAGMENT_ID.fullmatch(query) or _EVENT_REF.fullmatch(query)
    if m:
        pos = int(m.group(1))
        if pos > (version := run.version) or pos < 1:  # not "logged after the build": never logged
            return (f"{query}: run {run.run_id!r} has no position {pos} (its log holds positions "
                    f"1..{version}); nothing in turn {manifest.turn}'s manifest matches it")
        stub = m.re is _FRAGMENT_ID and "." in query
        if stub and pos <= manifest.log_version:  # a stub: the event it stood for
            entry = run.state().entries.get(query)
            if entry is None:  # no such fragment was ever folded: nothing to tell of it
                return _nothing(manifest, query)
            pos = int(logged_as(query, entry.source_ref)[1:])
        if pos > manifest.log_version:
            return (f"{query} was logged at position {pos}, after turn {manifest.turn}'s build "
                    f"(log position {manifest.log_version}): it did not exist yet")
        shown = stand_in_for(manifest, f"e{pos}")  # what the request holds in its place, as diff says
        if shown is not None:
            return f"{query} was compacted: {shown[1]}"
        covering = [(rec.position, ev) for rec in run.events(upto=manifest.log_version)
                    if isinstance(ev := rec.event, HistoryCompacted)
                    and ev.covers_from <= pos <= ev.covers_to]
        if covering:  # none of their stand-ins is in the manifest: name the newest
            at, ev = covering[-1]
            return (f"{query} is covered by the compaction at position {at} (covers "
                    f"{ev.covers_from}-{ev.covers_to}), whose stand-in the request does not hold")
    return _nothing(manifest, query)


def _nothing(manifest: ContextManifest, query: str) -> str:
    return (f"nothing in turn {manifest.turn}'s manifest matches {query!r} (by id, tool name or source); "
            "it was not part of the projection at that turn")


def _handle_why(args: argparse.Namespace) -> int:
    _checked_query(args.query)  # before the store is opened or a turn rebuilt
    given = _given_config(args)  # an invalid value (--window -5) is refused whichever the turn
    with store_for(args) as store:
        run = store.run(args.run)
        # an explicit --record is that record or RecordNotFoundError, never a rebuild in its place
        picked = turn_record(run, args.turn, args.record)
        preview = False
        if picked is not None:  # it is read as recorded: settings given that differ were ignored
            check_given(args.turn, picked.manifest.config, given or {})
            manifest, source = picked.manifest, "recorded"
        else:
            events = run.events()  # read once: for the config and the rebuild
            cfg = config_for_turn(events, args.turn, given)
            with fold_bar(store, args, f"rebuilding {args.run} turn {args.turn}") as advance:
                manifest = rebuild(run, args.turn, cfg, record=False, progress=advance, records=[],
                                   events=events).manifest
            preview = previewed(args.turn, (), run.next_turn())  # (no record: turn_record found none)
            source = ("previewed (no record: the next request)" if preview
                      else "rebuilt from the log (no record)")
        found = explain(manifest, args.query)
        if not found:  # a tool the request did not declare: the exposure decision, re-derived
            with fold_bar(store, args, f"folding {args.run} to turn {args.turn}") as advance:
                found = _not_exposed(run, manifest, args.query, advance)
        missing = "" if found else _not_found(run, manifest, args.query)
    if args.json:
        which = picked.as_json() if picked is not None else {"record": None, "records": 0, "rebuild": None}
        _out(json.dumps({"turn": args.turn, "manifest": source, **which, "query": args.query,
                         "matches": found, "note": missing}, ensure_ascii=False))
        return 0 if found else 1
    which_text = f", {picked.label()}" if picked is not None and picked.count > 1 else ""
    origin = ("recorded manifest" if picked is not None
              else "the next request, previewed: the turn has no record yet" if preview
              else "manifest rebuilt from the log: the turn has no record")
    _out(f"turn {args.turn} ({origin}{which_text}, request {manifest.request_hash[:16]}):")
    for f in found:  # sources, reasons and details are untrusted text: made visible, one line each
        f = {k: visible(v) if isinstance(v, str) else v for k, v in f.items()}
        if f["verdict"] == "not exposed":  # a tool the request did not declare: no size, no source
            _out(f"  NOT EXPOSED {f['id']}: {f['reason']}")
            continue
        source = f", {f['source_ref']}" if f.get("source_ref") else ""  # an exposed tool has none
        what = f"{f['id']} ({f['kind']}, {f['tokens']} tokens{source})"
        if f["verdict"] == "kept":
            flag = ", truncated" if f.get("truncated") else ""
            _out(f"  KEPT    {what}{flag}: {f['reason']}")
        else:
            by = f" -> replaced by {f['replaced_by']}" if f["replaced_by"] else ""
            detail = f" ({f['detail']})" if f["detail"] else ""
            _out(f"  DROPPED {what}: {f['reason']}{by}{detail}")
    if missing:
        _out(f"  {visible(missing)}")
        return 1
    return 0


register("why", "why a fragment, file, source or tool was kept or dropped at turn N (the manifest's "
         "reason; for a tool not exposed, the decision re-derived from the log)",
         _configure_why, _handle_why)


# ---------------------------------------------------------------- usage


def _configure_usage(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id")
    p.add_argument("--turn", type=int, required=True, metavar="N",
                   help="the turn whose request the provider counted")
    p.add_argument("--input-tokens", type=int, required=True, metavar="TOKENS",
                   help="prompt tokens as the provider counted them, cached ones included")
    p.add_argument("--cached-tokens", type=int, default=0, metavar="TOKENS",
                   help="of which served from the provider's cache (default: 0)")
    p.add_argument("--output-tokens", type=int, default=0, metavar="TOKENS",
                   help="completion tokens (default: 0)")
    p.add_argument("--model", default=None, type=nonempty("model name"), help="model the provider reported")


def _handle_usage(args: argparse.Namespace) -> int:
    with store_for(args) as store:
        run = store.run(args.run)
        rec = run.observe_usage(args.turn, args.input_tokens, cached_tokens=args.cached_tokens,
                                output_tokens=args.output_tokens, model=args.model)
        records = run.records(args.turn)
    line = f"recorded usage_observed at position {rec.position}: turn {args.turn} input {args.input_tokens}"
    if records:
        est = int(records[-1].manifest.get("selected_tokens", 0))
        line += f" (estimate {est}, observed/estimated {args.input_tokens / max(1, est):.3f})"
    else:
        line += " (turn has no build record: it will not calibrate later builds)"
    _out(line)
    return 0


register("usage", "record provider-reported token usage of a turn (calibrates later budgets)",
         _configure_usage, _handle_usage)

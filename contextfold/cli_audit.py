"""CLI command that audits what the model saw: ``audit`` (``why``: ``cli_why``; ``usage``: ``cli_usage``).

- ``audit RUN --html report.html``: the self-contained HTML report;
- ``audit RUN [--json]``: the run summary (integrity, prefix stability, tool
  schema tokens, whether retrieval crowded out history, ...);
- ``audit RUN --turn N [--json]``: exactly what the model saw at turn N, the
  request re-derived from the log and checked against the recorded hashes,
  the log's integrity and whether the builder configuration changed;
- ``why``: in :mod:`contextfold.cli_why`;
- ``usage``: in :mod:`contextfold.cli_usage`.

Exit codes: 0 ok; 1 a check failed (hash mismatch, changed config); 2 ``--turn N`` of a turn
with no record (shown, but nothing to check it against: a gate must not pass it, as ``replay
--verify`` does not) and our typed errors (cli.main); 3 the log's integrity is broken.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from contextfold.api import Run
from contextfold.audit.data import ConfigChoice, RunAudit, audit_run, unbuilt_answer
from contextfold.audit.effects import WINDOW_TURNS, describe
from contextfold.audit.outputs import AuditOutput, AuditTurnLine, AuditTurnOutput
from contextfold.audit.report import prefix_stability_text, render_report
from contextfold.audit.text import visible
from contextfold.cli import store_for
from contextfold.cli_args import EXCLUDED_SHOWN, config_args
from contextfold.cli_build import manifest_table
from contextfold.cli_files import output_file, shown_json, write_output
from contextfold.cli_progress import fold_bar
from contextfold.domain.errors import IntegrityError, InvalidInputError, RecordNotFoundError
from contextfold.domain.manifest import BuildConfig, checked_config, config_of
from contextfold.projections.builder import BuildResult, canonical_hash
from contextfold.projections.progress import Progress
from contextfold.rebuild_api import (
    RecordChoice,
    named_settings,
    nearest_config,
    previewed,
    read_turn,
    rebuild,
    record_index,
    turn_records,
)

__all__ = ["audit_turn", "config_args", "given_config"]


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def given_config(args: argparse.Namespace) -> dict[str, Any] | None:
    """The flags given (checked here, before any work), to replace just those fields of the
    nearest record's config; None when none is."""
    given = {name: value for name in ("provider", "window", "reserve")
             if (value := getattr(args, name)) is not None}
    if given:
        checked_config(**given)
    return given or None


# ---------------------------------------------------------------- audit --turn


def audit_turn(run: Run, turn: int, given: ConfigChoice = None, *, record: RecordChoice = "first",
               progress: Progress | None = None) -> tuple[dict[str, Any], BuildResult]:
    """Re-derive turn ``turn`` from the log and check it against its record ``record`` (the first by
    default; the last is the request sent after a refused one was built again smaller) and the
    log's chain (``progress(n)``: told of the events folded for the rebuild)."""
    record_index(record, 1)  # a choice that names no record is refused before any work
    report = run.verify()
    integrity = {"ok": report.ok, "events": report.events, "first_bad_position": report.first_bad_position,
                 "reason": report.reason, "head": report.head}
    # The turn's records alone: the run's log read whole held every record's manifest (the last
    # turn of an 800-turn run: 970 MB). A recorded turn's rebuild reads the log it folds itself.
    # Read with the later records' configs, which a turn without a record is rebuilt with.
    read = read_turn(run, turn)
    records = turn_records(read)
    index = record_index(record, len(records))
    if record != "first" and not 1 <= index <= len(records):  # never another record in its place
        raise RecordNotFoundError(run.run_id, turn, str(record), len(records))
    problems: list[str] = []
    if not report.ok:
        problems.append(f"integrity: the stored event at position {report.first_bad_position} was altered "
                        f"or damaged ({report.reason}); what follows is derived from a log that does not "
                        "match its hash chain")
    if not records:  # the nearest record's config, then the fold: neither reads a manifest whole
        result = rebuild(run, turn, nearest_config(run, turn, given, read=read), record=False,
                         progress=progress, records=[])
        derived = ("the next request as a build would make it now, previewed (the model has not answered "
                   "the turn)" if previewed(turn, records, run.next_turn()) else "the request re-derived "
                   "from the log")
        check: dict[str, Any] = {"recorded": False, "note": f"turn {turn} has no context_built record: this "
                                 f"is {derived}, with nothing recorded to check it against"}
        # not ok: nothing was checked, and a gate reading ``ok`` (or the exit code, 2) must not
        # take a turn no record vouches for as one that matched its record
        return {"turn": turn, "integrity": integrity, "check": check, "problems": problems,
                "ok": False}, result
    first = records[index - 1]  # the record checked (named so: most turns hold one)
    # with its recorded config; settings given that differ from it are refused (they were ignored)
    config = given if isinstance(given, BuildConfig) else None
    named = {} if config is not None else dict(given or {})
    result = rebuild(run, turn, config_of(config, **named), record=False, progress=progress,
                     records=[first], given=named_settings(config, named))
    m = result.manifest
    recorded_cfg: dict[str, Any] = dict(first.manifest.get("config", {}))
    current_cfg = m.config.model_dump(mode="json")
    check = {"recorded": True, "records": len(records), "record": index, "rebuild_of_record": first.rebuild,
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


def _integrity_text(ok: bool, events: int, head: str | None, bad: int | None, reason: str) -> str:
    """The integrity line of the summary and of ``--turn``, the head whole: it is compared with
    the one a sender handed over (``Integrity.head``)."""
    if not ok:
        return f"integrity: FAILED at position {bad}: {visible(reason)}"
    return f"integrity: ok ({events} events, hash chain intact" + (f"; head {head})" if head else ")")


def _which_record(index: int) -> str:
    return "the first" if index == 1 else f"record {index}"


def _handle_audit_turn(args: argparse.Namespace, run: Run) -> int:
    try:
        with fold_bar(run.store, args, f"auditing {args.run} turn {args.turn}") as advance:
            verdict, result = audit_turn(run, args.turn, given_config(args), record=args.record or "first",
                                         progress=advance)
    except IntegrityError as exc:
        report = run.verify()
        where = f" (first bad position {report.first_bad_position}: {report.reason})" if not report.ok else ""
        sys.stderr.write(f"INTEGRITY FAILED: run {args.run!r} cannot be re-derived: {visible(exc)}{where}\n")
        return 3
    if args.json:
        shown = AuditTurnOutput.model_validate({**verdict, "manifest": result.manifest,
                                                "request": result.request if args.content else None})
        _out(shown_json(json.dumps(shown.model_dump(mode="json"), ensure_ascii=False)))
    else:
        i = verdict["integrity"]
        _out(_integrity_text(i["ok"], i["events"], i["head"], i["first_bad_position"], i["reason"]))
        c = verdict["check"]
        if c["recorded"]:
            req, conf = c["request_hash"], c["config_hash"]
            same = req["recorded"] == req["rebuilt"]
            _out(f"request: re-derived {req['rebuilt'][:16]} "
                 f"{'matches' if same else 'DOES NOT MATCH'} the recorded {req['recorded'][:16]}"
                 + (f" ({_which_record(c['record'])} of the turn's {c['records']} records: --record "
                    "picks another)" if c["records"] > 1 else ""))
            same = "unchanged since the record" if conf["recorded"] == conf["rebuilt"] else "CHANGED"
            _out(f"builder config: {same} ({conf['rebuilt'][:16]})")
        else:
            _out(c["note"])
        for p in verdict["problems"]:
            sys.stderr.write(f"PROBLEM: {visible(p)}\n")
        _out("")
        _out(manifest_table(result.manifest, getattr(args, "excluded", EXCLUDED_SHOWN)))
        if args.content:
            _out(f"\nrequest body ({result.manifest.provider}) as the model saw it:")
            _out(shown_json(json.dumps(result.request, indent=2, ensure_ascii=False)))
        else:
            _out("\n(content not shown: hashes, refs, sizes and reasons only; --content prints the "
                 "request body)")
    if not verdict["integrity"]["ok"]:
        return 3
    if not verdict["check"]["recorded"]:  # shown, but unchecked: exit 2, as replay --verify's
        sys.stderr.write(f"NOT CHECKED: run {args.run!r} turn {args.turn} has no context_built record to "
                         "check the re-derived request against (exit 2, as replay --verify)\n")
        return 2
    return 0 if verdict["ok"] else 1


# ---------------------------------------------------------------- audit


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


CONFIG_TURNS_SHOWN = 10


def _config_text(a: RunAudit) -> str:
    """The turns whose settings differ from the turn before's, each with the settings' names (a
    hand-off's provider, a new window), and the diff that shows how; ``audit --turn N``'s
    "builder config" is another check (its record against this builder)."""
    changed = [t for t in a.turns if t.config_changed]
    if not changed:
        return "builder config: unchanged from turn to turn"
    names = [", ".join((t.diff or {}).get("config_changed", {})) or "its hashing" for t in changed]
    first = changed[0].turn
    before = max((t.turn for t in a.turns if t.turn < first), default=first - 1)
    how = f"diff {a.run_id} {before} {first} shows how"
    if len(changed) == 1:
        return f"builder config: changed from the turn before at turn {first} ({names[0]}; {how})"
    shown = ", ".join(f"{t.turn} ({n})" for t, n in zip(changed[:CONFIG_TURNS_SHOWN], names, strict=False))
    more = f" and {len(changed) - CONFIG_TURNS_SHOWN} more" if len(changed) > CONFIG_TURNS_SHOWN else ""
    return f"builder config: changed from the turn before at turns {shown}{more}; {how}"


def _summary_text(a: RunAudit) -> str:
    s = a.summary
    i = a.integrity
    lines = [
        f"run {a.run_id}: {a.events} events, {s.turns} turns ({s.recorded_turns} recorded, "
        f"{s.rebuilt_turns} rebuilt from the log)",
        _integrity_text(i.ok, i.events, i.head, i.first_bad_position, i.reason),
        f"prefix stability: {s.prefix_reused} of {s.prefix_compared} turns re-used the previous prefix "
        + prefix_stability_text(s.prefix_pairs)
        + (f" (changed at {', '.join(map(str, s.prefix_changed_turns[:20]))})"
           if s.prefix_changed_turns else ""),
        f"tool schemas: {s.tool_schema_answer}",
        f"retrieval vs history: {s.retrieval_answer}",
        *_unbuilt_text(a),
        f"protocol repairs: {s.repairs}; compactions: {s.compactions}",
        *_effects_text(a),
        _config_text(a),
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
    given = [f for f, on in (("--content", args.content), ("--excluded", hasattr(args, "excluded")),
                             ("--record", args.record is not None)) if on]
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
                audit = audit_run(run, config=given_config(args), progress=advance)
        except IntegrityError as exc:
            sys.stderr.write(f"INTEGRITY FAILED: run {args.run!r} cannot be read back: {visible(exc)}\n")
            return 3
    if html is not None:
        write_output(html, render_report(audit))
        wrote = (f"wrote {args.html}: {audit.summary.turns} turns, integrity "
                 f"{'ok' if audit.integrity.ok else 'BROKEN'}\n")
        # With --json, stdout is the JSON alone (data for a program): the note goes to stderr.
        (sys.stderr if args.json else sys.stdout).write(wrote)
    if args.json:
        shown = AuditOutput(
            run_id=audit.run_id, events=audit.events, integrity=audit.integrity, summary=audit.summary,
            compaction_effects=audit.compaction_effects, unbuilt=audit.unbuilt,
            turns=tuple(AuditTurnLine(turn=t.turn, source=t.source, selected=t.manifest.selected_tokens,
                                      budget=t.manifest.budget_tokens, cache_key=t.manifest.cache_key,
                                      prefix_changed=t.prefix_changed, config_changed=t.config_changed,
                                      repairs=(*t.repairs, *t.build_notes), usage=t.usage)
                        for t in audit.turns))
        _out(shown_json(json.dumps(shown.model_dump(mode="json"), ensure_ascii=False)))
    elif not args.html:
        _out(_summary_text(audit))
    return 0 if audit.integrity.ok else 3

"""CLI ``why RUN QUERY`` without ``--turn``: what every recorded turn did with the fragment, call,
tool or source ``QUERY`` names, turns with the same answer as one range.

Why: an incident starts from a call or a source ("the model ran DROP TABLE after reading c1's
result: which requests held it, whole, cut, dropped or masked?"), and ``why`` answered for one
turn at a time: the user ran it once per turn and lined the answers up by hand, or read every
record's manifest JSON. Each turn's first record is read (the one ``why --turn N`` reads by
default), its lines validated once and shared with the record before (``audit.records``); ids,
tool names and sources are matched, as ``why --turn N`` matches them first. Words are not looked
for in the log's text here (once per turn it would read the log once per turn): ``why --turn N
WORDS`` does that for one turn.

Exit codes: 0 some turn matched; 1 none did; 2 our typed errors (cli.main).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from contextfold.api import Run
from contextfold.audit.diff import stand_in_for
from contextfold.audit.outputs import WhyAcrossTurnsOutput
from contextfold.audit.records import read_records
from contextfold.audit.text import visible
from contextfold.cli import store_for
from contextfold.cli_files import shown_json
from contextfold.cli_why import call_positions, explain, match_line, position_named
from contextfold.domain.errors import InvalidInputError
from contextfold.domain.manifest import ContextManifest
from contextfold.projections.redact_shown import masked_value

__all__ = ["why_every_turn"]


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _absent(run: Run, manifest: ContextManifest, query: str, logged: list[int]) -> str:
    """Why nothing in ``manifest`` matches ``query``, as far as the manifest says: not logged yet
    at its build, a compaction's stand-in in its place, or just not in it. ``logged``: the
    positions ``query`` names (a fragment id's or event ref's, a call's answers and response)."""
    if logged and min(logged) > manifest.log_version:
        return f"not logged yet (logged at position {min(logged)}, after the turn's build)"
    for pos in logged:
        if pos <= manifest.log_version and (shown := stand_in_for(manifest, f"e{pos}")) is not None:
            return f"compacted: {shown[1]}"
    return "not in the manifest"


def _positions(run: Run, manifests: dict[int, ContextManifest], query: str) -> list[int]:
    """The log positions ``query`` names: a fragment id's or event ref's event, or a call's answers
    and its response, as of the newest record (a call id re-used later names the latest call)."""
    m = position_named(query)
    if m is not None:
        return [int(m.group(1))]
    return call_positions(run, manifests[max(manifests)], query) if manifests else []


def _spans(run: Run, manifests: dict[int, ContextManifest], query: str) -> list[dict[str, Any]]:
    """Consecutive turns with the same matches (or the same reason for none), oldest first."""
    logged = _positions(run, manifests, query)
    spans: list[dict[str, Any]] = []
    for turn in sorted(manifests):
        manifest = manifests[turn]
        matches = explain(manifest, query)
        note = "" if matches else _absent(run, manifest, query, logged)
        same = spans and spans[-1]["to"] == turn - 1 and spans[-1]["matches"] == matches \
            and spans[-1]["note"] == note
        if same:
            spans[-1]["to"] = turn
        else:
            spans.append({"from": turn, "to": turn, "matches": matches, "note": note})
    return spans


def why_every_turn(args: argparse.Namespace) -> int:
    """``why RUN QUERY``: each recorded turn's answer (see the module docstring)."""
    given = [flag for flag, value in (("--record", args.record), ("--provider", args.provider),
                                      ("--window", args.window), ("--reserve", args.reserve))
             if value is not None]
    if given:  # they pick or rebuild one turn's manifest: every turn is read as first recorded
        raise InvalidInputError(f"{', '.join(given)} {'apply' if len(given) > 1 else 'applies'} to one turn: "
                                "add --turn N (without it, why reads each recorded turn's first record)")
    with store_for(args) as store:
        run = store.run(args.run)
        _, recorded = read_records(run.store.events.iter_events(run.run_id), slim=True)
        manifests = recorded.first
        spans = _spans(run, manifests, args.query)
        if not args.reveal:  # what a source, a reason or a stand-in quotes: shown masked (redact_shown)
            spans = masked_value(spans)
        unrecorded = run.next_turn() - 1 - len(manifests)  # answered turns no build recorded
    matched = any(span["matches"] for span in spans)
    if args.json:
        shown = WhyAcrossTurnsOutput.model_validate({"query": args.query, "turns": len(manifests),
                                                     "unrecorded_turns": max(unrecorded, 0), "spans": spans})
        _out(shown_json(json.dumps(shown.model_dump(mode="json"), ensure_ascii=False)))
        return 0 if matched else 1
    more = (f"; {unrecorded} answered turn(s) have no record: why RUN --turn N QUERY rebuilds one"
            if unrecorded > 0 else "")
    _out(f"{visible(args.query)} across the {len(manifests)} recorded turns of run {args.run!r} (each turn's "
         f"first record; why RUN --turn N QUERY for one in full{more}):")
    for span in spans:
        turns = (f"turn {span['from']}" if span["from"] == span["to"]
                 else f"turns {span['from']}-{span['to']}")
        lines = [match_line(f) for f in span["matches"]] or [visible(span["note"])]
        _out(f"  {turns:<13} {lines[0]}")
        for line in lines[1:]:
            _out(f"  {'':<13} {line}")
    if not matched:
        _out(f"  no recorded turn's manifest matches {visible(args.query)!r} by id, tool name or source "
             "(words: why RUN --turn N WORDS looks for them in the log's text)")
        return 1
    return 0

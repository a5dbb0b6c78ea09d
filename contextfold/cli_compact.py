"""CLI command for compaction: ``compact`` (its read-back, ``show``: :mod:`contextfold.cli_show`).

Imported when its command runs (registered in :mod:`contextfold.cli`, flags in ``cli_args``).
``compact`` appends ``history_compacted`` events (never removes anything from
the log); ``--dry-run`` only prints what it would append.
"""

from __future__ import annotations

import argparse
import json
import sys

from contextfold.audit.text import visible
from contextfold.cli import store_for
from contextfold.cli_files import shown_json
from contextfold.cli_progress import fold_bar
from contextfold.compaction_api import CompactionReport, compact
from contextfold.domain.command_outputs import CompactOutput

__all__ = ["report_lines"]


def report_lines(report: CompactionReport) -> list[str]:
    """Human lines for a report: one per event, then the token totals."""
    verb = "would append" if report.dry_run else "appended"
    lines = []
    for i, event in enumerate(report.events):
        at = f" at position {report.positions[i]}" if i < len(report.positions) else ""
        what = (f"{len(event.summary.tool_calls_and_results)} results masked" if event.strategy == "mask"
                else f"summary by {event.summarizer}")
        lines.append(f"{verb} {event.strategy} covering events {event.covers_from}-"
                     f"{event.covers_to}{at}: {what}")
    if not report.events:
        lines.append("nothing to compact: no legal cut saves tokens")
    for repair in report.recovery:  # the call id is the model's or a trace's: shown escaped
        kind, _, call_id = repair.partition(":")
        lines.append(f"{verb} {kind} for call {visible(call_id)}, which the compaction covers")
    lines.append(f"tokens replaced {report.replaced_tokens} -> stand-ins {report.stand_in_tokens} "
                 f"(saved {report.saved_tokens})")
    if report.pressure_before is not None:
        lines.append(f"budget pressure {report.pressure_before} -> {report.pressure_after}")
    return lines


def _handle_compact(args: argparse.Namespace) -> int:
    with store_for(args) as store, fold_bar(store, args, f"compacting {args.run}") as advance:
        report = compact(store.run(args.run), args.strategy, window=args.window, reserve=args.reserve,
                         keep_recent=args.keep_recent, dry_run=args.dry_run, progress=advance)
    if args.json:
        shown = CompactOutput(dry_run=report.dry_run, positions=tuple(report.positions),
                              replaced_tokens=report.replaced_tokens, stand_in_tokens=report.stand_in_tokens,
                              recovery=tuple(report.recovery), events=tuple(report.events))
        sys.stdout.write(shown_json(json.dumps(shown.model_dump(mode="json"), ensure_ascii=False, indent=2))
                         + "\n")
    else:
        sys.stdout.write("\n".join(report_lines(report)) + "\n")
    return 0

"""CLI commands for compaction and read-back: ``compact`` and ``show``.

Imported when one of its commands runs (registered in :mod:`contextfold.cli`, flags in ``cli_args``).
``compact`` appends ``history_compacted`` events (never removes anything from
the log); ``--dry-run`` only prints what it would append. ``show`` prints the
raw content behind a ref that a mask stub or a summary cites.
"""

from __future__ import annotations

import argparse
import json
import sys

from contextfold.audit.text import visible, visible_text
from contextfold.cli import store_for
from contextfold.cli_files import output_file, shown_json, stdout_is_terminal, write_output_bytes
from contextfold.cli_progress import fold_bar
from contextfold.compaction_api import CompactionReport, compact
from contextfold.show_refs import (
    artifact_bytes,
    artifact_media_type,
    artifact_summary,
    artifact_text,
    ref_run,
    show,
)

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
        sys.stdout.write(shown_json(json.dumps({
            "dry_run": report.dry_run, "positions": list(report.positions),
            "replaced_tokens": report.replaced_tokens, "stand_in_tokens": report.stand_in_tokens,
            "recovery": list(report.recovery),
            "events": [e.model_dump(mode="json") for e in report.events]},
            ensure_ascii=False, indent=2)) + "\n")
    else:
        sys.stdout.write("\n".join(report_lines(report)) + "\n")
    return 0


def _handle_show(args: argparse.Namespace) -> int:
    """The content as stored when piped or redirected (a script's, a file's: ``show artifact:H >
    shot.png`` writes the image); on a terminal, its control characters made visible (newlines
    and tabs kept), and an artifact that is not text (an image, a video) one line naming it
    (``show_refs.artifact_summary``): a tool's output is untrusted, and its escapes set the
    terminal's title, cleared its screen or hid what followed, where every other command shows
    them as ``\\x1b``; a video's bytes would be megabytes of them. ``--out FILE`` writes what the
    ref holds to FILE, an artifact's bytes as stored, wherever stdout goes."""
    ref = args.ref
    terminal = stdout_is_terminal()
    target = output_file(args.out) if args.out else None
    with store_for(args) as store:
        run_id = args.run if args.run is not None else ref_run(ref, store)
        if run_id is None or ref.strip().startswith("artifact:"):  # an artifact is the store's
            data = artifact_bytes(store, ref)
            media_type = artifact_media_type(store, ref)
            text = artifact_text(media_type, data)
            if target is not None or (text is None and not terminal):  # its bytes as stored
                if target is not None:
                    write_output_bytes(target, data)
                else:
                    sys.stdout.flush()
                    sys.stdout.buffer.write(data)
                return 0
            if text is None:
                text = artifact_summary(ref, media_type, data)
        else:
            text = show(store.run(run_id), ref)
    if target is not None:
        write_output_bytes(target, text.encode("utf-8"))
        return 0
    if terminal:
        text = visible_text(text)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0

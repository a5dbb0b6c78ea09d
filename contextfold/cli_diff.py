"""CLI command ``diff``: what entered, left, was truncated or replaced between two turns, and why.

Imported when its command runs (registered in :mod:`contextfold.cli`). A tool that left gets the
reason it was not exposed at the later turn, re-derived from the log (``projections.tool_candidates``): a
manifest lists the tools a request declares, not those it left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from contextfold.api import Run, Store
from contextfold.audit.diff import diff_manifests
from contextfold.audit.outputs import DiffOutput
from contextfold.audit.text import visible
from contextfold.cli import store_for
from contextfold.cli_build import PickedRecord, not_exposed_reasons, turn_record
from contextfold.cli_files import shown_json
from contextfold.cli_progress import fold_bar
from contextfold.domain.errors import TurnNotFoundError
from contextfold.domain.manifest import BuildConfig, ContextManifest
from contextfold.projections.progress import Progress

__all__: list[str] = []


def _manifest_for(run: Run, turn: int, picked: PickedRecord | None, config: BuildConfig | None,
                  progress: Progress) -> tuple[ContextManifest, PickedRecord | None]:
    """The manifest of one side of a diff and the record it is (None: the turn had no record and
    was rebuilt from the log under ``config``, which records the rebuild)."""
    if picked is None:
        picked = turn_record(run, turn, None)
    if picked is not None:
        return picked.manifest, picked
    return run.build(turn=turn, config=config, progress=progress).manifest, None


def _label(picked: PickedRecord | None) -> str:
    """`` (record 2 of 3)`` when the turn has several records (which one matters), else ``""``."""
    return f" ({picked.label()})" if picked is not None and picked.count > 1 else ""


def _check_turns(store: Store, run_id: str, *turns: int) -> None:
    """Both turns exist, checked before either is rebuilt: a rebuild records itself, and a diff
    that fails on its second turn must not leave the first one's record behind."""
    last = store.run(run_id).next_turn()
    for turn in turns:
        if not 1 <= turn <= last:
            raise TurnNotFoundError(run_id, turn, last)


def _tool_reasons(run: Run, d: dict[str, Any], b: ContextManifest, progress: Progress) -> dict[str, str]:
    """Why each tool that entered is exposed at turn B (its manifest's reason), and why each that
    left is not (re-derived from the log as B's build saw it)."""
    reasons = {t.name: f"exposed: {t.reason}" for t in b.tools if t.name in d["tools_entered"]}
    if d["tools_left"]:  # a tool exposed at A is one B's run knows, or a call B's history dropped
        left = not_exposed_reasons(run, b, d["tools_left"], progress)
        reasons |= {name: why or "never registered, and the history the build kept no longer calls it"
                    for name, why in left.items()}
    return reasons


def _handle_diff(args: argparse.Namespace) -> int:
    with store_for(args) as store, fold_bar(store, args, f"diffing {args.run}", folds=2) as advance:
        _check_turns(store, args.run, args.a, args.b)  # then one fold per rebuilt turn
        run = store.run(args.run)
        # the records asked for, before a turn without one is rebuilt (and records itself)
        pa = turn_record(run, args.a, args.record_a)
        pb = turn_record(run, args.b, args.record_b)
        # A turn without a record is rebuilt under the other turn's recorded settings, so the diff
        # shows what the log changed, not a window or provider it was never built with.
        recorded = pa or pb
        config = recorded.manifest.config if recorded is not None else None
        (ma, pa), (mb, pb) = (_manifest_for(run, args.a, pa, config, advance),
                              _manifest_for(run, args.b, pb, config, advance))
        d = diff_manifests(ma, mb)
        d["tool_reasons"] = _tool_reasons(run, d, mb, advance)
    if args.json:  # which record each side is; None: rebuilt from the log (the turn had none)
        shown = DiffOutput.model_validate({**d, "from_record": None if pa is None else pa.as_json(),
                                           "to_record": None if pb is None else pb.as_json()})
        sys.stdout.write(shown_json(json.dumps(shown.model_dump(mode="json"), indent=2)) + "\n")
        return 0
    out = [f"turn {d['from_turn']}{_label(pa)} -> {d['to_turn']}{_label(pb)}: "
           f"tokens {d['tokens']['from']} -> {d['tokens']['to']}, "
           f"cache key {'CHANGED' if d['cache_key_changed'] else 'unchanged'}"]
    if d["config_changed"]:  # part of the difference is the settings, not the log
        changes = [f"{name} {json.dumps(c['from'])} -> {json.dumps(c['to'])}"
                   for name, c in d["config_changed"].items()]
        out.append("  built differently: " + ", ".join(changes))
    out += [f"  + {e['id']:<10} {e['kind']:<14} {e['tokens']:>6}  {e['reason']}" for e in d["entered"]]
    for e in d["left"]:
        by = f" -> {e['replaced_by']}" if e["replaced_by"] else ""
        line = f"  - {e['id']:<10} {e['kind']:<14} {e['tokens']:>6}  {e['reason']}{by} {e['detail']}"
        out.append(line.rstrip())
    out += [f"  ~ {t['id']:<10} truncated {t['before']} -> {t['after']} tokens"
            + (f" (already truncated at turn {d['from_turn']})" if t["was_truncated"] else "")
            for t in d["truncated"]]
    out += [f"  ~ {t['id']:<10} whole again {t['before']} -> {t['after']} tokens "
            f"(truncated at turn {d['from_turn']})" for t in d["restored"]]
    reasons = d["tool_reasons"]
    out += [f"  + tool {name}: {reasons[name]}" for name in d["tools_entered"]]
    out += [f"  - tool {name}: {reasons[name]}" for name in d["tools_left"]]
    sys.stdout.write("\n".join(visible(line) for line in out) + "\n")
    return 0

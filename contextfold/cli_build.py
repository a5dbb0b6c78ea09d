"""CLI commands over builds: ``build``, ``manifest``, ``replay`` (``diff``: :mod:`contextfold.cli_diff`).

Imported when one of its commands runs (registered in :mod:`contextfold.cli`). Output for people
is a table (rich when on a terminal, plain otherwise); ``--json`` gives data.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from contextfold.api import Run, Store
from contextfold.audit.diff import diff_manifests
from contextfold.audit.outputs import HashPair, ReplayVerifyOutput
from contextfold.audit.text import visible
from contextfold.cli import store_for
from contextfold.cli_args import EXCLUDED_SHOWN, RECORD_HELP, excluded_count, record_choice
from contextfold.cli_demo import DEMO_HOOKS
from contextfold.cli_files import StagedOutput, output_file, shown_json
from contextfold.cli_manifest_table import manifest_table
from contextfold.cli_progress import fold_bar
from contextfold.domain.command_outputs import BuildOutput
from contextfold.domain.errors import (
    IntegrityError,
    InvalidInputError,
    RecordNotFoundError,
    TurnNotFoundError,
)
from contextfold.domain.events import ContextBuilt
from contextfold.domain.manifest import (
    BuildConfig,
    ContextManifest,
    config_of,
)
from contextfold.projections.builder import BuildResult
from contextfold.projections.past_states import state_at_version
from contextfold.projections.progress import Progress
from contextfold.projections.tool_reasons import not_exposed_reason
from contextfold.rebuild_api import RecordChoice, nearest_config, previewed, read_turn, rebuild, turn_records
from contextfold.store.record_reads import TurnRead

__all__ = ["EXCLUDED_SHOWN", "RECORD_HELP", "PickedRecord", "diff_manifests", "excluded_count",
           "manifest_table", "not_exposed_reasons", "pick_record", "record_choice", "turn_record"]



def _do_build(args: argparse.Namespace, store: Store, *, preview: bool = False,
              before_record: Callable[[BuildResult], None] | None = None) -> BuildResult:
    """The build the flags ask for, with a bar while a long run folds (seconds at 10,000 events);
    with ``preview``, the next request with nothing written (:meth:`Run.preview`)."""
    with fold_bar(store, args, f"building {args.run}") as advance:
        run = store.run(args.run)
        if preview:
            return run.preview(args.provider, window=args.window, reserve=args.reserve, model=args.model,
                               progress=advance)
        return run.build(args.provider, window=args.window, reserve=args.reserve, model=args.model,
                         turn=args.turn, retries=args.retries, progress=advance, before_record=before_record)


@dataclass(frozen=True)
class RebuiltTurn:
    """A past turn rebuilt by ``manifest --turn N`` or ``replay --turn N``: the result, the turn's
    records as they were before, and, for a turn that had none, the settings it was rebuilt with
    and where they came from (for the note that says so). ``superseded``: this rebuild's own
    result when another worker recorded the turn meanwhile, so ``result`` reproduces that
    worker's record and this one was not recorded."""

    result: BuildResult
    records: tuple[ContextBuilt, ...]
    settings: str = ""
    superseded: BuildResult | None = None


def _settings_text(cfg: BuildConfig, recorded: bool, given: Mapping[str, Any]) -> str:
    """``anthropic, window 16000, reserve 2000 (the nearest record's)``; ``recorded``: whether the
    run has a record."""
    source = "the nearest record's" if recorded else "the defaults: the run has no record"
    if given:
        source += f", {', '.join(f'--{name}' for name in given)} as given"
    return f"{cfg.provider}, window {cfg.window}, reserve {cfg.reserve} ({source})"


def _rebuild_turn(args: argparse.Namespace, store: Store, *, record: bool, label: str) -> RebuiltTurn:
    """Turn ``args.turn`` rebuilt from the log. A turn with a record is rebuilt with that record's
    settings (any given beside it that differ are refused: they would be ignored); a turn with
    none with the nearest record's, as ``audit --turn`` and ``why`` rebuild it, the flags given
    replacing theirs: the defaults (neutral, window 128000) made another request than the run's,
    and ``replay`` recorded it as the turn's first record. ``record``: a past turn with no record
    records its rebuild, marked as one (``replay``); ``manifest`` writes nothing."""
    run = store.run(args.run)
    version = run.version  # before the records: a rebuild records at it (rebuild_api._record_once)
    read = read_turn(run, args.turn)  # with the later records' configs (nearest_config reads them)
    records = tuple(turn_records(read))
    given = {name: value for name in ("provider", "window", "reserve", "model")
             if (value := getattr(args, name, None)) is not None}
    named = config_of(None, **given)  # an invalid value (--window 0) is refused as such, first
    with fold_bar(store, args, f"{label} {args.run} turn {args.turn}") as advance:
        if records:
            result = rebuild(run, args.turn, named, record=False, progress=advance,
                             records=list(records), given=given)
            return RebuiltTurn(result, records)
        # the records' settings, then the log up to the turn: neither reads a record's manifest whole
        recorded = store.events.count_events(args.run, "context_built") > 0
        cfg = nearest_config(run, args.turn, given or None, read=read)
        ours: list[BuildResult] = []
        result = rebuild(run, args.turn, cfg, record=record, progress=advance, records=[],
                         version=version, given=given, superseded=ours.append)
    return RebuiltTurn(result, records, _settings_text(cfg, recorded, given), ours[0] if ours else None)


# ---------------------------------------------------------------- which record of a turn


class PickedRecord(BaseModel):
    """One record of a turn, where it stands among the turn's records, and its manifest."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    record: ContextBuilt
    index: int
    count: int
    manifest: ContextManifest

    def label(self) -> str:
        """``record 2 of 3, a rebuild``: which build of the turn a reader is looking at."""
        return f"record {self.index} of {self.count}" + (", a rebuild" if self.record.rebuild else "")

    def as_json(self) -> dict[str, Any]:
        return {"record": self.index, "records": self.count, "rebuild": self.record.rebuild}


def pick_record(run: Run, turn: int, which: RecordChoice,
                records: Sequence[ContextBuilt] | None = None) -> PickedRecord:
    """The record ``which`` of ``turn`` (of ``records``, its records when already read); never
    another one, nor a rebuild, in its place.

    Reads only: callers pick every record they need before anything rebuilds (and records)
    a turn, so a choice that does not exist leaves the log as it was."""
    records = run.records(turn) if records is None else records
    index = 1 if which == "first" else len(records) if which == "last" else which
    if not 1 <= index <= len(records):
        if not records and not 1 <= turn <= (last := run.next_turn()):  # say the turn does not
            raise TurnNotFoundError(run.run_id, turn, last)  # exist, rather than that it has no record
        raise RecordNotFoundError(run.run_id, turn, str(which), len(records))
    record = records[index - 1]
    try:
        manifest = ContextManifest.model_validate(record.manifest)
    except ValidationError as exc:  # a record appended by hand, not a builder's
        raise IntegrityError(f"run {run.run_id!r} turn {turn}: its context_built record {index} holds "
                             "no valid manifest") from exc
    return PickedRecord(record=record, index=index, count=len(records), manifest=manifest)


def turn_record(run: Run, turn: int, which: RecordChoice | None, *,
                read: TurnRead | None = None) -> PickedRecord | None:
    """The record ``which`` of ``turn``; without a choice, the turn's first record, or None when
    it has none (the caller rebuilds the turn from the log instead). ``read``: the turn's
    records as :func:`~contextfold.rebuild_api.read_turn` read them (read here otherwise)."""
    records = run.records(turn) if read is None else turn_records(read)
    if which is None and not records:
        return None
    return pick_record(run, turn, "first" if which is None else which, records)


def not_exposed_reasons(run: Run, manifest: ContextManifest, names: Iterable[str],
                        progress: Progress) -> dict[str, str | None]:
    """Why the build of ``manifest`` exposed none of ``names`` (None for a name the run knows no tool
    by, or one it exposed), re-derived from the log folded as that build saw it: a manifest lists
    the tools a request declares, not those it left out. For ``why`` and ``diff``."""
    version = min(manifest.log_version, run.version)  # a preview folds recovery it did not write
    # the log as a fold reads it, records without their manifests (``RecordReads.fold_events``)
    state = state_at_version(run.store.events.fold_events(run.run_id, upto=version), version,
                             run_id=run.run_id, progress=progress,
                             recorded_encoding=manifest.encoding)  # counted as that build counted
    exposed = {t.name for t in manifest.tools}
    return {name: not_exposed_reason(state, manifest.config, name, exposed) for name in names}


# ---------------------------------------------------------------- build


def _body(result: BuildResult) -> str:
    return json.dumps(result.request, indent=2, ensure_ascii=False) + "\n"


def _handle_build(args: argparse.Namespace) -> int:
    """``build``: --out is staged before the build is recorded (a file that cannot be written is
    no recorded build), and written once it is. A Ctrl-C after the record committed (on the way
    back from the store, or while it closes) finishes the build instead: "interrupted" and exit
    130 discarded --out, while the log kept the record, the turn's first maybe, of a request no
    caller received (and a retry recorded a second). As ``import`` does: the store is asked."""
    out = StagedOutput(output_file(args.out)) if args.out else None
    staged: list[BuildResult] = []  # the last request staged: the one a record is of
    recorded: BuildResult | None = None  # set once its record is in the log

    def stage(built: BuildResult) -> None:
        staged[:] = [built]
        if out is not None:
            out.stage(_body(built))

    try:
        try:
            with store_for(args) as store:  # --out is on disk before the build is recorded
                recorded = _do_build(args, store, before_record=stage)
        except KeyboardInterrupt:  # before the record committed, or on the way back from it?
            if recorded is None:
                recorded = _recorded_build(args, staged)
            if recorded is None:
                raise
        if out is not None:
            out.commit()
        _print_build(args, recorded)
    except KeyboardInterrupt:
        if recorded is None:
            raise
        if out is not None:
            out.commit()
        m = recorded.manifest
        sys.stderr.write(f"contextfold: interrupted, after the build was recorded: turn {m.turn}, request "
                         f"{m.request_hash[:16]}" + (f", written to {args.out}\n" if out else "\n"))
    finally:
        if out is not None:
            out.discard()
    return 0


def _recorded_build(args: argparse.Namespace, staged: Sequence[BuildResult]) -> BuildResult | None:
    """The build staged last, when a record of its request is in the log, else None (nothing was
    staged, or the Ctrl-C landed before its record committed). Read through a new connection:
    the one interrupted is not asked what it may still hold uncommitted. A record of the same
    request made earlier counts too: the log then holds this request as the turn's anyway."""
    if not staged:
        return None
    m = staged[-1].manifest
    with store_for(args) as store:
        records = store.run(args.run).records(m.turn)
    return staged[-1] if any(r.request_hash == m.request_hash for r in records) else None


def _print_build(args: argparse.Namespace, result: BuildResult) -> None:
    if args.json:
        shown = BuildOutput(request=result.request, manifest=result.manifest)
        sys.stdout.write(shown_json(json.dumps(shown.model_dump(mode="json"), ensure_ascii=False)) + "\n")
    elif not args.out:
        sys.stdout.write(shown_json(_body(result)))
    else:
        m = result.manifest
        sys.stdout.write(f"wrote {args.out}: turn {m.turn}, {m.selected_tokens}/{m.budget_tokens} tokens, "
                         f"{len(m.fragments)} fragments, request {m.request_hash[:16]}\n")


# ---------------------------------------------------------------- manifest


_PREVIEWED = ("turn {turn}, the next request, previewed: nothing was written (build records it, with "
              "any recovery events listed under protocol repairs)")


def _handle_manifest(args: argparse.Namespace) -> int:
    if args.record is not None and args.turn is None:
        raise InvalidInputError("--record picks one of a past turn's records: give --turn N with it")
    flags = [f"--{name}" for name in ("provider", "window", "reserve", "model")
             if getattr(args, name) is not None]
    if args.record is not None and flags:  # a record is shown as recorded: they were ignored
        raise InvalidInputError(f"--record shows a record as it was recorded, with its own settings: "
                                f"{', '.join(flags)} beside it would be ignored; leave them out")
    note = ""
    with store_for(args) as store:
        if args.record is not None:
            picked = pick_record(store.run(args.run), args.turn, args.record)
            manifest = picked.manifest
            note = f"turn {args.turn}: {picked.label()}, as recorded"
        elif args.turn is None:  # a look at the next request: no recovery events, no record
            manifest = _do_build(args, store, preview=True).manifest
            note = _PREVIEWED.format(turn=manifest.turn)
        else:  # a look: nothing is written, not even a rebuild record of a turn that has none
            rebuilt = _rebuild_turn(args, store, record=False, label="building")
            manifest = rebuilt.result.manifest
            count = len(rebuilt.records)
            if previewed(args.turn, rebuilt.records, store.run(args.run).next_turn()):
                note = _PREVIEWED.format(turn=args.turn)  # the unanswered turn, as rebuild made it
            elif not count:
                note = (f"turn {args.turn} has no context_built record: rebuilt from the log with "
                        f"{rebuilt.settings}; nothing was written (build --turn {args.turn} records it)")
            elif count > 1:  # the rebuild reproduces the first: say that the others exist
                note = (f"turn {args.turn} has {count} context_built records; this is the first, rebuilt "
                        f"from the log (the one replay --verify checks): --record last|1..{count} "
                        "shows another as recorded")
    if args.json:
        if note and args.record is None:  # stdout stays the manifest JSON alone
            sys.stderr.write(f"note: {visible(note)}\n")
        sys.stdout.write(shown_json(manifest.model_dump_json(indent=2)) + "\n")
    else:
        sys.stdout.write((f"{note}\n\n" if note else "") + manifest_table(manifest, args.excluded) + "\n")
    return 0


# ---------------------------------------------------------------- replay


def _handle_replay(args: argparse.Namespace) -> int:
    if args.json and not args.verify:  # the request is JSON already: --json is the verdict's
        raise InvalidInputError("--json goes with --verify (it prints the verdict as JSON); without "
                                "--verify, replay prints the request body, which is JSON")
    if args.record is not None and not args.verify:  # it would be ignored: the request shown is the first's
        raise InvalidInputError("--record picks the record replay --verify checks; without --verify, "
                                "manifest RUN --turn N --record K shows a record as recorded")
    with store_for(args) as store:
        run = store.run(args.run)
        if not args.verify:
            rebuilt = _rebuild_turn(args, store, record=True, label="replaying")
            sys.stdout.write(shown_json(_body(rebuilt.result)))
            if rebuilt.records:
                return 0
            if previewed(args.turn, (), run.next_turn()):
                note = _PREVIEWED.format(turn=args.turn)
            elif rebuilt.superseded is not None:  # it wrote nothing: the turn's record is another's
                note = _superseded_note(args.turn, rebuilt.settings, rebuilt.superseded,
                                        run.records(args.turn)[0])
            else:  # it wrote: say so, and with what (the first record is what replay --verify checks)
                note = (f"turn {args.turn} had no context_built record: this rebuild, with "
                        f"{rebuilt.settings}, is recorded as its first, marked as a rebuild (replay "
                        "--verify checks against it)")
            sys.stderr.write(f"note: {visible(note)}\n")
            return 0
        with fold_bar(store, args, f"replaying {args.run} turn {args.turn}") as advance:
            report = run.replay(args.turn, record=args.record or "first",
                                progress=advance)  # a damaged artifact: IntegrityError, 3
        if not report.ok:
            chain = run.verify()  # a mismatch over an altered log is the log's integrity failure
            if not chain.ok:
                raise IntegrityError(f"run {args.run!r} position {chain.first_bad_position}: "
                                     f"{chain.reason} (so turn {args.turn} cannot be verified)")
    if args.json:  # the verdict as data (schema replay-verify); the same exit codes
        shown = ReplayVerifyOutput(
            run_id=args.run, turn=args.turn, ok=report.ok, record=report.record, records=report.records,
            rebuild_of_record=report.recorded.rebuild,
            request_hash=HashPair(recorded=report.recorded.request_hash, rebuilt=report.rebuilt.request_hash),
            cache_key=HashPair(recorded=report.recorded.prefix_hash, rebuilt=report.rebuilt.cache_key),
            differences=report.differences, builder_note=report.builder_note,
            unicode_note=report.unicode_note)
        sys.stdout.write(shown_json(json.dumps(shown.model_dump(mode="json"), ensure_ascii=False)) + "\n")
        return 0 if report.ok else 1
    if report.ok:
        m = report.rebuilt
        named = (f"; recorded in run {m.run_id!r}, the name its refs carry, before the run was "
                 f"imported as {args.run!r}" if m.run_id != args.run else "")
        # a rebuild record is not what a model was sent: say that the check is against one
        which = ("its first record, a rebuild (no live build of the turn was recorded: this shows the "
                 "log still makes the request that rebuild recorded)" if report.recorded.rebuild
                 else "its record" if report.records == 1
                 else f"its record {report.record} of {report.records}")
        sys.stdout.write(f"ok: turn {args.turn} rebuilt from the log matches {which} "
                         f"(request {m.request_hash[:16]}, cache key {m.cache_key[:16]}{named})\n")
        return 0
    sys.stderr.write(f"MISMATCH at turn {args.turn}: first difference: {visible(report.differences[0])}\n")
    if report.builder_note is not None:
        sys.stderr.write(f"note: {visible(report.builder_note)}\n")
    if report.unicode_note is not None:
        sys.stderr.write(f"note: {visible(report.unicode_note)}\n")
    return 1


def _superseded_note(turn: int, settings: str, superseded: BuildResult, first: ContextBuilt) -> str:
    """What ``replay --turn N`` says when another worker recorded the turn between this rebuild's
    check and its record (``superseded``: this rebuild, with ``settings``): the turn's first record
    is that worker's (shown: its request), and whether this rebuild's request is the same."""
    ours, theirs = superseded.manifest.request_hash, first.request_hash
    kind = "a rebuild" if first.rebuild else "a live build"
    same = ("this rebuild's request is the same" if ours == theirs else
            f"this rebuild's request differs from it (request {ours[:16]}, the record's {theirs[:16]})")
    return (f"turn {turn} had no context_built record when this rebuild, with {settings}, "
            f"began; another worker recorded the turn meanwhile ({kind}, for {first.provider}), so this "
            f"rebuild was not recorded: the turn's first record is that worker's, and the request shown "
            f"reproduces it (replay --verify checks against it); {same}")


# ---------------------------------------------------------------- demo step


def _demo_build(store: Store, run_id: str) -> None:
    run = store.run(run_id)
    result = run.build("anthropic", window=16_000, reserve=2_000)
    sys.stdout.write("\nnext request (anthropic, window 16000, reserve 2000), recorded as a "
                     "context_built event:\n\n")
    # the run's model (gpt-4o), from the state the build folded: why the body names none
    sys.stdout.write(manifest_table(result.manifest, run_model=run.state().model) + "\n")


DEMO_HOOKS.append(_demo_build)

"""``contextfold import``: a file, standard input, or a folder of traces, recorded atomically.

Apart from :mod:`contextfold.cli` because a folder import (one transaction for every trace
under a folder, as SWE-agent writes one ``.traj`` per task instance) is its own work: walking
the folder, naming each run after its file, skipping what is not a trace. The command is
registered in ``cli`` (its place in ``--help``); this module runs it.

Every source is read and parsed before anything is written, and every run is then written in
ONE transaction: an import either records all its runs or none.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from contextfold.audit.text import visible
from contextfold.cli import store_for
from contextfold.cli_new_store import removed_if_unrecorded
from contextfold.cli_progress import progress_bar
from contextfold.cli_restore import lost_artifacts, restore_artifacts
from contextfold.cli_trace_folders import EventFolder, trace_files
from contextfold.domain.errors import ImportFormatError, InputLimitError, InvalidInputError, RunExistsError
from contextfold.domain.events import AnyEvent, ArtifactRef, ModelResponse, ToolsRegistered, artifact_refs
from contextfold.domain.reasoning import appendable_reasoning
from contextfold.domain.text_breaks import item_breaks, last_text_after
from contextfold.import_run_ids import joined_run_id, run_id_for, run_in_file
from contextfold.store.backends import STORE_TABLES, parse_store_url
from contextfold.store.event_reads import check_run_id
from contextfold.store.event_store import store_url_from_env
from contextfold.store.sqlite_path import check_sqlite_path

if TYPE_CHECKING:
    from contextfold.importers import RunTimes

__all__ = ["TRACE_PATTERNS", "handle_import"]

TRACE_PATTERNS = ("*.traj", "*.json", "*.jsonl")
"""The file names a folder import reads unless ``--glob`` says otherwise: SWE-agent
trajectories, JSON documents and JSONL logs."""


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _too_big(source: str, limit: int) -> InputLimitError:
    return InputLimitError(f"{source}: more than {limit} bytes, the import limit "
                           f"(StoreLimits.max_import_bytes); pass --max-bytes to raise it")


def _read_capped(stream: BinaryIO, limit: int, source: str) -> bytes:
    """At most ``limit`` bytes of ``stream``, read in chunks: a stream with no end (``/dev/zero``,
    a pipe) is refused once it passes the limit, not read into memory whole first."""
    buf = bytearray()
    while chunk := stream.read(min(1 << 20, limit + 1 - len(buf))):
        buf += chunk
        if len(buf) > limit:
            raise _too_big(source, limit)
    return bytes(buf)


def _read_file(p: Path, limit: int, *, label: str | None = None, used: int = 0) -> bytes:
    """The bytes of file ``p``, refused once ``used`` plus its length passes ``limit``. A
    folder's limit holds for its files together (all of them are held at once), so there
    ``used`` is what its files before this one hold and the refusal names the folder (``label``)."""
    label = label or str(p)

    def too_big() -> InputLimitError:
        return _too_big(label, limit)

    cap = limit - used
    try:
        with p.open("rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):  # a device, a FIFO: no size to trust
                data = _read_capped(f, cap, label)
            elif info.st_size > cap:  # refused before a byte is read
                raise too_big()
            else:
                data = f.read(info.st_size + 1)
                if len(data) > cap:  # it grew while we read it
                    raise too_big()
                if len(data) > info.st_size:  # still growing (or a /proc file, size 0): the rest
                    data += _read_capped(f, cap - len(data), label)
    except FileNotFoundError:
        raise ImportFormatError(f"{p}:0", "no such file") from None
    except InputLimitError:
        raise too_big() from None
    except OSError as exc:  # unreadable: permissions, a device, ...
        raise ImportFormatError(f"{p}:0", f"cannot read: {exc.strerror or exc}") from exc
    return data


def _run_id_of(prefix: str, root: Path, item: Path | EventFolder) -> str:
    """:func:`run_id_for` a file; an event folder's conversation is ``PREFIX/<its folders>``
    (``PREFIX`` itself when it is the folder imported)."""
    if not isinstance(item, EventFolder):
        return run_id_for(prefix, item.relative_to(root))
    return joined_run_id(prefix, item.conversation.relative_to(root).parts)


def _artifact_refs(events: list[AnyEvent]) -> Iterator[tuple[int, ArtifactRef]]:
    """(index, ref) of every artifact ref the events carry (payloads and media blocks)."""
    for index, event in enumerate(events):
        for ref in artifact_refs(event):
            yield index, ref


Named = list[tuple[str, list[AnyEvent], str]]
"""(run id, events, source) of each run an import records."""


def _cited(named: Named, bundled: Bundled, held: Callable[[str], bool]) -> Bundled:
    """The carried artifacts (``bundled``) the runs cite, to write with them; an ImportFormatError
    for a ref neither carried nor ``held`` by the store (an export's refs into the store it came
    from): the run would not build."""
    needed: Bundled = {}
    for run_id, events, where in named:
        for index, ref in _artifact_refs(events):
            if ref.hash in bundled:
                needed[ref.hash] = bundled[ref.hash]
            elif not held(ref.hash):
                raise ImportFormatError(
                    f"{where}:0", f"run {run_id!r}: position {index + 1} refers to artifact "
                    f"{ref.hash[:16]}, which this store does not hold (an 'events --json' export "
                    "keeps large payloads as refs into its own store; 'events --json "
                    "--with-artifacts' carries them): the run would not build")
    return needed


def _appendable(named: Named) -> tuple[Named, list[str]]:
    """``named`` without the reasoning pieces an append refuses, and a note per run naming them.

    Why: a trace whose logger dropped a ``thinking`` block's signature (or holds a Responses item
    after the last call, a Gemini signature that is not base64) failed to import as a whole; the
    piece can never go back to its provider, so the run is recorded without it and the import says
    so. The responses keep their text and calls (``reasoning.appendable_reasoning``)."""
    out: Named = []
    notes: list[str] = []
    for run_id, events, where in named:
        whys: list[str] = []
        kept: list[AnyEvent] = []
        for position, event in enumerate(events, start=1):
            if isinstance(event, ModelResponse) and event.reasoning is not None:
                reasoning, refused = appendable_reasoning(event.reasoning, len(event.tool_calls),
                                                         text_after=last_text_after(event))
                if refused:
                    event = event.model_copy(update={"reasoning": reasoning, "text_breaks": item_breaks(
                        event, {r.piece for r in refused})})
                    whys += [f"position {position}: {r.why}" for r in refused]
            kept.append(event)
        out.append((run_id, kept, where))
        if whys:
            more = f" and {len(whys) - 3} more" if len(whys) > 3 else ""
            notes.append(f"note: run {run_id!r}: left out {len(whys)} reasoning piece(s) its provider "
                         f"never takes back ({'; '.join(whys[:3])}{more}); the responses' text and calls "
                         "are recorded")
    return out, notes


def _new_sqlite_file(args: argparse.Namespace) -> bool:
    """Whether the import's store is a SQLite file not made into a store yet (none there, an empty
    file, a database without tables): it holds no artifact, so a ref the import does not carry
    is refused before the file is made one (the refusal left an empty store, which later
    commands took for one that had been recorded into)."""
    raw = store_url_from_env(args.store)
    url = parse_store_url(raw)
    if url.scheme != "sqlite" or url.path == ":memory:":
        return False
    checked = check_sqlite_path(url.path, raw, ours=STORE_TABLES)
    return checked is not None and not checked.tables


def _check_run_id(run_id: str, where: str) -> None:
    """:func:`check_run_id`, naming the source the id came from (a folder's file, say)."""
    try:
        check_run_id(run_id)
    except InputLimitError as exc:
        raise InputLimitError(f"{where}: {exc}") from None


def _runs_of_file(args: argparse.Namespace) -> tuple[Named, str, str, list[str], Bundled, set[str], Timed]:
    """The runs of one file (or standard input): (runs, source, format, notes, artifacts, the runs
    that are a log: :data:`LOG_FORMAT`, the times of the runs whose format has them)."""
    from contextfold.importers import detect_format

    if args.path == "-":
        source = "<stdin>"
        data = _read_capped(sys.stdin.buffer, args.max_bytes, source)
    else:
        source = args.path
        data = _read_file(Path(args.path), args.max_bytes)
    # detecting and parsing a big file is most of its import (a 54 MB one: ~20 s, silent until the
    # store's bar): a pulsing bar, as no parser reports its steps
    with progress_bar(None, f"parsing {visible(source)} ({len(data) / 1e6:.1f} MB)"):
        fmt = args.format or detect_format(data, source=source)
        runs, times, bundled, notes = _parsed(data, fmt, source)  # validate everything first: atomic
    named = [(run_in_file(args.run, suffix, len(runs)), events, source) for suffix, events in runs]
    timed = {run_id: t for (run_id, _, _), t in zip(named, times, strict=True) if t is not None}
    return (named, source, fmt, notes, bundled, {r for r, _, _ in named} if fmt == LOG_FORMAT else set(),
            timed)


LOG_FORMAT = "events"
"""contextfold's own export (``events --json``): a log, recorded as it was written, its inline
audio and video kept inline (``EventStore.append_new_runs``'s ``logs``). Why: the builds the log
recorded were made from them so, and moved to artifacts they replayed to other hashes
(``store.media.materialize``'s ``as_logged``); any other format is a history, whose clips move."""

Timed = dict[str, list[datetime | None]]
"""Run id -> each of its events' time as its source says (``importers.TIMED_FORMATS``): recorded
with the run. A run not in it comes from a format without times: recorded without any (an import
invents none: the time of the import is not when its events happened)."""

Bundled = dict[str, tuple[ArtifactRef, bytes]]
"""The artifacts an import's exports carry (``events --json --with-artifacts``), by hash."""


def _parsed(data: bytes, fmt: str, source: str
            ) -> tuple[list[tuple[str, list[AnyEvent]]], list[RunTimes], Bundled, list[str]]:
    """The runs of one file, their times (``importers.TIMED_FORMATS``), the artifacts it carries
    (an events export's) by hash, and notes on the request settings it leaves out
    (``tool_choice``...: a log has no place for them)."""
    from contextfold.importers import timed_runs_artifacts_and_notes

    runs, times, carried, notes = timed_runs_artifacts_and_notes(data, format=fmt, source=source)
    return runs, times, {ref.hash: (ref, blob) for ref, blob in carried}, notes


def _runs_of_folder(args: argparse.Namespace, root: Path
                    ) -> tuple[Named, str, str, list[str], Bundled, set[str], Timed]:
    """The runs of every trace under ``root``: (runs, source, a summary of the formats, notes,
    the artifacts its exports carry, the runs that are a log: its exports', the times of the runs
    whose format has them).

    Without ``--format`` each file's format is detected, and JSON of no known shape (SWE-agent's
    ``preds.json``, a config) is skipped and listed; a file that is not JSON at all, or does not
    parse as its format, fails the import. With ``--format`` every matched file must be one. An
    OpenHands conversation kept one file per event is one run (see :class:`EventFolder`)."""
    from contextfold.importers import event_files_notes_and_times, guess_format

    source = str(root)
    patterns = tuple(args.glob or TRACE_PATTERNS)
    items = trace_files(root, patterns, event_folders=args.format in (None, "openhands"))
    if not items:
        raise ImportFormatError(f"{source}:0", f"no file in this folder matches {' or '.join(patterns)}")
    names = [_run_id_of(args.run, root, item) for item in items]
    for name, item in zip(names, items, strict=True):  # before a byte is read
        _check_run_id(name, str(item.conversation if isinstance(item, EventFolder) else item))
    n_files = sum(len(item.files) + (item.state is not None) if isinstance(item, EventFolder) else 1
                  for item in items)
    label = f"{source} (its {n_files} trace files)"
    used = 0

    def read(f: Path) -> bytes:
        nonlocal used
        data = _read_file(f, args.max_bytes, label=label, used=used)
        used += len(data)
        advance(1)
        return data

    named: Named = []
    timed: Timed = {}
    bundled: Bundled = {}
    notes: list[str] = []
    logs: set[str] = set()
    formats: Counter[str] = Counter()
    skipped: list[Path] = []
    with progress_bar(n_files, f"reading {source}") as advance:
        for name, item in zip(names, items, strict=True):
            if isinstance(item, EventFolder):
                state = None if item.state is None else read(item.state)
                events, mended, event_times = event_files_notes_and_times(
                    [(str(f), read(f)) for f in item.files], state=state)
                timed[name] = event_times
                notes += mended
                formats["openhands event folder"] += 1
                named.append((name, events, str(item.files[0].parent)))
                continue
            data = read(item)
            fmt = args.format or guess_format(data, source=str(item))
            if fmt is None:
                skipped.append(item)
                continue
            formats[f"{fmt} file"] += 1
            runs, run_times, carried, dropped = _parsed(data, fmt, str(item))
            ids = [run_in_file(name, suffix, len(runs)) for suffix, _ in runs]
            timed.update((run_id, t) for run_id, t in zip(ids, run_times, strict=True) if t is not None)
            named += [(run_id, events, str(item)) for run_id, (_, events) in zip(ids, runs, strict=True)]
            logs.update(ids if fmt == LOG_FORMAT else ())
            bundled.update(carried)
            notes += dropped
    if not named:
        raise ImportFormatError(f"{source}:0", f"none of its {len(items)} matching files is a trace "
                                "in a known format; pass --format to read them as one")
    if skipped:
        shown = ", ".join(str(p.relative_to(root)) for p in skipped[:10])
        more = f" and {len(skipped) - 10} more" if len(skipped) > 10 else ""
        notes.append(f"skipped {len(skipped)} file(s) of no known trace format: {shown}{more}")
    summary = ", ".join(f"{count} {kind}{'s' if count > 1 else ''}"
                        for kind, count in sorted(formats.items()))
    return named, source, summary, notes, bundled, logs, timed


def handle_import(args: argparse.Namespace) -> int:
    """Read and check every run of ``args.path``, then record them all in one transaction."""
    root = Path(args.path) if args.path != "-" else None
    if root is not None and root.is_dir():
        named, source, fmt, notes, bundled, logs, timed = _runs_of_folder(args, root)
    else:
        if args.glob:
            raise ImportFormatError(f"{args.path}:0", "--glob selects files in a folder; this is not one")
        named, source, fmt, notes, bundled, logs, timed = _runs_of_file(args)
    first: dict[str, str] = {}
    for run_id, _, where in named:  # a multi-run file's ids too, before the store is opened
        _check_run_id(run_id, where)
        if run_id in first:  # two files, or two runs of one file ("a b" and "a_b"), named alike
            other = "another of its runs'" if first[run_id] == where else f"{first[run_id]}'s"
            raise ImportFormatError(f"{where}:0", f"its run id {run_id!r} is also {other} (a character "
                                    "a run id cannot hold becomes _)")
        first[run_id] = where
    named, dropped = _appendable(named)
    notes = [*notes, *dropped]
    if _new_sqlite_file(args):
        _cited(named, bundled, lambda _: False)
    total: int | None = None  # set once the runs are committed: a Ctrl-C after that is no failure
    try:
        with removed_if_unrecorded(args), store_for(args, create=True) as store:
            restoring: dict[str, list[tuple[ArtifactRef, bytes]]] = {}
            for run_id, events, where in named:
                held = store.events.version(run_id)
                if held:  # the same log, lost artifacts carried: those are brought back (cli_restore)
                    lost = lost_artifacts(store.events, run_id, events, bundled)
                    if not lost:
                        raise RunExistsError(run_id, held, source=None if where == source else where,
                                             hint="pick another --run")
                    restoring[run_id] = lost
            named = [n for n in named if n[0] not in restoring]
            needed = _cited(named, bundled, store.events.has_artifact)
            # ONE transaction: every run, or none (a refusal, a lost server, Ctrl-C). What the
            # store refuses is named by its run: the one being prepared, after the runs reported
            # done (each event is prepared once; a separate check first prepared them all twice).
            pending = iter([(run_id, where) for run_id, events, where in named if events])

            def prepared(n: int) -> None:
                next(pending)  # that run is prepared: a refusal from here on is the next one's
                advance(n)

            with progress_bar(sum(len(events) for _, events, _ in named), f"importing {source}") as advance:
                try:
                    total = store.events.append_new_runs(
                        [(r, e) for r, e, _ in named], progress=prepared,
                        artifacts=[(blob, ref.media_type) for ref, blob in needed.values()], logs=logs,
                        times={r: timed.get(r) or [None] * len(e) for r, e, _ in named})
                except InvalidInputError as exc:
                    failed = next(pending, None)
                    if failed is None:
                        raise
                    raise ImportFormatError(f"{failed[1]}:0", f"run {failed[0]!r}: {exc}") from exc
                except KeyboardInterrupt:  # before the commit, or on the way back from it?
                    total = _recorded(args, named)
                    if total is None:
                        raise
            notes += [restore_artifacts(store.events, run_id, lost) for run_id, lost in restoring.items()]
            _report(total, named, source, fmt, notes)
    except KeyboardInterrupt:
        if total is None:
            raise
        sys.stderr.write(f"contextfold: interrupted, after the import was recorded: {total} events into "
                         f"{len(named)} run(s) from {source} are in the store\n")
    return 0


def _recorded(args: argparse.Namespace, named: Named) -> int | None:
    """The events of ``named`` when a Ctrl-C landed after their transaction committed (each run
    holds exactly its events), else None. Why: "interrupted" and exit 130 say nothing was written,
    so a retry found every run taken (RunExistsError). Read through a new connection: the one
    interrupted is not asked what it may still hold uncommitted."""
    with store_for(args) as store:
        held = [(store.events.version(run_id), len(events)) for run_id, events, _ in named if events]
    return sum(n for _, n in held) if held and all(v == n for v, n in held) else None


def _report(total: int, named: Named, source: str, fmt: str, notes: list[str]) -> None:
    if named or not notes:  # an import that only brought artifacts back says that alone (cli_restore)
        _out(f"imported {total} events into {len(named)} run(s) from {visible(source)} ({fmt})")
    for note in [*notes, *_tool_name_notes(named)]:  # a file name may hold any character but / and NUL
        _out(visible(note))
    for run_id, events, _ in named[:20]:
        _out(f"  {run_id}: {len(events)} events")
    if len(named) > 20:
        _out(f"  ... {len(named) - 20} more")


def _tool_name_notes(named: Named) -> list[str]:
    """What the imported registered tools will meet: a runtime names MCP tools ``server.tool``, which
    OpenAI and Anthropic refuse (a build for them fails on such a tool: the whole request would be
    refused), and MCP servers publish parameters schemas they refuse (not an object, ``anyOf`` at the
    top level, ``filter[id]`` keys for Anthropic: a build does not offer such a tool to them,
    ``render.tool_schemas``). The import says which tools and which APIs now, not at the first build."""
    from contextfold.projections.render.protocol import refused_tool_names, refused_tool_schemas

    specs = [spec for _, events, _ in named for e in events if isinstance(e, ToolsRegistered)
             for spec in e.tools]
    # registered names only: a tool the history calls without registering it is shown under an
    # alias where its name is refused (``projections/tool_names``), so no build fails on it
    names = {spec.name for spec in specs}
    by_names: dict[tuple[str, ...], list[str]] = {}
    for provider, (refused, rule) in refused_tool_names(names).items():
        by_names.setdefault(tuple(refused), []).append(f"{provider} ({rule})")
    refused_schemas = refused_tool_schemas((spec.name, spec.parameters) for spec in specs)
    notes = []
    if refused_schemas:
        shown = [f"{name!r} (" + "; ".join(why + ": " + ", ".join(apis) for why, apis in reasons) + ")"
                 for name, reasons in list(refused_schemas.items())[:5]]
        more = f" and {len(refused_schemas) - 5} more" if len(refused_schemas) > 5 else ""
        notes.append(f"note: tool(s) {', '.join(shown)}{more} take parameters schemas the APIs named refuse: "
                     "builds of these runs for those do not offer them (their calls are shown as runtime "
                     "notes; fix the schema in the source to offer them)")
    for names_refused, providers in by_names.items():
        more = f" and {len(names_refused) - 5} more" if len(names_refused) > 5 else ""
        notes.append(f"note: tool name(s) {', '.join(map(repr, names_refused[:5]))}{more} are refused by "
                     f"{'; '.join(providers)}: builds of these runs for those do not offer them (their calls "
                     "are shown as runtime notes; rename the tool in the source to offer it)")
    return notes

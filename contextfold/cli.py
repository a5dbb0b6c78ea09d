"""The ``contextfold`` command.

Every command takes ``--store URL`` (or ``$CONTEXTFOLD_STORE``; default
``sqlite:///contextfold.db`` in the working directory). Errors of ours print
one clear line and exit with one of ``EXIT_CODES`` (2 bad input / not found /
conflict, 3 integrity, 4 store unavailable: retry later, 5 store not writable:
disk full or read-only, fix it first); nothing else is caught, so a bug shows
its traceback.

Commands are registered in ``COMMANDS``: each with its flags, declared here or in ``cli_args``,
and a handler that imports the command's module when it runs. Why: a command pays for the
modules it uses, not every command's; ``--help``, ``runs`` or ``verify`` import no builder,
renderer or tokenizer (they cost ~0.45 s of CPU when this module imported every command's).
A test checks which modules such a command loads (``tests/unit/test_cli_light_imports.py``).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import dataclasses
import importlib
import io
import json
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from contextfold import cli_args as _args
from contextfold.audit.text import visible, visible_json
from contextfold.cli_files import (
    closed_streams_to_devnull,
    log_position,
    nonempty,
    shown_json,
    stdout_failed,
    stdout_is_terminal,
    stdout_to_devnull,
)
from contextfold.console import interrupted
from contextfold.domain.errors import (
    ContextfoldError,
    IntegrityError,
    InvalidInputError,
    RecordNotFoundError,
    StoreConfigError,
    StoreNotWritableError,
    StoreUnavailableError,
)
from contextfold.projections.memo_budget import memo_ceiling

if TYPE_CHECKING:  # imported by the handlers that use them (the module docstring says why)
    from collections.abc import Mapping
    from datetime import datetime

    from contextfold.domain.events import AnyEvent
    from contextfold.domain.log import RecordedEvent
    from contextfold.store_api import Store

memo_ceiling()
"""Read ``$CONTEXTFOLD_MEMO_MB`` as the command line loads: a bad value is warned of (one line,
``contextfold.console``) by every command, as when every command loaded the builder, whose memos
read it as they were made; a command that then loads them finds it read."""

__all__ = ["COMMANDS", "EXIT_CODES", "main", "print_events", "register", "store_for", "summarize_event"]

Handler = Callable[[argparse.Namespace], int]
COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Handler, str]] = {}


def register(name: str, help_text: str, configure: Callable[[argparse.ArgumentParser], None],
             handler: Handler) -> None:
    """Add a sub-command: ``configure`` adds its arguments, ``handler`` runs it (returns the exit code)."""
    COMMANDS[name] = (configure, handler, help_text)


@dataclasses.dataclass(frozen=True)
class _Lazy:
    """The handler ``name`` of ``module``, imported when the command runs, not when the parser is
    built: ``--help`` and the other commands do not pay for that command's imports."""

    module: str
    name: str

    def __call__(self, args: argparse.Namespace) -> int:
        command: Handler = getattr(importlib.import_module(self.module), self.name)
        return command(args)


def store_for(args: argparse.Namespace, *, create: bool = False) -> Store:
    """The store a command works on (``--store``, else ``$CONTEXTFOLD_STORE``, else the default).

    ``sqlite:///:memory:`` is refused: the store lives as long as the one command, so
    ``import`` reported its events imported and ``build`` recorded its request into a
    database that was gone when the command returned.

    Only a command that starts runs (``import``, ``demo``: ``create``) makes a new store. Every
    other one reads or extends runs a store already holds, so a store not made yet is a mistyped
    URL, schema or tenant: ``runs`` printed nothing and left an empty store behind (a SQLite file;
    a PostgreSQL schema, or a tenant's role and schema)."""
    from contextfold.store.backends import display_url, parse_store_url
    from contextfold.store.event_store import store_url_from_env
    from contextfold.store_api import open_store

    url = store_url_from_env(args.store)
    if parse_store_url(url).path == ":memory:":
        raise StoreConfigError(f"{display_url(url)!r} is an in-memory store: it would be gone when this "
                               "command ends; use a file (sqlite:///runs.db) or postgresql://...")
    return open_store(url, must_exist=not create)


def _out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def summarize_event(event: AnyEvent, width: int = 90) -> str:
    """One human line for an event (for ``events`` and reports): :mod:`contextfold.event_line`,
    imported when an event is shown."""
    from contextfold.event_line import summarize_event as line

    return line(event, width)


# ---------------------------------------------------------------- import


IMPORT_FORMATS = _args.IMPORT_FORMATS
"""The formats ``import --format`` offers (declared in ``cli_args``)."""


def _handle_import(args: argparse.Namespace) -> int:
    from contextfold.cli_import import handle_import

    return handle_import(args)


register("import", "record an existing history (OpenAI, Anthropic, OpenHands, SWE-agent .traj, Gemini, "
                   "events JSONL)",
         _args.configure_import, _handle_import)


# ---------------------------------------------------------------- runs / events / verify


def _configure_runs(p: argparse.ArgumentParser) -> None:
    p.add_argument("prefix", nargs="?", default="", metavar="PREFIX",
                   help="only the runs whose id starts with PREFIX (a folder import's RUN/, say)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="only the N runs started last: the end of the listing, read without reading "
                        "the whole store")
    p.add_argument("--json", action="store_true",
                   help="print JSON (first_at, last_at: the earliest and latest time of its events, UTC; "
                        "null for a run whose events have none)")


def _handle_runs(args: argparse.Namespace) -> int:
    from contextfold.domain.event_times import shown_time
    from contextfold.store.backends import display_url

    with store_for(args) as store:
        runs = store.runs(args.prefix, limit=args.limit)  # both asked of the database (EventReads.runs)
        spans = store.events.run_spans([r.run_id for r in runs])
        if args.json:
            from pydantic import TypeAdapter

            from contextfold.domain.command_outputs import RunLine

            lines = TypeAdapter(tuple[RunLine, ...]).dump_python(tuple(
                RunLine(run_id=r.run_id, events=r.events,
                        first_at=shown_time(spans[r.run_id][0]) if r.run_id in spans else None,
                        last_at=shown_time(spans[r.run_id][1]) if r.run_id in spans else None)
                for r in runs), mode="json")
            _out(shown_json(json.dumps(lines)))
        else:
            for r in runs:
                span = spans.get(r.run_id)
                when = "no times" if span is None else f"{shown_time(span[0])} .. {shown_time(span[1])}"
                _out(f"{r.run_id}\t{r.events} events\t{when}")
            if not runs:
                matching = f" starting with {args.prefix!r}" if args.prefix else ""
                _out(f"no runs{matching} in {display_url(store.url)}")
    return 0


register("runs", "list the runs in the store, each with its event count and the earliest and latest time of "
                 "its events (UTC; 'no times': recorded before times were kept, or imported from a "
                 "format without them)",
         _configure_runs, _handle_runs)


def _configure_events(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id")
    p.add_argument("--json", action="store_true",
                   help="print canonical events JSONL (re-importable): the export, raw as logged, "
                        "secrets included (masked, it would not replay to its recorded hashes); an event "
                        "with a time carries it beside its fields as recorded_at (UTC)")
    p.add_argument("--reveal", action="store_true",
                   help="show the lines' content raw; by default a secret a line holds (an API key, a "
                        "token, a password: the rules the builder redacts requests with) is shown as "
                        "[REDACTED:<rule>], so the output can be pasted into a ticket")
    p.add_argument("--with-artifacts", action="store_true",
                   help="with --json: first one line per artifact the events cite (large payloads, "
                        "media; base64), so that another store can import the run; without it an "
                        "export cites them by hash and imports only into this store")
    p.add_argument("--upto", type=log_position, default=None, metavar="POS",
                   help="last position to print (default: the run's last event)")


def print_events(events: list[RecordedEvent], as_json: bool,
                 times: Mapping[int, datetime] | None = None, *, reveal: bool = False) -> None:
    """Each event on a line: text (position, time, type, hash, summary; its secrets masked unless
    ``reveal``: :mod:`contextfold.projections.redact_shown`) or its export line (JSON, raw as
    logged; its time as ``recorded_at``: ``domain.export_lines.timed_event_line``). ``times``:
    position -> time (``EventStore.event_times``); an event without one shows ``-`` and carries
    none."""
    from contextfold.domain.event_times import shown_time
    from contextfold.domain.events import canonical_json
    from contextfold.domain.export_lines import timed_event_line

    times = times or {}
    shown = visible_json if as_json and stdout_is_terminal() else str  # decided once for the run
    if not (as_json or reveal):
        from contextfold.projections.redact_shown import masked, masked_event
    for rec in events:
        at = times.get(rec.position)
        if as_json:
            line = timed_event_line(canonical_json(rec.event), None if at is None else shown_time(at))
            _out(shown(line.decode()))
        elif reveal:
            _out(f"{rec.position:>6}  {shown_time(at):<27} {rec.event.type:<20} {rec.hash[:12]}  "
                 f"{visible(summarize_event(rec.event))}")
        else:  # masked before the line is cut to its width: a secret cut in half no rule finds
            event = masked_event(rec.event)
            summary = summarize_event(event)
            if event is rec.event:  # none found, or a field refused its placeholder: the line itself
                summary = masked(summary)  # (not a masked line again: a placeholder reads as a value)
            _out(f"{rec.position:>6}  {shown_time(at):<27} {rec.event.type:<20} {rec.hash[:12]}  "
                 f"{visible(summary)}")


def _handle_events(args: argparse.Namespace) -> int:
    if args.with_artifacts and not args.json:
        raise InvalidInputError("--with-artifacts goes with --json (the artifacts are lines of the export)")
    with store_for(args) as store:
        events = store.events.read(args.run, upto=args.upto)  # Run.events, without loading the builder
        times = store.events.event_times(args.run, upto=args.upto)
        if args.with_artifacts:
            from contextfold.domain.events import artifact_refs, canonical_dumps
            from contextfold.domain.export_lines import artifact_line  # not the importers (its docstring)

            carried: set[str] = set()
            for rec in events:
                for ref in artifact_refs(rec.event):
                    if ref.hash not in carried:
                        carried.add(ref.hash)
                        data = store.events.cited_artifact(ref)  # lost: an integrity failure, 3
                        _out(shown_json(canonical_dumps(artifact_line(ref, data))))
        print_events(events, args.json, times, reveal=args.reveal)
    return 0


register("events", "print a run's event log",
         _configure_events, _handle_events)


def _configure_verify(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id")
    p.add_argument("--json", action="store_true",
                   help="print JSON (schema verify): ok, events, first_bad_position, reason, head; "
                        "the exit code is the same (0 intact, 3 not)")


def _handle_verify(args: argparse.Namespace) -> int:
    with store_for(args) as store:
        report = store.events.verify(args.run)  # Run.verify, without loading the builder
    if args.json:
        from contextfold.domain.command_outputs import VerifyOutput

        shown = VerifyOutput(run_id=args.run, ok=report.ok, events=report.events,
                             first_bad_position=report.first_bad_position, reason=report.reason,
                             head=report.head)
        _out(shown_json(json.dumps(shown.model_dump(mode="json"), ensure_ascii=False)))
        return 0 if report.ok else 3
    if report.ok:
        _out(f"ok: {report.events} events of {args.run!r}, hash chain intact")
        return 0
    # the reason may quote a tampered row's text: shown with its escapes (``visible``)
    sys.stderr.write(f"FAILED: {args.run!r} position {report.first_bad_position}: {visible(report.reason)}\n")
    return 3


register("verify", "recompute a run's hash chain, read back the artifacts it cites, and name the first event "
         "that does not match",
         _configure_verify, _handle_verify)


# ---------------------------------------------------------------- schema


def _events_schema() -> dict[str, Any]:
    from contextfold.domain.export_lines import event_line_schema

    return event_line_schema()


def _manifest_schema() -> dict[str, Any]:
    from contextfold.domain.manifest import ContextManifest

    return ContextManifest.model_json_schema()


def _output_schema(module: str, name: str) -> Callable[[], dict[str, Any]]:
    """The JSON Schema of the ``--json`` output model ``name`` of ``module``, as the CLI writes it
    (serialization mode: a field left out when None is not required)."""
    def schema() -> dict[str, Any]:
        model = getattr(importlib.import_module(module), name)
        return model.model_json_schema(mode="serialization")  # type: ignore[no-any-return]
    return schema


def _runs_schema() -> dict[str, Any]:
    from pydantic import TypeAdapter

    from contextfold.domain.command_outputs import RunLine

    return TypeAdapter(tuple[RunLine, ...]).json_schema(mode="serialization")


_AUDIT_OUTPUTS = "contextfold.audit.outputs"
_COMMAND_OUTPUTS = "contextfold.domain.command_outputs"
SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "events": _events_schema, "manifest": _manifest_schema, "runs": _runs_schema,
    "verify": _output_schema(_COMMAND_OUTPUTS, "VerifyOutput"),
    "usage": _output_schema(_COMMAND_OUTPUTS, "UsageOutput"),
    "build": _output_schema(_COMMAND_OUTPUTS, "BuildOutput"),
    "compact": _output_schema(_COMMAND_OUTPUTS, "CompactOutput"),
    "audit": _output_schema(_AUDIT_OUTPUTS, "AuditOutput"),
    "audit-turn": _output_schema(_AUDIT_OUTPUTS, "AuditTurnOutput"),
    "why": _output_schema(_AUDIT_OUTPUTS, "WhyOutput"),
    "why-turns": _output_schema(_AUDIT_OUTPUTS, "WhyAcrossTurnsOutput"),
    "diff": _output_schema(_AUDIT_OUTPUTS, "DiffOutput"),
    "replay-verify": _output_schema(_AUDIT_OUTPUTS, "ReplayVerifyOutput"),
}
"""Each schema's models are imported when it is printed (the module docstring says why)."""

SCHEMA_HELP = """schemas (contextfold schema NAME):
  events         an event line of events --json (canonical event JSON, with recorded_at when it has a time;
                 --with-artifacts adds artifact lines)
  manifest       manifest --json, and the manifest of build/audit --turn
  runs           runs --json
  verify         verify --json
  usage          usage --json
  build          build --json
  compact        compact --json
  audit          audit --json (the run's summary)
  audit-turn     audit --turn N --json
  why            why --turn N --json
  why-turns      why --json without --turn (spans of turns)
  diff           diff --json
  replay-verify  replay --turn N --verify --json"""
"""The names ``schema`` takes, each with the output it describes (``schema --help``)."""


def _configure_schema(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = SCHEMA_HELP
    p.add_argument("name", choices=sorted(SCHEMAS), metavar="NAME",
                   help="which JSON Schema to print: " + ", ".join(sorted(SCHEMAS)))


def _handle_schema(args: argparse.Namespace) -> int:
    _out(json.dumps(SCHEMAS[args.name](), indent=2, sort_keys=True))
    return 0


register("schema", "print the JSON Schema of the canonical event JSON, the manifest, or a command's --json "
         "output (schema --help lists them)",
         _configure_schema, _handle_schema)


# ---------------------------------------------------------------- demo

def _configure_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", default="demo-fix-invoice",
                   help="run id to record the sample under (default: demo-fix-invoice; -2, -3, ... "
                        "when taken)")


register("demo", "record the bundled sample agent run, show it, verify its hash chain and build "
                 "its next request (anthropic), printing its manifest",
         _configure_demo, _Lazy("contextfold.cli_demo", "handle_demo"))


# ---------------------------------------------------------------- the commands of other modules
# Their flags are in ``cli_args``; each module is imported when its command runs.

register("build", "build the next request of a run (or rebuild --turn N) under a token budget",
         _args.configure_build, _Lazy("contextfold.cli_build", "_handle_build"))
register("manifest", "show what a request contains, layer by layer, and what was left out and why "
         "(the next request is previewed: nothing is written)",
         _args.configure_manifest, _Lazy("contextfold.cli_build", "_handle_manifest"))
register("replay", "rebuild exactly what the model saw at turn N; --verify checks the recorded hashes",
         _args.configure_replay, _Lazy("contextfold.cli_build", "_handle_replay"))
register("diff", "what entered, left, was truncated or replaced between two turns, with reasons",
         _args.configure_diff, _Lazy("contextfold.cli_diff", "_handle_diff"))
register("compact", "compact a run's history (mask old tool results, or summarize) by appending "
         "a history_compacted event",
         _args.configure_compact, _Lazy("contextfold.cli_compact", "_handle_compact"))
register("show", "print the raw content behind a ref a mask stub or summary cites (on a terminal, control "
         "characters shown as escapes and an artifact that is not text as one line naming it; piped, as "
         "stored; --out FILE writes its bytes)",
         _args.configure_show, _Lazy("contextfold.cli_show", "_handle_show"))
register("audit", "what the model saw: run summary, --turn N checked against the log, or --html report",
         _args.configure_audit, _Lazy("contextfold.cli_audit", "_handle_audit"))
register("usage", "record provider-reported token usage of a turn (calibrates later budgets)",
         _args.configure_usage, _Lazy("contextfold.cli_usage", "_handle_usage"))
register("why", "why a fragment, file, source or tool was kept or dropped at turn N, or at every recorded "
         "turn (the manifest's reason; for a tool not exposed, the decision re-derived from the log)",
         _args.configure_why, _Lazy("contextfold.cli_why", "_handle_why"))


# ---------------------------------------------------------------- main


EXIT_CODES = """exit codes:
  0  success
  1  a check found a difference (replay --verify, audit --turn), or why matched nothing
  2  bad input, not found (a turn with no record to check: replay --verify, audit --turn),
     a concurrent writer first (reload and retry), bad store URL,
     an output that cannot be written (--out, --html, or stdout: a full disk),
     a run a newer contextfold wrote to (upgrade to read it)
  3  integrity: stored data does not match its recorded hash
  4  store unavailable: unreachable, or busy: locked by another writer (retry later)
  5  store not writable: its disk is full or it is read-only (fix that, then retry)
  130  interrupted (nothing half-written)"""
"""What a script driving the command can tell apart: retry (4) from fix the storage (5) from
fix the input (2). Shown by ``--help``."""

STORE_HELP = ("store URL: sqlite:///path.db or postgresql://user@host:port/db[?schema=name]"
              "[&connect_timeout=seconds, default 5][&network_timeout=seconds, default 30]"
              "[&lock_timeout=seconds, default 30; also ?lock_timeout= on sqlite]"
              "[&pool_size=connections, default 10][&pool_timeout=seconds, default 60] "
              "(default: $CONTEXTFOLD_STORE, else sqlite:///contextfold.db here; only import and demo "
              "create a SQLite file, any other command on a path with no store is an error)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextfold", epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Event-sourced context builder for LLM agents: record runs, rebuild and audit "
                    "what the model saw.",
    )
    parser.add_argument("--store", default=None, type=nonempty("store URL"), help=STORE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (configure, _, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--store", default=argparse.SUPPRESS, type=nonempty("store URL"), help=STORE_HELP)
        configure(p)
    return parser


def _one_line(exc: BaseException | Warning | str) -> str:
    """An error's message on one line, as the exit code's line promises a script reading stderr:
    a server's error brings its ``DETAIL:`` line along (``?schema=pg_catalog``). Its control
    characters made visible: a message quotes its input (an event type, a key, a path), and an
    escape in a crafted file set the terminal's title or cleared its screen."""
    return visible(_LINE_BREAK.sub(" ", str(exc).strip()))


_LINE_BREAK = re.compile(r"\s*[\r\n]+\s*")


def _utf8_streams() -> None:
    """Write UTF-8 whatever the locale says: ``events --json`` under a latin-1 locale (or a
    ``PYTHONIOENCODING``) wrote an export the import then refused, and an emoji ended it with a
    traceback halfway through, leaving a file that imported part of the run. What contextfold
    prints is JSON, logs and requests: their bytes must not depend on the terminal."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and codecs.lookup(stream.encoding).name != "utf-8":
            stream.reconfigure(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    closed_streams_to_devnull()
    _utf8_streams()
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C: each write is one transaction, so none is left half-done
        return interrupted()


ONE_LINE_WARNINGS: tuple[tuple[str, str], ...] = (
    ("contextfold.projections.memo_budget", "MemoCeilingWarning"),
    ("contextfold.projections.render.validate", "SdkCheckSkippedWarning"),
)
"""Warnings of ours a command shows as one ``contextfold: warning:`` line when they are raised,
not as Python shows a warning (the file, line and source line it came from, which say nothing
to someone running a command). Any other warning is shown as Python shows it. Named by module
and class (:func:`one_line_warning`): importing the renderers to name one cost every command."""


def one_line_warning(category: type[Warning]) -> bool:
    """Whether ``category`` is one of ``ONE_LINE_WARNINGS``. A class whose module is not loaded
    was never raised, so the check imports nothing."""
    return any(issubclass(category, getattr(sys.modules[module], name))
               for module, name in ONE_LINE_WARNINGS if module in sys.modules)


def shown_in_one_line(message: Warning | str, category: type[Warning]) -> bool:
    """Write ``message`` as one ``contextfold: warning:`` line when ``category`` is one of
    ``ONE_LINE_WARNINGS`` (True), else write nothing (False: the caller shows it as Python does)."""
    if not one_line_warning(category):
        return False
    sys.stderr.write(f"contextfold: warning: {_one_line(message)}\n")
    return True


@contextlib.contextmanager
def _warnings_in_one_line() -> Iterator[None]:
    with warnings.catch_warnings():  # the filters and the display put back after the command
        python_shows = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
            if not shown_in_one_line(message, category):
                python_shows(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    _, handler, _ = COMMANDS[args.command]
    try:
        with _warnings_in_one_line(), _args.request_check(args):
            if getattr(args, "at", None) is not None:  # --at TIME: the turn it names (cli_at)
                from contextfold.cli_at import resolve_at

                resolve_at(args)
            code = handler(args)
        sys.stdout.flush()  # a full disk behind a short output shows here, not at exit as a traceback
        return code
    except IntegrityError as exc:
        sys.stderr.write(f"contextfold: integrity error: {_one_line(exc)}\n")
        return 3
    except (StoreUnavailableError, StoreNotWritableError) as exc:
        sys.stderr.write(f"contextfold: {type(exc).__name__}: {_one_line(exc)}\n")
        return 4 if isinstance(exc, StoreUnavailableError) else 5
    except ContextfoldError as exc:
        if isinstance(exc, RecordNotFoundError) and args.store:  # the build it suggests: on this store,
            exc = exc.on_store(_args.shown_store(args.store))  # its password masked
        sys.stderr.write(f"contextfold: {type(exc).__name__}: {_one_line(exc)}\n")
        for note in getattr(exc, "__notes__", ()):  # context a caller added on the way out
            sys.stderr.write(f"  {visible(note)}\n")
        return 2
    except BrokenPipeError:  # pragma: no cover - `contextfold events X | head`
        return 0
    except OSError as exc:  # stdout refused (disk full): exit 2 as --out /dev/full, not 1 ("a difference")
        if not stdout_failed(exc):
            raise
        stdout_to_devnull()
        reason = visible(exc.strerror or str(exc))
        sys.stderr.write(f"contextfold: InvalidInputError: cannot write stdout: {reason}\n")
        return 2

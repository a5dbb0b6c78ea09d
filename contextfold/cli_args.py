"""The flags of the commands that build, audit and compact: declared here, apart from the code that
runs them, so that ``contextfold --help`` or ``contextfold runs`` builds its parser without
importing the builder, the renderers, the manifest models and tiktoken (~0.4 s of each
command's start, when ``cli`` imported every command's module to read its flags).

Which commands output a request body, and so check it against the SDK's types, is said here too
(:data:`REQUEST_BODY_SHOWN`): it is a matter of their flags.

What this module imports stays light (the standard library, ``cli_files``): a test checks that
a command that needs no builder loads none (``tests/unit/test_cli_light_imports.py``).
``PROVIDER_CHOICES`` restates ``domain.manifest.BUILD_PROVIDERS`` for that reason (a test keeps
the two equal). Each command's module (``cli_build``, ``cli_audit``...) is imported by its
handler when it runs (``cli.register``).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from contextfold.cli_files import nonempty, nonnegative
from contextfold.store.limits import StoreLimits

if TYPE_CHECKING:
    from contextfold.rebuild_api import RecordChoice

__all__ = ["AT_HELP", "EXCLUDED_SHOWN", "IMPORT_FORMATS", "PROVIDER_CHOICES", "RECORD_CHECK_HELP",
           "RECORD_HELP", "REQUEST_BODY_SHOWN", "build_args", "config_args", "configure_audit",
           "configure_build", "configure_compact", "configure_diff", "configure_import",
           "configure_manifest", "configure_replay", "configure_show", "configure_usage", "configure_why",
           "excluded_count", "record_choice", "request_check", "shown_store", "turn_or_time"]

PROVIDER_CHOICES: tuple[str, ...] = ("neutral", "openai-chat", "openai-responses", "anthropic", "gemini")
"""``contextfold.domain.manifest.BUILD_PROVIDERS``, restated: importing the manifest models costs
every command its pydantic import (a test keeps the two equal)."""


IMPORT_FORMATS = ("openai-chat", "anthropic", "openhands", "events", "openai-responses", "gemini",
                  "swe-agent")
"""``contextfold.importers.FORMATS``, restated: importing the parsers costs every command ~20 ms
(a test keeps the two equal)."""


def configure_import(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=nonempty("path"),
                   help="file to import, - for standard input, or a folder: every trace under it "
                        "(each file a run RUN/<path without extension>, all in one transaction; "
                        "JSON of no known format, such as SWE-agent's preds.json, is skipped; an "
                        "OpenHands session kept one file per event, sessions/<id>/events/<n>.json "
                        "or the V1 SDK's <conversation>/events/event-NNNNN-<uuid>.json, is one run "
                        "RUN/<its folders>)")
    p.add_argument("--run", required=True,
                   help="run id, new to the store (a taken id is RunExistsError: exit 2, nothing "
                        "written; unless the file is an 'events --json --with-artifacts' export of "
                        "that very log: the artifacts it cites that the store lost are written back); "
                        "a multi-run file imports as RUN/<n>")
    p.add_argument("--format", choices=IMPORT_FORMATS, default=None,
                   help="input format (default: detected from the content)")
    p.add_argument("--max-bytes", type=_byte_count, default=StoreLimits().max_import_bytes, metavar="N",
                   help="refuse a source longer than N bytes before parsing it (default: "
                        f"{StoreLimits().max_import_bytes} = 256 MiB, StoreLimits.max_import_bytes); "
                        "a folder's files count together")
    p.add_argument("--glob", action="append", metavar="PATTERN",
                   help="in a folder, import the files whose name matches PATTERN (repeatable; "
                        "default: *.traj, *.json and *.jsonl)")


def _byte_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of bytes: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


RECORD_HELP = ("which of the turn's context_built records to read: first, last, or K (1-based, in log "
               "order). A turn holds several when it was built again (e.g. after a compaction); "
               "default: the first, the one replay --verify checks, or for a turn without a record "
               "the request rebuilt from the log. A record the turn does not have is "
               "RecordNotFoundError (exit 2)")


RECORD_CHECK_HELP = ("which of the turn's context_built records to check: first, last, or K (1-based, in "
                     "log order); default: the first. A turn holds several when it was built again, e.g. "
                     "smaller after the provider refused the first request as too long: the last is the "
                     "one sent. A record the turn does not have is RecordNotFoundError (exit 2)")


def record_choice(text: str) -> RecordChoice:
    """An argparse ``type``: ``first``, ``last`` or a 1-based index (a usage error otherwise)."""
    word = text.strip().lower()
    if word in ("first", "last"):
        return "first" if word == "first" else "last"
    if word.isdigit() and int(word) >= 1:
        return int(word)
    raise argparse.ArgumentTypeError(f"{text!r} is not one: give first, last or a number from 1")


record_choice.__name__ = "record"  # argparse names the type in "invalid record value"


AT_HELP = ("the turn whose request was the last one built at or before TIME, instead of --turn N: "
           "ISO 8601, e.g. 2026-12-07T14:03:00Z, 2026-12-07T16:03+02:00, or 2026-12-07 14:03 (a time "
           "without a zone is UTC). A turn's request was built at its context_built record's time, or "
           "for a turn without a record (an imported trace) after the last event before its model "
           "response. The turn chosen, and why, is said on stderr; a time before the run's first "
           "request, or a run whose events carry no times, is TimeNotInRunError (exit 2)")


def turn_or_time(p: argparse.ArgumentParser, *, required: bool = False) -> argparse._MutuallyExclusiveGroup:
    """The group ``--turn`` is added to, with ``--at TIME`` beside it (one or the other:
    both is a usage error, exit 2). ``--at`` is turned into ``--turn`` before the command runs
    (:mod:`contextfold.cli_at`), so each command reads ``args.turn`` as before."""
    group = p.add_mutually_exclusive_group(required=required)
    group.add_argument("--at", default=None, metavar="TIME", type=nonempty("time"), help=AT_HELP)
    return group


def build_args(p: argparse.ArgumentParser, *, live: bool = True) -> None:
    """The flags of a build; without ``live`` (``manifest``), no ``--retries``: its look at the
    next request writes nothing, so it never conflicts."""
    p.add_argument("run", help="run id")
    turn_or_time(p).add_argument("--turn", type=int, default=None, metavar="N",
                   help="rebuild turn N (the request that produced the N-th model response; the "
                        "turn not answered yet, until it is built, is the next request, previewed); "
                        "default: the next request" + ("" if live else ", previewed: nothing is written "
                                                       "(build records it). A past turn without a "
                                                       "context_built record is rebuilt with the nearest "
                                                       "record's settings, the flags given replacing them; "
                                                       "one with a record, with its own"))
    p.add_argument("--provider", choices=PROVIDER_CHOICES, default=None,
                   help="request format (default: neutral message list)")
    p.add_argument("--model", default=None, type=nonempty("model name"),
                   help="model name (default: the run's)")
    p.add_argument("--window", type=int, default=None, metavar="TOKENS",
                   help="the model's context window in tokens (default: 128000)")
    p.add_argument("--reserve", type=int, default=None, metavar="TOKENS",
                   help="tokens of the window kept free for the model's output, tool calls and a "
                        "safety margin; the request gets window - reserve (default: 8000, or a "
                        "quarter of a window under 32000)")
    if not live:
        p.set_defaults(retries=0)  # a rebuild of a past turn never conflicts
        return
    p.add_argument("--retries", type=int, default=0, metavar="N",
                   help="a live build that another writer beat to the run's end (it appended while "
                        "this one built) catches up and builds again, up to N more times, before "
                        "the ConcurrencyConflictError reaches you (default 0); nothing is written "
                        "by an attempt that lost")


def configure_build(p: argparse.ArgumentParser) -> None:
    build_args(p)
    p.add_argument("--json", action="store_true", help='print {"request": ..., "manifest": ...}')
    p.add_argument("--out", default=None, type=nonempty("path"), metavar="PATH",
                   help="write the request body (JSON) to this file instead of printing it")


def configure_manifest(p: argparse.ArgumentParser) -> None:
    build_args(p, live=False)
    p.add_argument("--record", type=record_choice, default=None, metavar="WHICH",
                   help="with --turn N: show that context_built record's manifest as it was recorded "
                        "(first, last, or K: 1-based, in log order) instead of turn N rebuilt from the "
                        "log, which reproduces the first (build flags beside it are refused). A turn "
                        "holds several records when it was built again (e.g. after a compaction): "
                        "without --record the output says how many. A record the turn does not "
                        "have is RecordNotFoundError (exit 2)")
    p.add_argument("--json", action="store_true", help="print the manifest JSON")
    p.add_argument("--excluded", type=excluded_count, default=EXCLUDED_SHOWN, metavar="N|all",
                   help=f"list the newest N excluded fragments of each reason (default "
                        f"{EXCLUDED_SHOWN}; 'all' lists every one); the counts and token sums are "
                        "always whole, and --json has every line")


def configure_replay(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id")
    turn_or_time(p, required=True).add_argument("--turn", type=int, default=None, metavar="N",
                   help="the turn to rebuild: the request that produced the N-th model response (with "
                        "its first record's settings; a past turn without a record is rebuilt with the "
                        "nearest record's and, without --verify, recorded as a rebuild, which the "
                        "command says)")
    p.add_argument("--verify", action="store_true",
                   help="compare with the turn's first context_built record (--record: another) instead "
                        "of printing the request; exit 1 on a difference, 2 when the turn has no such "
                        "record, 3 when the log or an artifact it cites is damaged (e.g. replay RUN "
                        "--turn 3 --verify)")
    p.add_argument("--record", type=record_choice, default=None, metavar="first|last|K",
                   help=f"with --verify: {RECORD_CHECK_HELP}")
    p.add_argument("--json", action="store_true",
                   help="with --verify: print the verdict as JSON (schema replay-verify: ok, the record "
                        "checked, both hashes, the differences); the exit codes are the same")


def configure_diff(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id")
    p.add_argument("a", type=int, help="first turn (a past turn without a record is rebuilt from the log, "
                                         "and recorded, under the other turn's recorded settings; the turn "
                                         "not answered yet is previewed; the diff lists settings that "
                                         "differ as 'built differently')")
    p.add_argument("b", type=int, help="second turn (may be A again, to diff two records of one turn)")
    p.add_argument("--record-a", type=record_choice, default=None, metavar="WHICH",
                   help="turn A's record: " + RECORD_HELP)
    p.add_argument("--record-b", type=record_choice, default=None, metavar="WHICH",
                   help="turn B's record, as --record-a (e.g. diff RUN 6 6 --record-b last: what a "
                        "later build of turn 6 changed)")
    p.add_argument("--json", action="store_true", help="print JSON")


def configure_compact(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id")
    p.add_argument("--strategy", choices=("mask", "summary"), default="mask",
                   help="mask old tool results (cheap) or summarize old history (default: mask)")
    p.add_argument("--window", type=int, default=None, metavar="TOKENS",
                   help="compact until a build at this window fits (mask first, then summary "
                        "if --strategy summary; when even that does not fit, exit 2 and append "
                        "nothing); default: one compaction at the widest legal cut")
    p.add_argument("--reserve", type=int, default=None, metavar="TOKENS",
                   help="with --window: tokens kept free for the output (default: 8000, or a "
                        "quarter of a window under 32000)")
    p.add_argument("--keep-recent", type=int, default=3, metavar="N",
                   help="the newest N tool call groups stay raw (default: 3)")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would be appended and append nothing")
    p.add_argument("--json", action="store_true", help="print the events as JSON")


def configure_show(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", nargs="?", metavar="RUN",
                   help="run id; optional when the ref names its run (event://, events://, call://) or "
                        "is an artifact:HASH")
    p.add_argument("ref", metavar="REF",
                   help="event://RUN/POS, events://RUN/A-B, call://RUN/ID@POS (as a summary or mask stub "
                        "cites them), artifact:HASH, or with RUN a bare POS / A-B or a manifest's "
                        "fragment id (e27: the event logged at 27; a mask's stub e32.c4: the event it "
                        "stands for); with RUN, a ref may "
                        "name the run the log was recorded under before an import renamed it")
    p.add_argument("--out", default=None, type=nonempty("path"), metavar="FILE",
                   help="write what REF holds to FILE instead of printing it: an artifact's bytes as "
                        "stored (an image, a video), wherever stdout goes; on a terminal an artifact "
                        "that is not text is one line naming it (its media type, size, length, hash); "
                        "text is written masked as it is printed, unless --reveal")
    p.add_argument("--reveal", action="store_true",
                   help="show text raw, as logged; by default a secret it holds (an API key, a token, a "
                        "password: the rules the builder redacts requests with) is shown as "
                        "[REDACTED:<rule>], printed or written with --out, so it can be pasted into a "
                        "ticket (a medium's bytes are never changed)")


def config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--provider", choices=PROVIDER_CHOICES, default=None,
                   help="for turns without a record: request format (default: the nearest record's; a "
                        "recorded turn keeps its own: another value beside its --turn is refused)")
    p.add_argument("--window", type=int, default=None, metavar="TOKENS",
                   help="for turns without a record: window (default: the nearest record's; a recorded "
                        "turn keeps its own: another value beside its --turn is refused)")
    p.add_argument("--reserve", type=int, default=None, metavar="TOKENS",
                   help="for turns without a record: reserve (default: the nearest record's; a recorded "
                        "turn keeps its own: another value beside its --turn is refused)")


def configure_audit(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id")
    turn_or_time(p).add_argument(
        "--turn", type=int, default=None, metavar="N",
        help="what exactly the model saw at turn N, re-derived and checked against the record: "
             "exit 0 it matches, 1 it differs, 2 the turn has no record (shown, but not "
             "checked: as replay --verify), 3 the log is damaged (default: a summary of "
             "every turn)")
    p.add_argument("--html", default=None, metavar="PATH", type=nonempty("path"),
                   help="write the self-contained HTML report here")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--content", action="store_true",
                   help="with --turn: also print the request body (the content the model saw); "
                        "by default an audit shows hashes, refs, sizes and reasons only")
    p.add_argument("--excluded", type=excluded_count, default=argparse.SUPPRESS, metavar="N|all",
                   help=f"with --turn: list the newest N excluded fragments of each reason (default "
                        f"{EXCLUDED_SHOWN}; 'all' lists every one), as manifest does")
    p.add_argument("--record", type=record_choice, default=None, metavar="first|last|K",
                   help=f"with --turn: {RECORD_CHECK_HELP}")
    config_args(p)


def configure_usage(p: argparse.ArgumentParser) -> None:
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
    p.add_argument("--json", action="store_true",
                   help="print what was recorded as JSON (schema usage): position, tokens, the turn's "
                        "estimate and the ratio, warnings")
    p.add_argument("--force", action="store_true",
                   help="record input tokens over 4x the turn's estimate (refused by default as a run's "
                        "total; provider-side tools such as web search can report that much)")


def configure_why(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run id")
    turn_or_time(p).add_argument("--turn", type=int, default=None, metavar="N",
                   help="the turn to explain (default: every recorded turn, each turn's first record, "
                        "turns with the same answer as one range: which requests held a call's result, "
                        "whole, cut, dropped or compacted; ids, tool names and sources only)")
    p.add_argument("query", metavar="FRAGMENT_OR_SOURCE",
                   help="fragment id (e12), tool name, or a source_ref / file path substring; when "
                        "none matches, words the logged text holds (any case: a constraint's), "
                        "answered with the fragments of the events that hold them")
    p.add_argument("--record", type=record_choice, default=None, metavar="WHICH", help=RECORD_HELP)
    p.add_argument("--json", action="store_true", help="print JSON (schema why; without --turn, why-turns)")
    p.add_argument("--reveal", action="store_true",
                   help="show sources, reasons and details raw; by default a secret they hold (a "
                        "password in a URL, a token in a stand-in's text: the rules the builder redacts "
                        "requests with) is shown as [REDACTED:<rule>], in the text and --json alike")
    config_args(p)


EXCLUDED_SHOWN = 20
"""Excluded fragments the table lists per reason unless asked for all (``--excluded all``)."""


def excluded_count(text: str) -> int | None:
    """``--excluded``: a number of fragments per reason, or ``all`` (None)."""
    return None if text == "all" else nonnegative(text, "a number >= 0 or 'all'")


def shown_store(url: str) -> str:
    """The ``--store`` a command suggested in an error names: the URL given, its password masked
    (a line on standard error is often logged). Imports the store's URL parsing when called, on
    an error's way out, not with the flags."""
    from contextfold.store.store_url import display_url

    return display_url(url)


REQUEST_BODY_SHOWN: dict[str, Callable[[argparse.Namespace], bool]] = {
    "build": lambda args: True,  # printed, --json, or --out
    "replay": lambda args: not args.verify,  # --verify says whether the hashes match
    "audit": lambda args: bool(args.content),  # --turn N --content prints it
}
"""The commands that output a request body (or with which flags): only they check it against the
provider's official SDK types (importing that SDK: ~1-1.3 s of CPU for anthropic's). Every other
command shows a manifest, a table, a summary or a verdict (``manifest``, ``audit``, ``why``,
``diff``, ``demo``), renders its requests checked against the protocol rules alone
(:mod:`contextfold.projections.sdk_check`), and says no ``SdkCheckSkippedWarning``. The bytes and
hashes of a request are the same either way: the check only refuses. The library's builds keep it."""


def request_check(args: argparse.Namespace) -> contextlib.AbstractContextManager[None]:
    """The SDK check off for a command that outputs no request body (:data:`REQUEST_BODY_SHOWN`)."""
    shows = REQUEST_BODY_SHOWN.get(args.command)
    if shows is not None and shows(args):
        return contextlib.nullcontext()
    from contextfold.projections.sdk_check import sdk_types_unchecked

    return sdk_types_unchecked()

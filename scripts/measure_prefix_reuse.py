"""How much of each turn's request a provider's prompt cache can reuse from the turn before.

Why: providers cache a request's longest unchanged opening (OpenAI and Gemini by themselves,
Anthropic up to its ``cache_control`` breakpoints), and an agent runtime pays full price for
every byte from the first one that changed. This script replays runs as an agent loop does (the
log's events appended one by one, a live build before each model response, on one ``Run`` so
the caches across builds are exercised) and measures, per provider and window:

- ``reuse``: the bytes two consecutive requests share from their start, over the earlier one's
  size, with each request laid out in the order the provider caches it (tools, then the system
  prompt, then the messages; Anthropic's ``cache_control`` marks left out, since they are not
  content), summed over all turns;
- ``breaks``: turns whose request does not open with the whole of the last one (less than all
  but its closing brackets in common): something before the end changed;
- ``key changes``: turns whose manifest ``cache_key`` differs from the turn before, and
  ``key lies``: turns whose key is the same while the bytes it covers (tools, system) are not;
- ``failed builds``: turns whose build raised (a ``ContextfoldError``, such as a
  RequiredContextExceedsBudgetError at a small window), by error type. Such a turn sends no
  request: it is counted and the measure goes on, the next request compared with the last one
  sent (stopping at the first one left every provider and window after it unmeasured);
- with ``--anthropic-cache``: the share of the Anthropic request bytes a cache would serve,
  simulating its rules (a prefix is written at each breakpoint and read at a breakpoint or up to
  20 blocks before one; entries never expire within a run).

Runs come from a store (``--store``, its runs or those under ``--prefix``). ``--tools FILE``
registers a JSON list of tool specs before the first user input of each run (a trace such as
tau-bench's does not log its toolkit); ``--max-tools`` sets the build's cap.

    contextfold --store sqlite:///tau.db import \\
        ../shared/traces/tau-bench-gpt4o-airline/gpt-4o-airline.json --run tau
    .venv/bin/python scripts/measure_prefix_reuse.py --store sqlite:///tau.db --prefix tau/ --limit 40 \\
        --windows 3000,8000,200000 --providers anthropic,openai-chat --anthropic-cache
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextfold import open_store
from contextfold.domain.errors import ContextfoldError
from contextfold.domain.events import AnyEvent, ModelResponse, ToolSpec, ToolsRegistered, UserInput
from contextfold.domain.manifest import BuildConfig

__all__ = ["main", "replay_logs"]

CACHE_ORDER = {
    "anthropic": ("tools", "system", "messages"),
    "openai-chat": ("tools", "messages"),
    "openai-responses": ("tools", "instructions", "input"),
    "gemini": ("tools", "systemInstruction", "contents"),
    "neutral": ("tools", "system", "messages"),
}
"""Where each provider's cache starts: the tools come first in every provider's prompt."""
PREFIX_KEYS = ("tools", "system", "instructions", "systemInstruction")
"""The body members the cache key covers (with the leading system messages of OpenAI Chat)."""
LOOKBACK = 20
CLOSING = 8
"""Bytes at a request's end that the next one never shares (closing brackets)."""


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def _dump(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def cache_stream(provider: str, body: dict[str, Any]) -> bytes:
    """The body's members in the provider's cache order, marks left out."""
    return b"\x00".join(_dump(_unmarked(body[k])) for k in CACHE_ORDER[provider] if k in body)


def covered(body: dict[str, Any]) -> bytes:
    parts = [body.get(k) for k in PREFIX_KEYS]
    for key in ("messages", "input"):
        for message in body.get(key) or []:
            if not (isinstance(message, dict) and message.get("role") in ("system", "developer")):
                break
            parts.append(message)
    return _dump(_unmarked(parts))


def common_prefix(a: bytes, b: bytes) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def anthropic_cached_share(bodies: Iterable[dict[str, Any]]) -> tuple[int, int]:
    """(bytes a simulated Anthropic cache serves, bytes sent) over one run's requests."""
    cache: set[str] = set()
    served = sent = 0
    for body in bodies:
        blocks = [*body.get("tools", []), *body.get("system", [])]
        for message in body["messages"]:
            blocks.extend({"role": message["role"], **b} for b in message["content"])
        digest, hashes, ends = hashlib.sha256(), [], [0]
        for block in blocks:
            text = _dump(_unmarked(block))
            digest.update(text)
            hashes.append(digest.copy().hexdigest())
            ends.append(ends[-1] + len(text))
        marks = [i for i, b in enumerate(blocks) if "cache_control" in b]
        best = 0
        for mark in marks:
            hit = next((j for j in range(mark, max(-1, mark - LOOKBACK - 1), -1) if hashes[j] in cache), None)
            if hit is not None:
                best = max(best, ends[hit + 1])
        cache.update(hashes[m] for m in marks)
        served += best
        sent += ends[-1]
    return served, sent


@dataclass
class Totals:
    turns: int = 0
    shared: int = 0
    earlier: int = 0
    breaks: int = 0
    key_changes: int = 0
    key_lies: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    """Error type -> builds that raised it (no request: not compared)."""
    served: int = 0
    sent: int = 0
    worst: list[tuple[float, str, int]] = field(default_factory=list)


def measure_run(events: list[AnyEvent], run_id: str, provider: str, window: int, max_tools: int | None,
                scratch: Any, totals: Totals, anthropic_cache: bool) -> None:
    run = scratch.run(f"{provider}/{window}/{run_id}")
    config = BuildConfig(provider=provider, window=window,
                         **({"max_tools": max_tools} if max_tools is not None else {}))
    last: tuple[bytes, str, bytes] | None = None
    bodies = []
    done = 0
    for i, event in enumerate(events):
        if not isinstance(event, ModelResponse):
            continue
        run.append(events[done:i])
        done = i
        try:
            built = run.build(config=config)
        except ContextfoldError as exc:  # no request this turn: the next is compared with the last sent
            name = type(exc).__name__
            totals.failed[name] = totals.failed.get(name, 0) + 1
            continue
        body = built.request
        if anthropic_cache:
            bodies.append(body)
        now = (cache_stream(provider, body), built.manifest.cache_key, covered(body))
        if last is not None:
            shared = common_prefix(last[0], now[0])
            totals.turns += 1
            totals.shared += shared
            totals.earlier += len(last[0])
            if shared < len(last[0]) - CLOSING:
                totals.breaks += 1
                totals.worst.append((shared / len(last[0]), run_id, built.manifest.turn))
            totals.key_changes += last[1] != now[1]
            totals.key_lies += last[1] == now[1] and last[2] != now[2]
        last = now
    run.append(events[done:])
    if anthropic_cache:
        served, sent = anthropic_cached_share(bodies)
        totals.served += served
        totals.sent += sent


def _with_tools(events: list[AnyEvent], tools: tuple[ToolSpec, ...]) -> list[AnyEvent]:
    at = next((i for i, e in enumerate(events) if isinstance(e, UserInput)), len(events))
    return [*events[:at], ToolsRegistered(tools=tools), *events[at:]]


@contextmanager
def replay_logs(store: str, prefix: str, limit: int | None, tools_file: Path | None
                ) -> Iterator[tuple[dict[str, list[AnyEvent]], Any]]:
    """The events of ``store``'s runs under ``prefix`` (at most ``limit``, None: all), with
    ``tools_file``'s specs registered before each run's first user input, and a scratch SQLite
    store to replay them into as an agent loop does. Shared with ``measure_tool_recall.py``."""
    tools = (tuple(ToolSpec.model_validate(t) for t in json.loads(tools_file.read_text()))
             if tools_file else ())
    with open_store(store, create_schema=False) as source, tempfile.TemporaryDirectory() as tmp:
        runs = [r.run_id for r in source.runs() if r.run_id.startswith(prefix)][:limit]
        logs = {rid: [r.event for r in source.run(rid).events()] for rid in runs}
        if tools:
            logs = {rid: _with_tools(events, tools) for rid, events in logs.items()}
        with open_store(f"sqlite:///{tmp}/scratch.db") as scratch:
            yield logs, scratch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True, help="store URL holding the runs (e.g. imported traces)")
    ap.add_argument("--prefix", default="", help="only runs whose id starts with this")
    ap.add_argument("--limit", type=int, default=40, help="at most this many runs")
    ap.add_argument("--providers", default="anthropic,openai-chat,openai-responses,gemini,neutral")
    ap.add_argument("--windows", default="3000,8000,200000")
    ap.add_argument("--max-tools", type=int, default=None)
    ap.add_argument("--tools", type=Path, default=None, help="JSON list of tool specs to register")
    ap.add_argument("--anthropic-cache", action="store_true", help="simulate Anthropic's cache too")
    ap.add_argument("--show", type=int, default=0, help="list this many of the worst turns")
    args = ap.parse_args(argv)
    with replay_logs(args.store, args.prefix, args.limit, args.tools) as (logs, scratch):
        for window in map(int, args.windows.split(",")):
            for provider in args.providers.split(","):
                totals = Totals()
                for rid, events in logs.items():
                    measure_run(events, rid, provider, window, args.max_tools, scratch, totals,
                                args.anthropic_cache and provider == "anthropic")
                line = (f"{provider:16} window {window:>7}: {len(logs)} runs, {totals.turns} turns; "
                        f"reuse {totals.shared / max(totals.earlier, 1):6.1%}; "
                        f"breaks {totals.breaks}; key changes {totals.key_changes}; "
                        f"key lies {totals.key_lies}; failed builds {sum(totals.failed.values())}")
                if totals.failed:
                    line += " (" + ", ".join(f"{k} {n}" for k, n in sorted(totals.failed.items())) + ")"
                if totals.sent:
                    line += f"; Anthropic cache serves {totals.served / totals.sent:.1%}"
                print(line, flush=True)
                for share, rid, turn in sorted(totals.worst)[:args.show]:
                    print(f"    {rid} turn {turn}: {share:.0%} reused")
    return 0


if __name__ == "__main__":
    sys.exit(main())

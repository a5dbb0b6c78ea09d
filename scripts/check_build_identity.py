#!/usr/bin/env python3
"""Record or check the hashes of many builds: a guard for build-speed work.

Why: a build's request, manifest and hashes are part of the log (the
ContextBuilt record, ``replay --verify``), so an optimisation of the builder
must not change a single byte of them. This script builds, on ONE state per
run folded incrementally (so caches that live across builds are exercised),
every turn of

- the sample run (``contextfold.cli_demo.sample_events()``),
- the first N tau-bench gpt-4o airline runs (``../shared/traces``, imported
  with ``contextfold.importers.iter_runs``),
- a seeded synthetic run that touches the rarer paths: parallel calls, lost
  and cancelled calls, a late result, secrets (redaction), artifact-backed
  payloads (``load_text``), images, superseded file reads, duplicate
  evidence, memory, hand-off notes, failing logs (lean truncation), JSON
  results, and mask and summary compactions,

for 4 providers x 2 budgets, and records per build the request hash, the
cache key and the blake3 of the manifest JSON (as written to the log).

Usage:
  .venv/bin/python scripts/check_build_identity.py --record /tmp/identity.json
  .venv/bin/python scripts/check_build_identity.py --check /tmp/identity.json
The check exits 1 and names the first differing builds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import blake3

from contextfold.api import render_request
from contextfold.cli_demo import sample_events
from contextfold.domain.events import (
    AnyEvent,
    ArtifactRef,
    CompactionSummary,
    EvidenceRetrieved,
    FileRead,
    HandOff,
    HistoryCompacted,
    ImageBlock,
    InstructionSet,
    MemoryRecalled,
    ModelResponse,
    PolicySet,
    TextBlock,
    ToolCall,
    ToolCallCancelled,
    ToolResult,
    ToolResultLost,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import iter_runs
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event, new_state

PROVIDERS = ("neutral", "openai-chat", "anthropic", "gemini")
WINDOWS = ((4_000, 1_000), (129_000, 1_000))
TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", Path(__file__).resolve().parents[2] / "shared" / "traces"))
ARTIFACTS: dict[str, str] = {}


def _artifact(text: str) -> ArtifactRef:
    digest = blake3.blake3(text.encode()).hexdigest()
    ARTIFACTS[digest] = text
    return ArtifactRef(hash=digest, size=len(text.encode()))


def _load_text(ref: ArtifactRef) -> str:
    return ARTIFACTS[ref.hash]


def synthetic_events(seed: int = 11, rounds: int = 60) -> list[AnyEvent]:
    """A run that exercises the builder's rarer paths (see the module docstring)."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "error", "ok", "file", "read", "write", "build", "test",
             "deploy", "queue", "cache"]

    def prose(n: int) -> str:
        return " ".join(rng.choice(words) for _ in range(n))

    def failing_log(lines: int) -> str:
        out = [f"step {i}: {prose(6)}" for i in range(lines)]
        out[lines // 3] = "Traceback (most recent call last):\n  File 'x.py', line 3\nValueError: boom"
        return "\n".join(out) + "\nFAILED tests/test_x.py::test_y\nexit 1"

    ev: list[AnyEvent] = [
        PolicySet(text="You are a careful agent. Never leak credentials.", pinned_tools=("read",)),
        InstructionSet(text="AGENTS.md: run tests before committing.\n" + prose(40),
                       source_ref="file://AGENTS.md"),
    ]
    call = 0
    for r in range(rounds):
        ev.append(UserInput(content=(TextBlock(text=prose(rng.randint(5, 40))),), required=r % 17 == 3))
        if r % 9 == 4:
            ev.append(UserInput(content=(TextBlock(text="see this"),
                                 ImageBlock(url="https://example.com/shot.png", media_type="image/png",
                                            width=800, height=600))))
        n = rng.choice((1, 1, 2, 3))
        ids = [f"c{call + i}" for i in range(n)]
        call += n
        names = [rng.choice(("read", "run", "search", "query")) for _ in ids]
        ev.append(ModelResponse(text=prose(rng.randint(0, 12)), tool_calls=tuple(
            ToolCall(call_id=c, name=nm, arguments=json.dumps({"q": prose(3)})) for c, nm in
            zip(ids, names, strict=True))))
        for c in ids:
            kind = rng.randrange(9)
            if kind == 0:
                ev.append(ToolResultLost(call_id=c, reason="worker died"))
                if rng.random() < 0.5:
                    ev.append(ToolResult(call_id=c, content="late: " + prose(20)))
            elif kind == 1:
                ev.append(ToolCallCancelled(call_id=c, reason="timeout"))
            elif kind == 2:
                ev.append(ToolResult(call_id=c, content=failing_log(rng.randint(50, 400)),
                                     is_error=True, exit_code=1))
            elif kind == 3:
                ev.append(ToolResult(call_id=c, content=json.dumps(
                    {"rows": [{"id": i, "v": prose(5)} for i in range(rng.randint(5, 120))]})))
            elif kind == 4:
                big = failing_log(rng.randint(200, 800)) + "\naws key AKIAIOSFODNN7ABCDEFG here"
                ev.append(ToolResult(call_id=c, content="(artifact)", artifact=_artifact(big),
                                     exit_code=0))
            elif kind == 5:
                ev.append(ToolResult(call_id=c, content=f"token ghp_{'a1B2' * 9} and " + prose(30),
                                     origin="workspace"))
            elif kind == 6:
                ev.append(ToolResult(call_id=c, content="screenshot", blocks=(
                    ImageBlock(url="https://example.com/r.png", media_type="image/png", width=1600,
                               height=1200),)))
            else:
                ev.append(ToolResult(call_id=c, content=prose(rng.randint(10, 300))))
        if r % 5 == 2:
            path = rng.choice(("src/a.py", "src/b.py"))
            ev.append(FileRead(path=path, content="\n".join(prose(8) for _ in range(rng.randint(5, 60))),
                               revision=f"r{r // 10}", start_line=1 if r % 2 else None,
                               end_line=40 if r % 2 else None))
        if r % 7 == 1:
            text = prose(30)
            ev.append(EvidenceRetrieved(content=text, source_ref=f"https://docs/{r % 3}"))
            ev.append(EvidenceRetrieved(content=text, source_ref=f"https://mirror/{r}", origin="workspace"))
        if r % 11 == 5:
            ev.append(MemoryRecalled(memory_id=f"m{r % 2}", content=prose(15) + " password=hunter2secret",
                                     source_ref=f"mem://{r % 2}"))
        if r % 13 == 6:
            ev.append(HandOff(from_agent="a", to_agent="b", note=prose(10)))
        ev.append(ModelResponse(text=prose(rng.randint(3, 25))))
        if r == 25:
            ev.append(HistoryCompacted(summary=CompactionSummary(goal="mask", next_action="go on"),
                                       covers_from=3, covers_to=len(ev) // 2, strategy="mask"))
        if r == 45:
            ev.append(HistoryCompacted(summary=CompactionSummary(
                goal="fix", decisions=("keep going",), constraints=("no secrets",)),
                covers_from=3, covers_to=len(ev) * 2 // 3, strategy="summary"))
    return ev


def runs(n_tau: int) -> Iterator[tuple[str, list[AnyEvent]]]:
    yield "sample", sample_events()
    yield "synthetic", synthetic_events()
    path = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
    tau = iter_runs(path.read_bytes(), format="openai-chat", source=str(path))
    for i, (suffix, events) in enumerate(tau):
        if i >= n_tau:
            break
        yield f"tau-{suffix or i}", events


def _digest(obj: Any) -> str:
    return blake3.blake3(json.dumps(obj, sort_keys=True, separators=(",", ":"),
                                    ensure_ascii=False).encode()).hexdigest()[:24]


def build_all(n_tau: int, every_event: bool) -> tuple[dict[str, list[str]], float, int]:
    """run id -> one line per build: ``turn/version/provider/window request cache manifest``."""
    out: dict[str, list[str]] = {}
    configs = [BuildConfig(provider=p, window=w, reserve=r) for p in PROVIDERS for w, r in WINDOWS]
    spent, builds = 0.0, 0
    for run_id, events in runs(n_tau):
        state = new_state(run_id)
        lines: list[str] = []
        pending = False
        for pos, event in enumerate(events, start=1):
            before_response = isinstance(event, ModelResponse)
            if pending and (before_response or every_event):
                for cfg in configs:
                    t0 = time.perf_counter()
                    try:
                        res = build_context(state, cfg, load_text=_load_text, render=render_request)
                    except Exception as exc:  # an error is an outcome too: it must not change
                        lines.append(f"{state.version}/{cfg.provider}/{cfg.window} "
                                     f"error {type(exc).__name__}: {exc}"[:300])
                        continue
                    spent += time.perf_counter() - t0
                    builds += 1
                    m = res.manifest
                    lines.append(f"{m.turn}/{m.log_version}/{cfg.provider}/{cfg.window} "
                                 f"{m.request_hash[:24]} {m.cache_key[:24]} "
                                 f"{_digest(m.model_dump(mode='json'))} "
                                 f"{blake3.blake3(m.model_dump_json().encode()).hexdigest()[:24]}")
            fold_event(state, RecordedEvent(run_id, pos, event, ""))
            pending = True
        # and the next request after the whole log
        for cfg in configs:
            res = build_context(state, cfg, load_text=_load_text, render=render_request)
            m = res.manifest
            lines.append(f"end/{m.log_version}/{cfg.provider}/{cfg.window} {m.request_hash[:24]} "
                         f"{_digest(m.model_dump(mode='json'))}")
        out[run_id] = lines
    return out, spent, builds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--record", type=Path)
    group.add_argument("--check", type=Path)
    ap.add_argument("--tau-runs", type=int, default=30)
    ap.add_argument("--every-event", action="store_true",
                    help="build after every event, not only before each model response")
    args = ap.parse_args()
    t0 = time.perf_counter()
    got, spent, builds = build_all(args.tau_runs, args.every_event)
    total = sum(len(v) for v in got.values())
    print(f"{total} builds over {len(got)} runs in {time.perf_counter() - t0:.1f} s "
          f"({spent / max(builds, 1) * 1000:.3f} ms per build inside build_context)")
    if args.record:
        args.record.write_text(json.dumps(got, indent=0))
        print(f"recorded to {args.record}")
        return 0
    want = json.loads(args.check.read_text())
    bad = 0
    for run_id in sorted(want.keys() | got.keys()):
        a, b = want.get(run_id, []), got.get(run_id, [])
        if a == b:
            continue
        bad += 1
        first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        print(f"DIFF {run_id}: build {first}\n  want {a[first] if first < len(a) else '(none)'}\n"
              f"  got  {b[first] if first < len(b) else '(none)'}")
    if bad:
        print(f"{bad} runs differ")
        return 1
    print("identical: every request hash, cache key and manifest hash matches")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Whether a pool of threads that always builds lets the cyclic GC collect generation 2.

Why: builds, folds and store reads pause the cyclic GC (``contextfold.domain.gc_pause``), and the
pause is counted for the process: the GC is off from the first pause to the last. A runtime's pool
of threads building back to back always has some pause open, so the collections that matter for
long-lived garbage (generation 2) must come from the pauses' ends, not from the GC itself. This
runs ``--threads`` threads folding and building the tau-bench airline runs back to back while the
main thread does what a runtime's own code does between builds: it makes agent objects that
reference each other, keeps the last ``--keep`` of them alive for a while (long enough to be
promoted to generation 2), then drops them. It prints, every ``--every`` seconds, the GC's counts,
how many collections of each generation ran, how many agents are still in memory (live ones plus
garbage not yet collected) and the process's RSS. A number of agents that keeps growing is cyclic
garbage that is never collected.

Usage:
  .venv/bin/python scripts/measure_gc_under_pool.py --seconds 60 --threads 4 [--mode rebuild]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import itertools
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextfold.api import render_request
from contextfold.domain.events import AnyEvent, ModelResponse
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import iter_runs
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event, new_state

TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", Path(__file__).resolve().parents[2] / "shared" / "traces"))
CONFIGS = (BuildConfig(provider="openai-chat", window=129_000, reserve=1_000),
           BuildConfig(provider="anthropic", window=8_000, reserve=1_000))

_made = itertools.count()
_freed = itertools.count()


class Agent:
    """A runtime's object in a cycle with its peer (only the cyclic GC frees it); counts its end."""

    def __init__(self, peer: Agent | None = None) -> None:
        next(_made)
        self.peer = peer if peer is not None else self
        self.notes = [{"turn": i} for i in range(4)]

    def __del__(self) -> None:
        next(_freed)


def count(counter: itertools.count[int]) -> int:
    """How many times ``counter`` was advanced (read without advancing it for good)."""
    return int(repr(counter)[6:-1])


def rss_mb() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 >> 20


def tau_runs() -> list[list[AnyEvent]]:
    path = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
    return [events for _, events in iter_runs(path.read_bytes(), format="openai-chat", source=str(path))]


def rebuilder(runs: list[list[AnyEvent]], offset: int, stop: threading.Event, builds: list[int]) -> None:
    """Fold a few runs once, then build them back to back: the pauses of 4 threads then overlap
    nearly always (a build is most of the loop)."""
    states = []
    for n in range(offset, offset + 4):
        state = new_state(f"run-{n}")
        for pos, event in enumerate(runs[n % len(runs)], start=1):
            fold_event(state, RecordedEvent(state.run_id, pos, event, ""))
        states.append(state)
    for n in itertools.count():
        if stop.is_set():
            return
        with contextlib.suppress(Exception):  # a window too small for a run is an outcome here
            build_context(states[n % len(states)], CONFIGS[n % 2], render=render_request)
        builds[0] += 1


def builder(runs: list[list[AnyEvent]], offset: int, stop: threading.Event, builds: list[int]) -> None:
    """Fold each run event by event and build before each model response, as a runtime does."""
    for n in itertools.count(offset):
        events = runs[n % len(runs)]
        state = new_state(f"run-{n}")
        for pos, event in enumerate(events, start=1):
            if stop.is_set():
                return
            if isinstance(event, ModelResponse):
                for cfg in CONFIGS:
                    with contextlib.suppress(Exception):  # a window too small for a turn is an outcome here
                        build_context(state, cfg, render=render_request)
                    builds[0] += 1
            fold_event(state, RecordedEvent(state.run_id, pos, event, ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--keep", type=int, default=20_000, help="agents kept alive before being dropped")
    ap.add_argument("--every", type=float, default=5)
    ap.add_argument("--mode", choices=("turns", "rebuild"), default="turns",
                    help="turns: fold and build turn by turn; rebuild: build folded runs back to back")
    args = ap.parse_args()
    runs = tau_runs()
    stop = threading.Event()
    builds = [0]
    work = builder if args.mode == "turns" else rebuilder
    threads = [threading.Thread(target=work, args=(runs, i * 7, stop, builds), daemon=True)
               for i in range(args.threads)]
    for t in threads:
        t.start()
    alive: collections.deque[Agent] = collections.deque(maxlen=args.keep)
    start = last = time.monotonic()
    print(f"{'t':>5} {'builds':>7} {'gc.get_count()':>18} {'collections g0/g1/g2':>22} "
          f"{'agents in memory':>17} {'RSS MB':>7}", flush=True)
    while (now := time.monotonic()) - start < args.seconds:
        a = Agent()
        b = Agent(a)
        a.peer = b
        alive.append(a)
        if now - last >= args.every:
            last = now
            stats = gc.get_stats()
            in_memory = count(_made) - count(_freed)
            print(f"{now - start:5.0f} {builds[0]:7d} {gc.get_count()!s:>18} "
                  f"{'/'.join(str(s['collections']) for s in stats):>22} {in_memory:17d} {rss_mb():7d}",
                  flush=True)
        if count(_made) % 64 == 0:
            time.sleep(0)  # let the builders run: a runtime's own code is not all it does
    stop.set()
    for t in threads:
        t.join()
    print(f"gc enabled after the pool stopped: {gc.isenabled()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

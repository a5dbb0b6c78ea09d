#!/usr/bin/env python3
"""What catching up a ``Run`` handle costs when its last folded row is a large delta row.

Why: every build first catches the handle's state up (``Run.state``), and that read checks that
the log still holds the event folded last (a restored backup may have moved the log back under
the handle). On a long run the event folded last is usually the previous build's record, ~1 MB
of JSON stored as a zstd delta of the run's keyframe; a check that decodes the row to compare
its chain hash inflated that megabyte on every build.

The run: a few small events, then two ~1 MB events of nearly the same text (the second stored as
a delta of the first, as consecutive records are). A handle folds it once; then the catch-up with
nothing new is timed (median and p95 of ``--rounds``), per store, plain and encrypted.

Usage: .venv/bin/python scripts/bench_catch_up.py [--rounds 300] [--size 1000000] [--pg URL | --no-pg]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid

from contextfold.api import open_store
from contextfold.domain.events import RunStarted, UserInput
from contextfold.store.crypto import generate_key


def _text(size: int, variant: int) -> str:
    lines = [f"fragment {i}: left out, 190 bytes of its reason and its tokens, turn {i % 97}\n"
             for i in range(size // 80)]
    lines[len(lines) // 2] = f"the line that differs: {variant}\n"
    return "".join(lines)


def bench(url: str, rounds: int, size: int, key: str | None) -> tuple[float, float]:
    with open_store(url, cipher_key=key) as store:
        run = store.run(f"catch-up-{uuid.uuid4().hex[:8]}")
        run.append(RunStarted(), UserInput("go"))
        run.append(UserInput(_text(size, 1)))
        run.append(UserInput(_text(size, 2)))  # a delta of the row before it
        assert run.state().version == 4
        times = []
        for _ in range(rounds):
            t = time.perf_counter()
            run.state()
            times.append(time.perf_counter() - t)
        times.sort()
        return statistics.median(times) * 1e3, times[int(0.95 * (len(times) - 1))] * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--size", type=int, default=1_000_000, help="bytes of each large event's text")
    ap.add_argument("--pg", default=os.environ.get("CONTEXTFOLD_TEST_PG"),
                    help="also run on this PostgreSQL database (default: $CONTEXTFOLD_TEST_PG)")
    ap.add_argument("--no-pg", action="store_true")
    args = ap.parse_args()
    urls = {}
    tmp = tempfile.TemporaryDirectory()
    urls["sqlite"] = f"sqlite:///{tmp.name}/catch_up.db"
    schema = f"bench_catch_up_{uuid.uuid4().hex[:8]}"
    if args.pg and not args.no_pg:
        sep = "&" if "?" in args.pg else "?"
        urls["postgresql"] = f"{args.pg}{sep}schema={schema}"
    print(f"catch-up of a Run handle, nothing new, last folded row a delta of a {args.size:,}-byte text")
    try:
        for name, url in urls.items():
            for key in (None, generate_key()):
                p50, p95 = bench(url, args.rounds, args.size, key)
                label = f"{name}{', encrypted' if key else ''}"
                print(f"  {label:<22} p50 {p50:6.3f} ms   p95 {p95:6.3f} ms")
    finally:
        tmp.cleanup()
        if "postgresql" in urls:
            import psycopg

            with psycopg.connect(args.pg.split("?")[0], autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    main()

"""Several processes writing one SQLite file: a write that waited past the busy timeout is a typed
StoreBusyError that wrote nothing, every other write is kept, and no raw sqlite3 error escapes.

Why: SQLite has one writer at a time; under a dozen agent processes on one machine the others
wait for the file's write lock (``?lock_timeout=``, 30 s by default). ``scripts/bench_concurrent.py``
ran 16 writers on one file without an error; this holds the promise with a timeout short enough
that the waits do run out.
"""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path
from typing import Any

from contextfold import ContextfoldError, StoreBusyError, UserInput
from contextfold.store.event_store import EventStore

WORKERS, APPENDS = 6, 40


def _writer(url: str, worker: int, out: Any) -> None:
    """Appends to its own run and to the shared one; sends back what each append did."""
    done: list[tuple[str, str, str]] = []
    try:
        with EventStore(url) as store:
            for i in range(APPENDS):
                for run in (f"own-{worker}", "shared"):
                    text = f"{worker}-{i}"
                    try:
                        store.append(run, [UserInput(text)])
                        done.append((run, text, "ok"))
                    except StoreBusyError:
                        done.append((run, text, "busy"))
                    except ContextfoldError as exc:
                        done.append((run, text, type(exc).__name__))
    except BaseException as exc:  # a raw driver error, or anything else: the test names it
        done.append(("", "", f"untyped {type(exc).__module__}.{type(exc).__name__}: {exc}"))
    out.put(done)


def test_writer_processes_on_one_file_lose_nothing_and_time_out_typed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}?lock_timeout=0.02"
    EventStore(url).close()  # the file made once, before the writers race to open it
    ctx = mp.get_context("fork")
    out: Any = ctx.Queue()
    workers = [ctx.Process(target=_writer, args=(url, w, out)) for w in range(WORKERS)]
    for p in workers:
        p.start()
    outcomes = [item for _ in workers for item in out.get(timeout=300)]
    for p in workers:
        p.join(60)
    odd = [o for o in outcomes if o[2] not in ("ok", "busy")]
    assert odd == []
    with EventStore(url) as store:
        for run in ["shared", *(f"own-{w}" for w in range(WORKERS))]:
            events = store.read(run)
            assert [e.position for e in events] == list(range(1, len(events) + 1))
            kept = sorted(e.event.text for e in events)  # type: ignore[union-attr]
            assert kept == sorted(text for r, text, what in outcomes if r == run and what == "ok")
            assert store.verify(run).ok
    # the file is whole: SQLite's own check
    with sqlite3.connect(tmp_path / "store.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)

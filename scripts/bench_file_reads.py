#!/usr/bin/env python3
"""What folding many reads of one file costs: an agent paging through a big file.

Why: the fold of a file read decides which older reads of its path the new one supersedes
(``projections.fold_files``). An agent that pages through a big file (``read_file big.py
start_line=k*50 end_line=k*50+49``, thousands of times, no revision logged) keeps every window
current, and a fold that looked at every current read of the path for each new read made the
whole fold quadratic in the reads of one file.

The run: one user input, then ``--reads`` events on one path, in windows of ``--window`` lines:

- mostly the next window of the file (disjoint from every earlier one);
- every ``--reread-every``-th, a window read before, again (same lines, same text: it supersedes
  the older read);
- every ``--edit-every``-th, the file is edited (one line of an earlier window changes) and a
  window straddling two earlier windows is read: no revision label, so the older reads are
  compared on the lines they share, and the changed line supersedes them with stale rests;
- every ``--chunk-every``-th, not a read but an index's chunk of a window (``EvidenceRetrieved``
  with a ``file://big.py#La-Lb`` source ref: folded as a read of those lines);
- with ``--revisions``, each edit moves the file to a new revision label (``r1``, ``r2``...) that
  the reads after it carry: a read at a new revision supersedes every read of the old one and
  keeps its lines as stale rests, so each edit costs a pass over every current read.

Measured: the pure fold of the records (``projections.fold.fold``, best of ``--repeat``, the
first pass warms the token counts), seconds and microseconds per read; with ``--store``, also
``Run.state()`` of a fresh handle on a SQLite store holding the run (read + fold). Printed beside:
the current reads of the path, the stale rests and the superseded reads the fold ends with, and a
blake3 of the state's canonical form (the same on every revision of the fold that keeps its rules).

Usage: .venv/bin/python scripts/bench_file_reads.py [--reads 4000] [--window 50] [--reread-every 10]
                                           [--edit-every 100] [--chunk-every 0] [--revisions]
                                           [--repeat 3] [--store]
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import time

from contextfold.api import open_store
from contextfold.domain.events import AnyEvent, EvidenceRetrieved, FileRead, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.projections.fold import fold
from contextfold.projections.state import RunState

PATH = "src/big.py"


class BigFile:
    """A file of numbered lines whose line ``n`` reads as of the edit that last changed it."""

    def __init__(self) -> None:
        self.edits: dict[int, int] = {}
        self.version = 0

    def lines(self, lo: int, hi: int) -> str:
        return "".join(f"    value_{n} = compute({n}, edit={self.edits.get(n, 0)})\n"
                       for n in range(lo, hi + 1))

    def edit(self, line: int) -> None:
        self.version += 1
        self.edits[line] = self.version


def events(reads: int, window: int, reread_every: int, edit_every: int, chunk_every: int,
           revisions: bool, seed: int = 7) -> list[AnyEvent]:
    """The run (module docstring): a user input, then ``reads`` reads (or chunks) of one path."""
    rng = random.Random(seed)
    big = BigFile()
    out: list[AnyEvent] = [UserInput("page through src/big.py and find where value_ is computed twice")]
    windows = 0  # windows read so far: the next new one starts at windows * window + 1
    for k in range(1, reads + 1):
        revision = f"r{big.version}" if revisions and big.version else None
        if edit_every and k % edit_every == 0 and windows >= 2:
            j = rng.randrange(windows - 1)  # straddle windows j and j + 1
            lo = j * window + 1 + window // 2
            hi = lo + window - 1
            big.edit(rng.randint(lo, hi))
            revision = f"r{big.version}" if revisions else None
        elif reread_every and k % reread_every == 0 and windows:
            lo = rng.randrange(windows) * window + 1
            hi = lo + window - 1
        else:
            lo = windows * window + 1
            hi = lo + window - 1
            windows += 1
        text = big.lines(lo, hi)
        if chunk_every and k % chunk_every == 0:
            ref = f"file://{PATH}{'@' + revision if revision else ''}#L{lo}-L{hi}"
            out.append(EvidenceRetrieved(content=text, source_ref=ref, source_kind="chunk"))
        else:
            out.append(FileRead(path=PATH, content=text, revision=revision, start_line=lo, end_line=hi))
    return out


def records(evs: list[AnyEvent]) -> list[RecordedEvent]:
    return [RecordedEvent("bench-file-reads", i, e, f"{i:064x}") for i, e in enumerate(evs, start=1)]


def describe(state: RunState) -> str:
    reads = state.files.get(PATH, ())
    current = sum(1 for _ in reads)
    stale = sum(1 for r in reads if r[0] in state.stale_reads)
    return (f"{current:,} current reads of the path ({stale:,} of them stale rests), "
            f"{len(state.superseded_by):,} superseded; state {state.fingerprint()[:16]}")


def time_fold(recs: list[RecordedEvent], repeat: int) -> tuple[float, float, RunState]:
    """Seconds of the first fold (token counts cold) and of the best of ``repeat``."""
    times: list[float] = []
    state: RunState | None = None
    for _ in range(max(1, repeat)):
        gc.collect()
        t = time.perf_counter()
        state = fold(recs)
        times.append(time.perf_counter() - t)
    assert state is not None
    return times[0], min(times), state


def time_store(evs: list[AnyEvent]) -> float:
    """Seconds of ``Run.state()`` on a fresh handle of a SQLite store holding the run."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/file_reads.db"
        with open_store(url) as store:
            run = store.run("bench-file-reads")
            for at in range(0, len(evs), 500):
                run.append(*evs[at:at + 500])
        with open_store(url) as store:
            run = store.run("bench-file-reads")
            gc.collect()
            t = time.perf_counter()
            state = run.state()
            seconds = time.perf_counter() - t
            assert state.version == len(evs)
            return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reads", type=int, default=4000, help="reads (and chunks) of the one path")
    ap.add_argument("--window", type=int, default=50, help="lines per read")
    ap.add_argument("--reread-every", type=int, default=10,
                    help="every n-th read re-reads an old window (0: none)")
    ap.add_argument("--edit-every", type=int, default=100,
                    help="every n-th read follows an edit and straddles two old windows (0: none)")
    ap.add_argument("--chunk-every", type=int, default=0,
                    help="every n-th read is a retrieved file:// chunk instead (0: none)")
    ap.add_argument("--revisions", action="store_true",
                    help="each edit moves the file to a new revision label")
    ap.add_argument("--repeat", type=int, default=3, help="folds timed; the best is reported")
    ap.add_argument("--store", action="store_true", help="also time Run.state() on a SQLite store")
    args = ap.parse_args()
    evs = events(args.reads, args.window, args.reread_every, args.edit_every, args.chunk_every,
                 args.revisions)
    recs = records(evs)
    print(f"{args.reads:,} reads of one path, {args.window}-line windows (re-read every {args.reread_every}, "
          f"edit every {args.edit_every}, chunk every {args.chunk_every}, "
          f"{'revision labels' if args.revisions else 'no revision'})")
    first, best, state = time_fold(recs, args.repeat)
    print(f"  fold            first {first:7.3f} s   best of {args.repeat} {best:7.3f} s   "
          f"{best / args.reads * 1e6:8.1f} us per read")
    if args.store:
        seconds = time_store(evs)
        print(f"  Run.state()     {seconds:7.3f} s   {seconds / args.reads * 1e6:8.1f} us per read "
              "(SQLite, read + fold)")
    print(f"  {describe(state)}")


if __name__ == "__main__":
    main()

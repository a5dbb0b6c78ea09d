"""The fold of many reads of one file looks only at the reads a new read can change.

``fold_files`` weighed every current read of a path against each new read: an agent paging
through a big file (thousands of windows, no revision) made the fold quadratic. It now asks the
path's line index (``path_reads.PathReads``) for the reads the rules may change. These tests hold
it to the plain scan it replaced (kept here as the reference) on random mixes of reads, ranges,
revisions and retrieved ``file://`` chunks, and count the older reads weighed (no timings).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain.events import AnyEvent, ArtifactRef, EvidenceRetrieved, FileRead, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.projections import fold_files
from contextfold.projections.fact_sources import FileRefRead
from contextfold.projections.fold import fold, fold_event
from contextfold.projections.fold_content import range_within, supersede
from contextfold.projections.path_reads import INDEXED_FROM, CurrentRead, PathReads, reach
from contextfold.projections.stale_reads import spans_meet, spans_within
from contextfold.projections.state import RunState

Files = dict[str, tuple[CurrentRead, ...]]


def _scan(files: Files, state: RunState, rec: RecordedEvent, fid: str, read: FileRefRead,
          new_lines: list[str] | None) -> str | None:
    """The reference: ``fold_files._fold_read`` as it was, weighing every current read of the
    path in filing order and filing the path's reads as a tuple in ``files``."""
    rng = (read.start_line, read.end_line)
    kept: list[CurrentRead] = []
    rests = 0
    inherited: str | None = None
    for old in files.get(read.path, ()):
        stale = state.stale_reads.get(old[0])
        changed = False
        if old[1] == read.revision and not (range_within((old[2], old[3]), rng) if stale is None
                                            else spans_within(stale.spans, rng)):
            if (new_lines is None or not fold_files._ranges_meet(old, read)
                    or not fold_files._lines_differ(state, old, stale, read, new_lines)):
                kept.append(old)
                continue
            changed = True
        elif stale is not None and old[1] != read.revision and not spans_meet(stale.spans, rng):
            kept.append(old)
            continue
        supersede(state, old[0], fid)
        key = state.semantic_keys.get(old[0])
        inherited = inherited or key
        if old[1] != read.revision or changed:
            rest = fold_files._stale_rest(state, rec, old, read, fid, rests + 1)
            if rest is not None:
                kept.append(rest)
                rests += 1
                if key is not None:
                    state.semantic_keys[rest[0]] = key
    kept.append((fid, read.revision, read.start_line, read.end_line))
    files[read.path] = tuple(kept)
    return inherited


def _records(events: list[AnyEvent]) -> list[RecordedEvent]:
    return [RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)]


def _outcome(state: RunState, files: Files) -> tuple[Any, ...]:
    return (state.canonical(), list(state.active), state.superseded_by, state.stale_reads,
            state.semantic_keys, state.source_kinds, list(state.entries), files)


def _folded(events: list[AnyEvent]) -> tuple[Any, ...]:
    state = fold(_records(events))
    return _outcome(state, {path: tuple(reads) for path, reads in state.files.items()})


def _scanned(events: list[AnyEvent]) -> tuple[Any, ...]:
    files: Files = {}
    with patch.object(fold_files, "_fold_read", partial(_scan, files)):
        state = fold(_records(events))
    return _outcome(state, files)


PATHS = ("a.py", "./a.py", "b.py")
REVISIONS = (None, None, "r1", "r2", "")
ARTIFACT = ArtifactRef(hash="ab" * 32, size=4000, media_type="text/plain")


@st.composite
def _text(draw: st.DrawFn, first: int) -> str:
    """Lines numbered from ``first`` in one of two versions each, or blank: reads of one range
    agree or differ on their shared lines, and a rest of blank lines only is kept as nothing."""
    count = draw(st.integers(0, 9))
    lines = [draw(st.sampled_from(("v1 ", "v2 ", "  "))) + (str(n) if n % 4 else "")
             for n in range(first, first + count)]
    return "".join(f"{line}\n" for line in lines) if draw(st.booleans()) else "\n".join(lines)


@st.composite
def _read(draw: st.DrawFn) -> AnyEvent:
    path = draw(st.sampled_from(PATHS))
    revision = draw(st.sampled_from(REVISIONS))
    if draw(st.integers(0, 3)) == 0:  # a retrieved chunk of a file: a read of its lines
        start = draw(st.none() | st.integers(0, 12))
        end = draw(st.none() | st.integers(0, 12)) if start is not None else None
        lines = "" if start is None else f"#L{start}" + ("" if end is None else f"-L{end}")
        at = f"@{revision}" if revision else ""
        return EvidenceRetrieved(
            content=draw(_text(start or 1)), source_ref=f"file://{path}{at}{lines}",
            source_kind=draw(st.sampled_from(("chunk", "document"))),
            semantic_key=draw(st.sampled_from((None, None, "a.py", "key"))), origin="workspace")
    start = draw(st.none() | st.integers(-1, 12))
    end = draw(st.none() | st.integers(-1, 12))  # also a range named backwards, or line 0
    artifact = ARTIFACT if draw(st.integers(0, 7)) == 0 else None
    return FileRead(path=path, revision=revision, start_line=start, end_line=end,
                    content=draw(_text(start or 1)), artifact=artifact)


@settings(max_examples=300)
@given(st.lists(_read(), min_size=1, max_size=24))
def test_the_fold_keeps_the_reads_the_plain_scan_kept(reads: list[AnyEvent]) -> None:
    """Supersession by containment, differing shared lines, other revisions, stale rests cut
    again or left as they are, semantic keys passed on, retrieved chunks: all as the scan did,
    down to the ids of the rests and the order of the current fragments."""
    events: list[AnyEvent] = [UserInput("go"), *reads]
    assert _folded(events) == _scanned(events)


def test_a_rest_of_each_kind_comes_out_as_the_scan_made_it() -> None:
    """A fixed mix through every branch: windows, a whole read, an edit seen on a shared line, a
    new revision cutting rests, a chunk, a re-read of lines a rest keeps."""
    events: list[AnyEvent] = [
        UserInput("go"),
        FileRead(path="a.py", content="".join(f"v1 {n}\n" for n in range(1, 21))),
        *(FileRead(path="a.py", content="".join(f"v1 {n}\n" for n in range(lo, lo + 5)),
                   start_line=lo, end_line=lo + 4) for lo in (1, 6, 11, 16)),
        FileRead(path="a.py", content="v1 8\nv2 9\nv1 10\n", start_line=8, end_line=10),
        FileRead(path="./a.py", content="r2 3\nr2 4\n", revision="r2", start_line=3, end_line=4),
        EvidenceRetrieved(content="r3 12\n", source_ref="file://a.py@r3#L12-L12", semantic_key="a.py"),
        FileRead(path="a.py", content="r3 17\nr3 18\n", revision="r3", start_line=17, end_line=18),
        FileRead(path="a.py", content="r3 1\nr3 2\n", revision="r3", start_line=1, end_line=2),
    ]
    folded = _folded(events)
    assert folded == _scanned(events)
    state = fold(_records(events))
    assert state.stale_reads and len(state.superseded_by) >= 8


@contextmanager
def _weighed() -> Iterator[list[int]]:
    """Count the older reads the fold weighs against a new one: each is tested for containment
    (``range_within``, ``spans_within``) or overlap (``spans_meet``), or superseded outright (a
    read at another revision)."""
    count = [0]

    def counted(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            count[0] += 1
            return fn(*args)
        return call

    with (patch.object(fold_files, "range_within", counted(range_within)),
          patch.object(fold_files, "spans_within", counted(spans_within)),
          patch.object(fold_files, "spans_meet", counted(spans_meet)),
          patch.object(fold_files, "supersede", counted(supersede))):
        yield count


def _window(k: int, revision: str | None = None) -> FileRead:
    lo = k * 50 + 1
    return FileRead(path="big.py", content=f"window {k}\n", revision=revision, start_line=lo,
                    end_line=lo + 49)


def test_paging_through_a_file_weighs_a_bounded_number_of_older_reads_per_read() -> None:
    """4,000 disjoint windows of one file, every tenth read a window read before: the scan weighed
    every current window against each new one (~8 million); the index, only those the new read
    meets (the re-read window), so the count grows with the reads, not with their square."""
    reads = 4000
    events: list[AnyEvent] = [UserInput("page through big.py")]
    for k in range(reads):
        events.append(_window(k // 2 if k % 10 == 9 else k))
    with _weighed() as count:
        state = fold(_records(events))
    assert count[0] <= 2 * reads
    assert sum(1 for _ in state.files["big.py"]) == len({k // 2 if k % 10 == 9 else k for k in range(reads)})


def test_stale_rests_a_new_read_does_not_meet_are_not_weighed() -> None:
    """2,000 windows, one read of the first at a new revision (every other window becomes a stale
    rest), then 2,000 more windows at the new revision past them: a rest none of whose lines the
    new read covers stays as it is, and is no longer weighed either."""
    events: list[AnyEvent] = [UserInput("go"), *(_window(k) for k in range(2000)), _window(0, "r2"),
                              *(_window(k, "r2") for k in range(2000, 4000))]
    with _weighed() as count:
        state = fold(_records(events))
    assert count[0] <= 2 * len(events)
    assert len(state.stale_reads) == 1999


def test_a_snapshot_keeps_its_reads_while_the_state_folds_on() -> None:
    """The fold updates a path's reads in place: a snapshot holds copies of them."""
    first: list[AnyEvent] = [UserInput("go"), *(_window(k) for k in range(5))]
    later: list[AnyEvent] = [_window(2), _window(1, "r2"), _window(9, "r2")]
    state = fold(_records(first))
    snap = state.snapshot()
    before = tuple(snap.files["big.py"])
    for rec in _records([*first, *later])[len(first):]:
        fold_event(state, rec)
    assert tuple(snap.files["big.py"]) == before
    for rec in _records([*first, *later])[len(first):]:
        fold_event(snap, rec)
    assert snap.canonical() == state.canonical()
    assert tuple(snap.files["big.py"]) == tuple(state.files["big.py"])


# ---------------------------------------------------------------- the index itself

def _meets(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


_LINE = st.none() | st.integers(-2, 40)
_SPANS = st.lists(st.tuples(st.integers(-2, 45), st.integers(0, 6)).map(lambda t: (t[0], t[0] + t[1])),
                  max_size=3)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(("file", "file", "rest", "drop")), st.sampled_from(REVISIONS),
                          _LINE, _LINE, _SPANS, st.integers(0, 1000)), max_size=40),
       st.lists(st.tuples(st.sampled_from(REVISIONS), _LINE, _LINE), min_size=1, max_size=8))
def test_touched_by_is_every_read_of_another_revision_and_every_read_meeting_the_new_one(
        steps: list[tuple[str, str | None, int | None, int | None, list[tuple[int, int]], int]],
        queries: list[tuple[str | None, int | None, int | None]]) -> None:
    """Against the definition, over random files, rests put in place and drops; every read while
    the path has held fewer than ``INDEXED_FROM``."""
    reads = PathReads()
    kept: dict[int, tuple[CurrentRead, tuple[float, float] | None]] = {}  # key -> read, a rest's reach
    filed = 0
    indexed = False
    for n, (op, revision, start, end, spans, pick) in enumerate(steps):
        if op == "file" or not kept:
            reads.file((f"e{n}", revision, start, end))
            kept[filed] = ((f"e{n}", revision, start, end), None)
            filed += 1
            indexed = indexed or len(kept) >= INDEXED_FROM
            continue
        key = sorted(kept)[pick % len(kept)]
        if op == "drop":
            reads.drop(key)
            del kept[key]
        else:
            old = kept[key][0]
            rest = (f"e{n}.c1", old[1], old[2], old[3])
            reads.replace(key, rest, tuple(spans))
            kept[key] = (rest, reach(rest[2], rest[3], spans))
        assert list(reads) == [read for _, (read, _) in sorted(kept.items())]
    for revision, start, end in queries:
        lines = reach(start, end)
        expected = [(key, read) for key, (read, rest) in sorted(kept.items())
                    if not indexed or (rest is None and read[1] != revision)
                    or _meets(lines, rest if rest is not None else reach(read[2], read[3]))]
        assert reads.touched_by(revision, start, end) == expected
        copy = reads.copy()
        assert copy.touched_by(revision, start, end) == expected and list(copy) == list(reads)


@pytest.mark.parametrize(("start", "end", "spans", "expected"), [
    (None, None, None, (1, math.inf)),
    (0, 5, None, (1, 5)),
    (10, 5, None, (5, 10)),  # named backwards
    (3, 4, ((1, 2), (7, 9)), (1, 9)),  # a rest shows lines past its origin's named range
    (3, 4, (), (-math.inf, math.inf)),  # a rest of no line: spans_within holds for any read
])
def test_reach(start: int | None, end: int | None, spans: tuple[tuple[int, int], ...] | None,
               expected: tuple[float, float]) -> None:
    assert reach(start, end, spans) == expected

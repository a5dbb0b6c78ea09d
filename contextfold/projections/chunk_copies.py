"""Which retrieved chunks of a file are copies of a read of it: the build leaves them out.

Pure. A retrieved chunk that names a file (``file://app/config.py@r1#L10-L10``) is folded as a read
of those lines at that revision (``fold_files.fold_retrieved_file``): another revision supersedes it
or is superseded by it, as file reads do. Of one revision, the fold keeps a part beside a wider
read (an agent's view of lines 40-60 of a file it read whole must not hide the rest). A chunk an
index returned, though, is no newer view: when a current read of its file at its revision shows
its lines, with its text, it is a copy of that read (DESIGN 7: dedupe, the manifest names what
stands for it). It was ranked against the read by recency under the path's semantic key, won as
"a newer version", and the model saw one line of a 59-line file it had read at that revision.

A copy is told by revision, lines and text: the same revision label with other text at those
lines (``HEAD`` before and after an edit) is no copy, and both stay as the fold keeps them. When
either text is held in an artifact (the fold and the build do not load it), revision and lines
decide. Between chunks, the wider (then the older) stands for the narrower; a file read stands
for any chunk.
"""

from __future__ import annotations

import math
from collections.abc import Container
from typing import NamedTuple

from contextfold.domain.events import TextBlock
from contextfold.projections.state import RunState

__all__ = ["chunk_copies"]


class _Shown(NamedTuple):
    """What a current read of a file shows: its lines (``spans``, ``math.inf`` = to the end of a
    text not in the log) and their text when the log holds it."""

    fid: str
    revision: str | None
    spans: tuple[tuple[int, float], ...]
    text: dict[int, str] | None
    chunk: bool
    rank: tuple[bool, float, int, str]
    """Who stands for whom: a file read before a chunk, then the wider, the older."""


def _lines(text: str) -> list[str]:
    return (text[:-1] if text.endswith("\n") else text).split("\n")


def _shown(state: RunState, read: tuple[str, str | None, int | None, int | None]) -> _Shown:
    fid, revision, start, end = read
    stale = state.stale_reads.get(fid)
    origin = fid if stale is None else stale.origin
    content = state.entries[origin].content
    first = start or 1
    text: dict[int, str] | None = None
    spans: tuple[tuple[int, float], ...]
    if isinstance(content, tuple) and len(content) == 1 and isinstance(content[0], TextBlock):
        text = dict(enumerate(_lines(content[0].text), start=first))
        spans = ((first, first + len(text) - 1),) if stale is None else tuple(stale.spans)
        text = {n: line for n, line in text.items() if any(a <= n <= b for a, b in spans)}
    else:
        spans = ((first, math.inf if end is None else end),) if stale is None else tuple(stale.spans)
    width = sum(b - a + 1 for a, b in spans)
    chunk = fid in state.source_kinds
    return _Shown(fid, revision, spans, text, chunk, (chunk, -width, state.entries[fid].position, fid))


def _within(part: _Shown, whole: _Shown) -> bool:
    if not all(any(c <= a and b <= d for c, d in whole.spans) for a, b in part.spans):
        return False
    if part.text is None or whole.text is None:
        return True
    return all(whole.text.get(n) == line for n, line in part.text.items())


def chunk_copies(state: RunState, candidates: Container[str]) -> dict[str, str]:
    """Each retrieved chunk among ``candidates`` that is a copy of another current read of its
    file (module docstring) -> the read that stands for it."""
    out: dict[str, str] = {}
    for kept in state.files.values():
        if not any(r[0] in state.source_kinds for r in kept):
            continue
        shown = sorted((_shown(state, r) for r in kept if r[0] in candidates), key=lambda s: s.rank)
        for part in shown:
            if not part.chunk:
                continue
            whole = next((w for w in shown if w.rank < part.rank and w.fid not in out
                          and w.revision == part.revision and _within(part, whole=w)), None)
            if whole is not None:
                out[part.fid] = whole.fid
    return out

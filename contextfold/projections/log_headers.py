"""A lean log's headers (from the richest to the barest) and which one a grant shows, with the
room it leaves the log's lines (:func:`header_plan`).

Apart from :mod:`~contextfold.projections.diagnose` (which finds what a header says and cuts the
log) because the choice of header is where a lean log's cuts were not monotone: the richest
header that left room for one line was taken, so one more token of grant could take a richer
header and keep fewer lines, or fewer characters of an excerpt (every one of the 39 long
SWE-agent observations lost some so, 152 times over grants of 10-600). The choice is now made
so that the room left for the log never shrinks as the grant grows (:func:`header_plan`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from contextfold.projections.code_fences import closing_fence, fence_states
from contextfold.projections.graphemes import ceil_boundary, floor_boundary, head_chars
from contextfold.projections.log_patterns import KEY_ERROR_PATTERNS

if TYPE_CHECKING:
    from contextfold.projections.diagnose import FirstError, LogDiagnosis

__all__ = ["HEADER_SHARE", "header_plan", "header_variants"]

_HEADER_ERROR_LINES = 12
"""The error block in a lean-log header is condensed beyond this many lines."""
_HEADER_LINE_CHARS = 400
"""Longest quoted line in the header's condensed variant."""
_CLIP_LEAD = 80
"""Characters kept before a key error's match when the header quotes the middle of its line."""



def _clip(line: str, at: int = 0) -> str:
    """``line`` cut to at most :data:`_HEADER_LINE_CHARS`, at grapheme cluster boundaries: a quoted
    error line must not end in an orphan accent or half an emoji. Its head is kept, unless the key
    error matched at ``at`` lies beyond it: then the characters from :data:`_CLIP_LEAD` before the
    match on (a JSON body with its error member deep inside, a stream of progress notes, then the
    error: the head showed only noise)."""
    if len(line) <= _HEADER_LINE_CHARS:
        return line
    if at <= _HEADER_LINE_CHARS - _CLIP_LEAD:
        kept = head_chars(line, _HEADER_LINE_CHARS)
        return f"{kept}… [{len(line) - len(kept)} chars omitted]"
    start = ceil_boundary(line, min(at - _CLIP_LEAD, len(line) - _HEADER_LINE_CHARS))
    end = floor_boundary(line, start + _HEADER_LINE_CHARS)
    after = f"… [{len(line) - end} chars omitted]" if end < len(line) else ""
    return f"[{start} chars omitted] …{line[start:end]}{after}"


def _match_at(fe: FirstError) -> int:
    """Where in its first line the first key error's pattern matched."""
    found = dict(KEY_ERROR_PATTERNS)[fe.pattern].search(fe.text.split("\n", 1)[0])
    return 0 if found is None else found.start()


def _closed(block: list[str]) -> list[str]:
    """``block`` and the fence run that closes a code fence its lines leave open: an error quoted
    with its continuation lines (``error: snippet does not compile:`` then ``  ```rust`` and 8
    more) opened a fence the header never closed, and the log excerpt after it read inverted."""
    if not any("```" in b or "~~~" in b for b in block):
        return block
    opener = fence_states(block)[-1]
    return block if opener is None else [*block, closing_fence(opener)]


def header_variants(d: LogDiagnosis, where: str) -> list[tuple[str, bool]]:
    """(header, framed) from richest to barest. The first that fits the budget with at least the
    log's last line is used, else the first that fits alone: once a grant keeps a line of the
    tail, every larger grant does (the tail is where a failing command says why).

    A framed header is followed by an ``[log excerpt]`` line and closed by a
    ``[full log: REF]`` line; the barest variants fold the ref into the
    header and drop the frame, for budgets of a few dozen tokens.
    """
    code = "unknown" if d.exit_code is None else str(d.exit_code)
    summary = (f"[log diagnosis] exit code: {code} | lines: {d.total_lines} | "
               f"error lines: {d.error_lines} | warning lines: {d.warning_lines} | "
               f"failed lines: {d.failed_lines}")
    if d.first_error is None:
        return [(summary + "\n[first key error] none found", True),
                (f"[log] exit code: {code} | full log: {where}", False),
                (f"[log] exit code: {code}", False)]
    fe = d.first_error
    span = f"line {fe.line}" if fe.line == fe.end_line else f"lines {fe.line}–{fe.end_line}"
    title = f"[first key error] {span} ({fe.pattern}):"
    block = fe.text.split("\n")
    if len(block) > _HEADER_ERROR_LINES:
        keep_tail = _HEADER_ERROR_LINES - 2
        skipped = len(block) - 1 - keep_tail
        block = [block[0], f"  … [{skipped} lines of this error omitted] …", *block[-keep_tail:]]
    at = _match_at(fe)
    clipped = [_clip(b, at if i == 0 else 0) for i, b in enumerate(block)]
    clipped_ends = [clipped[0]] if len(block) == 1 else [clipped[0], clipped[-1]]
    # One line quoted under the number of the line it is: a traceback's exception line (what it
    # says), any other block's first line (a rustc error's last line is a `   |` gutter, and was
    # quoted as the line the block starts at).
    named, one, whole = ((fe.end_line, clipped[-1], block[-1]) if fe.pattern == "python_traceback"
                         else (fe.line, clipped[0], block[0]))
    return [
        ("\n".join([summary, title, *_closed(block)]), True),
        ("\n".join([summary, title, *_closed(clipped)]), True),
        ("\n".join([summary, title, *_closed(clipped_ends)]), True),
        ("\n".join([summary, f"[first key error] line {named}: {one}"]), True),
        ("\n".join([f"[log] exit code: {code} | full log: {where}",
                    f"[first key error] line {named}: {head_chars(whole, 80)}"]), False),
        (f"[log] exit code: {code} | first key error at line {fe.line} | full log: {where}",
         False),
        (f"[log] exit code: {code} | first key error at line {fe.line}", False),
        (f"[log] exit code: {code}", False),
    ]


HEADER_SHARE = (2, 3)
"""A header is taken once its text (with the frame and a bare marker) is at most this share of
the grant: the log's part gets the rest, a third of the grant at least (the tail is where a
failing command says why)."""


def _threshold(tokens: int) -> int:
    """The least grant of which ``tokens`` is at most :data:`HEADER_SHARE`."""
    share, of = HEADER_SHARE
    return -(-tokens * of // share)


def _chosen(frames: Sequence[int], grant: int) -> int | None:
    """The header ``grant`` shows: the richest whose ``frames`` entry (its tokens with a bare
    marker) is at most :data:`HEADER_SHARE` of ``grant``; else the cheapest, where it fits at all."""
    for i, tokens in enumerate(frames):
        if _threshold(tokens) <= grant:
            return i
    cheapest = min(range(len(frames)), key=frames.__getitem__)
    return cheapest if frames[cheapest] <= grant else None


def header_plan(frames: Sequence[int], marker: int, grant: int) -> tuple[int, int] | None:
    """(the header ``grant`` shows, the tokens left for the log's part: its kept lines and
    marker, or an excerpt), or None when no header fits. ``frames``: each header's tokens with
    the frame and a bare marker, in order from the richest; ``marker``: the bare marker's.

    The room is the least that any grant from ``grant`` on leaves beside its header: a larger
    grant may take a richer header, which leaves less beside it than a smaller grant's leaner
    one did, and a room taken as the rest of the grant shrank there. So the room never shrinks
    as the grant grows (what fits in it: a larger grant keeps every line a smaller one kept),
    and the tokens of the grant just under a richer header's threshold that would be lost at it
    are not spent (at most the difference of two headers). Header choice and room are O(headers)."""
    now = _chosen(frames, grant)
    if now is None:
        return None
    room = grant - (frames[now] - marker)
    for threshold in sorted({_threshold(tokens) for tokens in frames}):
        if threshold > grant:
            later = _chosen(frames, threshold)
            assert later is not None  # (a threshold's own header fits it)
            room = min(room, threshold - (frames[later] - marker))
    return now, max(room, 0)

"""The fold rule of a file read: which older reads of the path it supersedes, and what stays.

Apart from :mod:`contextfold.projections.fold` because a partial read at a new revision keeps the
other lines of the older reads as stale rests (:mod:`contextfold.projections.stale_reads`), which
takes more than the fold's one-screen rules.
"""

from __future__ import annotations

from contextfold.domain.events import FileRead, TextBlock
from contextfold.domain.log import RecordedEvent
from contextfold.projections.bounded_memo import BoundedMemo, text_bytes
from contextfold.projections.entries import FragmentEntry
from contextfold.projections.fact_sources import FileRefRead, parse_file_ref
from contextfold.projections.fold_content import (
    add_fragment,
    add_stale_rest,
    file_key,
    file_ref,
    payload,
    range_within,
    supersede,
)
from contextfold.projections.path_reads import CurrentRead, PathReads
from contextfold.projections.stale_reads import (
    NewerRead,
    StaleRead,
    cut_read,
    spans_meet,
    spans_within,
    text_lines,
)
from contextfold.projections.state import RunState

__all__ = ["fold_file_read", "fold_retrieved_file"]


def fold_file_read(event: FileRead, state: RunState, rec: RecordedEvent) -> None:
    """A newer read of a path supersedes older reads of it at another revision, and, at the same
    revision (or none), the older reads whose lines it contains. Reads of the same revision that
    only overlap stay side by side: lines 40-90 superseded lines 1-50 and lines 1-39 were shown
    nowhere, though nothing contradicted them; nor does a part hide a wider read (viewing lines
    40-60 of a file read whole must not hide the rest of it).

    An older read at another revision that the newer one does not contain leaves a stale rest: its
    other lines, marked stale (:mod:`contextfold.projections.stale_reads`). Reading lines 10-20 of
    an edited file hid the rest of the file read whole before the edit. A stale rest none of whose
    lines the newer read covers stays as it is: it is marked stale already, and cutting every rest
    again at every read cost a pass over each rest's text per read.

    A read of the same range at the same revision supersedes the older one: a label like
    ``HEAD`` names a file that an uncommitted edit changed, and both versions were shown.

    Nor is the same revision (or none) proof of the same text: most runtimes log no revision, and
    after "read config.py whole, edit line 2, read line 2" both versions of line 2 were sent as
    current, nothing marked stale. So an older read of the same revision that only overlaps the
    newer one is compared with it on the lines both show: when one of them differs, the newer read
    is a newer version of the file and the older read is superseded, its other lines kept as a
    stale rest, as for another revision. Reads whose shared lines agree stay side by side.

    The path is compared normalised (``./app/x.py`` and ``app/x.py`` are one file); the
    source ref keeps it as it was read.

    A whole read is keyed by its path (``RunState.semantic_keys``): a retrieved copy keyed by the
    path is a copy of the file as it is now, and the build keeps one of them (``units``). The reads
    that supersede a keyed read, and the stale rest it leaves, inherit its key: together they are
    the file as it is now. Only the whole read held it: once a partial re-read at a new revision
    superseded it, nothing under the key held out the index's copy the whole read had replaced,
    and the oldest version came back, unmarked, beside the stale rest and the new line."""
    fid = add_fragment(state, rec, "evidence", "workspace",
               payload(event.content, event.artifact, event.path), source_ref=file_ref(event))
    path = file_key(event.path)
    new_lines = None if event.artifact is not None else text_lines(event.content)  # once, as it is counted
    read = FileRefRead(path, event.revision, event.start_line, event.end_line)
    inherited = _fold_read(state, rec, fid, read, new_lines)
    if event.start_line is None and event.end_line is None:  # the whole file, as it is now: what a
        state.semantic_keys[fid] = path  # retrieved copy keyed by its path is a copy of (units)
    elif inherited is not None:
        state.semantic_keys[fid] = inherited
    state.active[fid] = None


def fold_retrieved_file(state: RunState, rec: RecordedEvent, fid: str, source_ref: str) -> None:
    """Retrieved evidence ``fid`` whose source ref names a file (``file://path@r1#L2-L2``, an
    index's chunk) is a read of those lines at that revision, under the rules of a file read
    (:func:`fold_file_read`): a read or chunk at another revision supersedes it (leaving a stale
    rest of its other lines) and it supersedes them, and of one revision the newer that contains
    the older, or shows other text on a line both show, supersedes it. Such chunks were exempt
    from every supersession: a chunk of line 2 at r1, then the file read (or the same lines
    retrieved) at r2, sent both versions as current, unmarked, while two file reads were
    superseded. (Whether a chunk of one revision inside a read is a copy of it is the build's:
    ``units``.) It keeps the semantic key it was retrieved under, else it inherits the key of a
    read it supersedes."""
    ref = parse_file_ref(source_ref)
    text = _logged_text(state.entries[fid])
    inherited = _fold_read(state, rec, fid, ref._replace(path=file_key(ref.path)),
                           None if text is None else text_lines(text))
    if inherited is not None and fid not in state.semantic_keys:
        state.semantic_keys[fid] = inherited


def _fold_read(state: RunState, rec: RecordedEvent, fid: str, read: FileRefRead,
               new_lines: list[str] | None) -> str | None:
    """File ``fid``, a read of ``read`` (a normalised path) whose lines are ``new_lines`` (None:
    held in an artifact), among the current reads of its path (:func:`fold_file_read`'s rules);
    the semantic key of a read it supersedes, if any. Only the reads it may change are looked at
    (:meth:`~contextfold.projections.path_reads.PathReads.touched_by`), in the order they were
    filed: the rules keep every other read as it is."""
    rng = (read.start_line, read.end_line)
    reads = state.files.get(read.path)
    if reads is None:
        reads = state.files[read.path] = PathReads()
    rests = 0
    inherited: str | None = None
    for filed, old in reads.touched_by(read.revision, read.start_line, read.end_line):
        stale = state.stale_reads.get(old[0])
        changed = False
        if old[1] == read.revision and not (range_within((old[2], old[3]), rng) if stale is None
                                            else spans_within(stale.spans, rng)):
            if (new_lines is None or not _ranges_meet(old, read)
                    or not _lines_differ(state, old, stale, read, new_lines)):
                continue  # kept
            changed = True  # the same label (or none), another text: a newer version of the file
        elif stale is not None and old[1] != read.revision and not spans_meet(stale.spans, rng):
            continue  # marked stale already, none of its lines read again: as it is
        supersede(state, old[0], fid)
        key = state.semantic_keys.get(old[0])
        inherited = inherited or key
        rest = (_stale_rest(state, rec, old, read, fid, rests + 1)
                if old[1] != read.revision or changed else None)
        if rest is None:
            reads.drop(filed)
            continue
        reads.replace(filed, rest, state.stale_reads[rest[0]].spans)
        rests += 1
        if key is not None:  # what is left of a keyed read: still the file under its key
            state.semantic_keys[rest[0]] = key
    reads.file((fid, read.revision, read.start_line, read.end_line))
    return inherited


def _stale_rest(state: RunState, rec: RecordedEvent, old: CurrentRead, read: FileRefRead, fid: str,
                sub: int) -> CurrentRead | None:
    """Fold the stale rest of ``old`` that ``read`` (folded as ``fid``) leaves, if any line is left
    and its text is in the log (not an artifact's), as the ``sub``-th extra fragment of ``rec``.
    A rest's read tuple keeps its origin's revision and lines, so a rest of a rest is cut from the
    origin's text, with every newer read so far."""
    prior = state.stale_reads.get(old[0])
    origin = old[0] if prior is None else prior.origin
    entry = state.entries[origin]
    text = _logged_text(entry)
    if not text:
        return None  # no text, or one held in an artifact: the fold does not load it
    newer = (*(() if prior is None else prior.newer),
             NewerRead(read.start_line or 1, read.end_line, read.revision, fid, rec.position))
    cut = cut_read(text, old[2] or 1, newer, read.path, old[1], entry.position)
    if cut is None:
        return None
    text, spans = cut
    rid = add_stale_rest(state, rec, sub, entry, text)
    if origin in state.source_kinds:  # the rest of a retrieved chunk: still retrieved
        state.source_kinds[rid] = state.source_kinds[origin]
    state.stale_reads[rid] = StaleRead(old[0], origin, read.path, old[1], newer, spans)
    state.active[rid] = None
    return (rid, old[1], old[2], old[3])


def _lines_differ(state: RunState, old: CurrentRead, stale: StaleRead | None, read: FileRefRead,
                  new_lines: list[str]) -> bool:
    """Whether a line that both ``old`` (a read of ``read``'s revision, or the lines its stale
    rest shows) and ``read`` (whose lines are ``new_lines``) show reads otherwise in each. False
    when the older text is not in the log (an artifact's: the fold does not load it) or no line
    is shown by both: nothing says the file changed, and the reads stay side by side as before."""
    old_lo, new_lo = old[2] or 1, read.start_line or 1
    lo = max(old_lo, new_lo)
    ends = [end for end in (old[3], read.end_line) if end is not None]
    old_text = _logged_text(state.entries[old[0] if stale is None else stale.origin])
    if old_text is None:
        return False
    old_lines = _LINES.get(old_text)
    if old_lines is None:
        split = text_lines(old_text)  # each line a str of its own: ~57 bytes besides its text
        old_lines = _LINES.put(old_text, split, 2 * text_bytes(old_text) + 64 * len(split))
    hi = min(old_lo + len(old_lines) - 1, new_lo + len(new_lines) - 1, *ends)
    shown = ((lo, hi),) if stale is None else stale.spans  # a rest shows only its spans
    for a, b in shown:
        a, b = max(a, lo), min(b, hi)
        if a <= b and old_lines[a - old_lo:b - old_lo + 1] != new_lines[a - new_lo:b - new_lo + 1]:
            return True
    return False


def _ranges_meet(old: CurrentRead, read: FileRefRead) -> bool:
    """Whether the lines ``old`` and ``read`` name meet (None = from the start / to the end):
    before any text is split, since most reads of a path do not meet a newer one."""
    return ((old[3] is None or old[3] >= (read.start_line or 1))
            and (read.end_line is None or read.end_line >= (old[2] or 1)))


_LINES: BoundedMemo[str, list[str]] = BoundedMemo(256, share="file_lines")
"""An older read's lines, by its text: a whole read is compared with every partial read of its
file after it (300 partial reads of a 2,000-line file split it 300 times: the fold took ~3x as
long as without the comparison). Read only."""


def _logged_text(entry: FragmentEntry) -> str | None:
    """A read's text as logged: None when an artifact holds it (the fold does not load it)."""
    content = entry.content
    if content == ():
        return ""  # an empty read
    if isinstance(content, tuple) and len(content) == 1 and isinstance(content[0], TextBlock):
        return content[0].text
    return None

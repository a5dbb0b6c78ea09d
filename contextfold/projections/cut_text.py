"""Cut one selected fragment's text to a token grant, at safe boundaries.

Why a module of its own: the builder decides *how much* of a unit to keep; how a
fragment's text is cut (a failing log keeps its diagnosis, JSON stays valid,
files keep line ranges) and how a grant is shared among a group's results is a
separate concern, and the builder module stays readable without it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from contextfold.domain.fragments import ToolResultBlock
from contextfold.projections.bounded_memo import BoundedMemo, text_bytes
from contextfold.projections.diagnose import lean_log
from contextfold.projections.file_lines import FileLines
from contextfold.projections.fragment_facts import SHRINK_FLOOR, BuildCtx
from contextfold.projections.framing import is_data, neutralised_count
from contextfold.projections.json_deep import heads
from contextfold.projections.json_literals import BOM, SYNTAX_DECODER
from contextfold.projections.line_counts import LineSplitting
from contextfold.projections.render.data_blocks import neutralise
from contextfold.projections.stale_reads import rest_lines
from contextfold.projections.truncate import Truncation, truncate
from contextfold.projections.truncation_result import marker_only, truncation_of

__all__ = ["split_room", "truncate_fragment"]


def truncate_fragment(ctx: BuildCtx, fid: str, max_tokens: int) -> Truncation:
    """``_cut_text``, memoised per facts table: the unit cut at the end of a long run's walk is
    often cut to the same size again (the next build of the same turn, another provider)."""
    memo = ctx.objects_for("truncations")
    key = (fid, max_tokens)
    hit = memo.get(key)
    if hit is None:
        if len(memo) >= 4096:
            memo.clear()
        hit = memo[key] = _cut_text(ctx, fid, max_tokens)
    out: Truncation = hit
    return out


def _cut_text(ctx: BuildCtx, fid: str, max_tokens: int) -> Truncation:
    # The fragment as logged decides how it is cut and where its full text lives (a redacted
    # view has no artifact block): the same whether or not this build has redacted it yet.
    f = ctx.state.entries[fid].head
    text = ctx.full_text(fid)
    count, splitting = ctx.count, ctx.state.counter.line_splitting
    if not is_data(f.kind, f.trust):
        return _cut_as(ctx, fid, text, max_tokens, count, splitting)
    if _needs_neutralising(text):
        # Shown neutralised: fitted by the count of what is shown (its line blocks are not)
        return _cut_as(ctx, fid, text, max_tokens, neutralised_count(count), None)
    cut = _cut_as(ctx, fid, text, max_tokens, count, splitting)
    if cut.truncated and _needs_neutralising(cut.text):
        # The cut made a line the text did not have (a tail starting mid-line at "system: …"),
        # which the renderer marks "[data] ": refitted by the count of what is shown.
        cut = _cut_as(ctx, fid, text, max_tokens, neutralised_count(count), None)
    return cut


def _cut_as(ctx: BuildCtx, fid: str, text: str, max_tokens: int, count: Callable[[str], int],
            splitting: LineSplitting | None) -> Truncation:
    """``text`` cut by the kind its fragment decides, fitted by ``count``."""
    f = ctx.state.entries[fid].head
    stripped = text.removeprefix(BOM).lstrip()  # a byte order mark is no part of a JSON document
    if f.kind == "tool_result":
        block = next(b for b in f.content if isinstance(b, ToolResultBlock))
        ref = f"artifact:{block.artifact.hash}" if block.artifact else f.source_ref
        # A command's log keeps its diagnosis; a JSON document stays JSON whatever its exit code
        # (the runtime line before the block shows the code).
        if (block.exit_code is not None or block.status == "error") and not _is_json(stripped):
            return lean_log(text, block.exit_code, max_tokens, count, artifact_ref=ref,
                            line_splitting=splitting)
    # An excerpt names the file's lines, whichever way it is cut: a read of lines 1001-3000 that
    # starts with "[" (a TOML section) is tried as JSON first and cut by lines when it does not parse.
    excerpt = _FIRST_LINE.search(f.source_ref) if f.source_ref.startswith("file://") else None
    first_line = 1 if excerpt is None else int(excerpt.group(1))
    is_file = f.source_ref.startswith("file://")
    stale = ctx.state.stale_reads.get(fid)
    if stale is not None:  # a stale rest: a note line, the read's other lines, a marker per cut run
        return _cut_stale_rest(text, max_tokens, count, splitting, rest_lines(first_line, stale.spans))
    if (stripped.startswith(("{", "[")) and (not is_file or _is_json(stripped))) or (
            stripped.startswith(('"', *_NUMBER_STARTS)) and not is_file and _is_json(stripped)):
        # a document that is one string or number too: cut as words it was invalid JSON, the
        # number's head and tail around a marker, read as one number with other digits
        kind = "json"
    elif is_file:  # (a TOML or INI file starts with "[": its lines, as a file's, by file line)
        kind = "file"
    elif "```" in text or "~~~" in text:
        kind = "markdown"
    else:
        kind = "log" if f.kind == "tool_result" else "text"
    return truncate(text, max_tokens, kind=kind, count=count,  # type: ignore[arg-type]
                    line_splitting=splitting, first_line=first_line)


def _cut_stale_rest(text: str, max_tokens: int, count: Callable[[str], int],
                    splitting: LineSplitting | None, numbers: FileLines) -> Truncation:
    """A stale rest (:mod:`~contextfold.projections.stale_reads`) cut to ``max_tokens``: its note
    line kept whole, then a cut of its other lines to the room the note leaves; when not even the
    note and a marker fit, none of its lines (a bare marker).

    Why: cut as one file text, the note was the head window's first line, and a grant that kept a
    line or two kept them from the tail (a head of ``int(k / 2)`` lines is none for ``k = 1``) or
    a words cut kept a head of the note's characters: the model was shown the older read's lines
    with nothing saying they are stale, as if they were the file's current lines (a 1,000-line
    read at grants of 48-70 tokens). Showing none of them is better than that.

    The lines are cut to the grant less the note's tokens and counted again with the note: a
    count is not additive where the note meets the lines (a line break can join the note's last
    token), so what the whole counts over the grant is taken off the room and the lines cut
    again (once at most, in practice). Not by a count of the note and the lines together: the
    cut also counts single lines to find those over its grant, and each would carry the note."""
    original_tokens = count(text)
    if original_tokens <= max_tokens:  # whole: as ``truncate`` says it
        return truncate(text, max_tokens, kind="file", count=count, numbers=numbers)
    note, _, body = text.partition("\n")
    head = f"{note}\n"
    runs = tuple((at - 1, line, size) for at, line, size in numbers.runs)  # the body's lines
    room = max_tokens - count(head)
    while room > 0:
        cut = truncate(body, room, kind="file", count=count, line_splitting=splitting,
                       numbers=FileLines(runs))
        if cut.over_budget:
            break
        shown = head + cut.text
        tokens = count(shown)
        if tokens > max_tokens:
            room -= tokens - max_tokens
            continue
        kept = [(r.start, r.end) for r in cut.kept]
        if cut.unit == "char":  # a words cut's ranges are the body's characters: the note's are kept too
            skip = len(head)
            kept = [(1, skip + kept[0][1]) if kept and kept[0][0] == 1 else (1, skip),
                    *((a + skip, b + skip) for a, b in kept if a != 1)]
        return truncation_of(shown, strategy=cut.strategy, unit=cut.unit, original=text,
                             original_tokens=original_tokens, tokens=tokens, kept=kept,
                             omitted=cut.omitted, omitted_chars=cut.omitted_chars)
    return marker_only(text, original_tokens, "line", sum(size for _, _, size in runs), count)


_FIRST_LINE = re.compile(r"#L(\d+)(?:-L\d+)?$")
"""A file read's line range in its ref (``fold_content.file_ref``): its first line's number."""

_PARSED: BoundedMemo[str, bool] = BoundedMemo(256, share="cut_parsed")
"""Whether a text parses as JSON, by text: the unit at the budget's edge is cut at every build."""


_NEEDS: BoundedMemo[str, bool] = BoundedMemo(4096, share="cut_needs")
"""Whether a text changes when neutralised, by text: the unit at the budget's edge is cut at
every build (a short text's neutralising is not memoised where it is rendered)."""


def _needs_neutralising(text: str) -> bool:
    hit = _NEEDS.get(text)
    if hit is None:
        hit = _NEEDS.put(text, neutralise(text) is not text, text_bytes(text))
    return hit


_NUMBER_STARTS = ("-", *"0123456789")
"""How a JSON document that is one number starts."""


def _is_json(stripped: str) -> bool:
    if not stripped.startswith(("{", "[", '"', *_NUMBER_STARTS)):
        return False
    hit = _PARSED.get(stripped)
    if hit is None:
        try:
            SYNTAX_DECODER.decode(stripped)  # JSON as ``truncate`` takes it, any number as written
            hit = True
        except ValueError:
            hit = False
        except RecursionError:  # nested past the parser: JSON if its tokens are (``json_deep``)
            hit = heads(stripped) is not None
        _PARSED.put(stripped, hit, text_bytes(stripped))
    return hit


def split_room(room: int, sizes: list[int]) -> list[int]:
    """Share ``room`` tokens among truncatable parts by water-filling (max-min fairness): a part
    that fits within an equal share of what is left stays whole, and the rest of the room goes
    evenly to the longer ones (so a short result is not starved by a long sibling: sharing by
    size cut a 1,200-token file to 104 tokens beside two 238,000-token ones).

    Each part gets at least the floor (``SHRINK_FLOOR`` or its size), as before. The grants are
    ``min(size, level)`` for the largest level the room affords, the room's remainder going one
    token each to the first longer parts in order: deterministic, and monotone in the room (one
    more token raises one grant by one, or the level for all that are cut)."""
    room = max(room, sum(min(size, SHRINK_FLOOR) for size in sizes))
    left, level = room, 0
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    for rank, i in enumerate(order):
        others = len(order) - rank
        if sizes[i] * others > left:  # this part and all longer ones are cut to the level
            level = left // others
            break
        left -= sizes[i]
    else:
        return list(sizes)  # everything fits whole
    grants = [min(size, level) for size in sizes]
    spare = room - sum(grants)
    for i, size in enumerate(sizes):
        if spare <= 0:
            break
        if size > level:
            grants[i] += 1
            spare -= 1
    return grants

"""Safe truncation of *content* at explicit boundaries, never over budget.

What this module cuts, and where (DESIGN.md section 7, seed section 5.4):

* ``log`` / ``file`` lines: a head window and a tail window of whole lines,
  joined by one marker line ``… [N lines omitted: lines A–B] …``. Logs keep a
  bigger tail (a third head, two thirds tail) because that is where a failing
  command says why; files keep equal halves. A line is an atom: one longer
  than the budget is omitted whole (the marker names it), never cut. The windows grow along
  one chain, the same at every grant, so a larger grant keeps every line a smaller one kept:
  a long line waits until the windows hold as many characters as it has, the other window
  growing meanwhile (:mod:`~contextfold.projections.line_windows`).
* ``markdown`` / ``text``: the same line windows, but a cut that lands inside
  a code fence closes the fence before the marker and re-opens it (with the
  original opener line, info string included) after it, so a truncated
  fragment never leaves a fence open that the original had closed. A ``file`` with a
  fence is cut the same way.
* ``text``, ``markdown`` and ``log`` whose line windows would keep no line
  at all (a message that is one long paragraph, a progress bar's one line), or
  could keep no more than the lines outside the over-long ones (a short line, a fence
  and a long paragraph) while a character cut keeps more of the text: a
  head and a tail of its characters, each ending at whitespace or a CJK stop within a few
  characters (else at a grapheme cluster boundary), around ``… [N characters omitted] …``
  (strategy ``words``), so the grant keeps the opening and the closing words instead of a bare
  marker; a fence the head ends in is closed before the marker and re-opened after it. A file
  keeps whole lines while any fits (its manifest entry names line ranges); one whose lines are
  all longer than the grant (a minified bundle) keeps words rather than a bare marker. Of every
  kind, a words cut keeps no more characters than the next larger grant whose windows hold more
  lines keeps (``truncate_words.words_below_lines``): what a cut shows never falls as its grant
  grows.
* ``json``: the result stays valid JSON. Arrays keep their first and last items around a marker
  item ``"… N items omitted"``; objects keep their first members plus a marker member
  ``"…": "N members omitted"``; long strings are shortened at a grapheme cluster boundary with a
  ``… [N chars omitted]`` suffix, and a document that is one number too long for the grant becomes
  such a string of its literal's head (it has no container to drop it from). One size knob
  applies recursively to every nested value, and the largest knob that fits is found by search
  (the whole value, compacted, is tried first).
  Output is compact JSON, every number as written (``NaN``, ``Infinity``, ``1e400``, ``-0``:
  :mod:`~contextfold.projections.json_literals`), without a byte order mark. JSON nested past
  :data:`PARSE_DEPTH` (decided per text by its depth, not by where a recursion stopped: the same
  kind of cut whatever the grant, the call or what was cut before), or whose parse would not be
  written back as it was (an object naming a member twice), keeps a head as written, its brackets
  closed (:mod:`~contextfold.projections.json_deep`); JSON
  documents a line apart (MCP text blocks), each cut as JSON
  (:mod:`~contextfold.projections.json_blocks`) where a text cut would split one. Other input
  that does not parse is cut as ``text``.
* retrieval chunks (:func:`truncate_chunks`): whole chunks only.

Everything works on ``str``, so a cut can only fall on a code-point boundary:
no UTF-8 sequence is ever split. A cut by characters also moves to a grapheme cluster boundary
(:mod:`~contextfold.projections.graphemes`): no accent, ZWJ sequence or flag is split either.
Tool-call *arguments* are never passed here — they are replayed verbatim or the whole call
group is dropped; this module is for tool output, files, documents and logs only.

The promise: ``count(result.text) <= max_tokens``, measured by the caller's
``count``. Token counts are not additive across concatenation, so every
candidate text is assembled and counted as a whole (the number of count calls
is logarithmic in the input), unless the caller lends its encoding's
``line_splitting``: then a line-window candidate's count is summed from line
blocks where that encoding provably splits (:mod:`~contextfold.projections.line_counts`),
which is the whole text's count. The only exception is a budget too small for
even the bare marker: then the result is :data:`MINIMAL_MARKER` with
``over_budget=True``.

Ranges in :attr:`Truncation.kept` are 1-based and inclusive: line numbers for
lines (the file's, for a file excerpt or a stale rest: ``first_line``, ``numbers``), chunk
numbers for chunks, item/member numbers of the top-level
container for JSON (characters of a document that is one string or number, or nested past the parser;
documents for JSON blocks).
"""

from __future__ import annotations

from itertools import chain as chain_lines
from typing import Any, Literal, TypeAlias, assert_never

from contextfold.domain.canonical import orjson_writes_the_same
from contextfold.projections.chunk_cut import truncate_chunks
from contextfold.projections.code_fences import closing_fence, fence_states, open_fence
from contextfold.projections.file_lines import FileLines
from contextfold.projections.fresh_stack import on_fresh_stack
from contextfold.projections.json_blocks import or_blocks
from contextfold.projections.json_compact import PIECES_CHARS_PER_TOKEN, compact_fits, count_compact
from contextfold.projections.json_deep import cut_deep
from contextfold.projections.json_literals import BOM, Unwritable, loads
from contextfold.projections.json_pieces import JsonPieces, pieces_apply
from contextfold.projections.json_shrink import (
    SHRINK_DEPTH,
    ShrinkStats,
    dump,
    nesting,
    saturations,
    shrink,
    text_nested_past,
)
from contextfold.projections.line_counts import LineCounts, LineSplitting, joined, split_lines
from contextfold.projections.line_windows import _PROBES as _PROBES  # tests empty the memo here
from contextfold.projections.line_windows import (  # the search and its memo, used by diagnose too
    WindowChain,
    fit_line_windows,
    held_off,
    kept_probe,
    probe_entry,
)
from contextfold.projections.truncate_words import has_fence, truncate_words, words_below_lines
from contextfold.projections.truncation_result import (
    MINIMAL_MARKER,
    KeptRange,
    TokenCounter,
    Truncation,
    Unit,
    check_budget,
    marker_only,
    truncation_of,
)

__all__ = [
    "MINIMAL_MARKER",
    "PARSE_DEPTH",
    "ContentKind",
    "KeptRange",
    "TokenCounter",
    "Truncation",
    "fit_line_windows",
    "kept_probe",
    "line_marker",
    "marker_only",
    "open_fence",
    "probe_entry",
    "split_lines",
    "truncate",
    "truncate_chunks",
]

ContentKind: TypeAlias = Literal["log", "file", "json", "markdown", "text"]


# ------------------------------------------------------------------ lines


def line_marker(omitted: int, first: int, last: int) -> str:
    """The marker line that replaces lines ``first..last`` (1-based)."""
    noun = "line" if omitted == 1 else "lines"
    span = f"line {first}" if first == last else f"lines {first}–{last}"
    return f"… [{omitted} {noun} omitted: {span}] …"


def _numbered_marker(text_lines: int, file_lines: list[tuple[int, int]]) -> str:
    """The marker line that replaces ``text_lines`` lines of a text whose file lines are the runs
    ``file_lines``: :func:`line_marker` when they are one run (an excerpt's always are), else each
    run named; lines that are none of the file's (a stale rest's note) are counted alone."""
    if not file_lines:
        return f"… [{text_lines} {'line' if text_lines == 1 else 'lines'} omitted] …"
    omitted = sum(b - a + 1 for a, b in file_lines)
    if len(file_lines) == 1:
        return line_marker(omitted, *file_lines[0])
    spans = ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in file_lines)
    return f"… [{omitted} {'line' if omitted == 1 else 'lines'} omitted: lines {spans}] …"


Words: TypeAlias = Literal["if_none_kept", "if_more_kept"]
"""When a line cut gives way to a words cut (``truncate_words``): when it kept no line (a
file's lines stay atoms while any is kept), or also when its windows kept every line outside
the over-long ones and the words cut keeps more of the text. Either way, a words cut at a grant
that keeps no line keeps no more than the smallest grant that keeps one shows
(``truncate_words.words_below_lines``)."""


def _by_lines(text: str, original_tokens: int, max_tokens: int, count: TokenCounter,
              *, head_share: float, fences: bool, rule: LineSplitting | None = None,
              first_line: int = 1, numbers: FileLines | None = None,
              words: Words = "if_more_kept") -> Truncation:
    """The line cut, or the words cut where ``words`` says: a grant whose text is a few short
    lines between lines longer than it (one fence and a long paragraph, a one-line JSON in a
    fence) kept those few lines and a marker, its grant unused."""
    def line_cut(grant: int) -> tuple[Truncation, bool, int]:
        return _truncate_lines(text, original_tokens, grant, count, head_share=head_share, fences=fences,
                               rule=rule, first_line=first_line, numbers=numbers)

    by_lines, capped, kept_chars = line_cut(max_tokens)
    if by_lines.over_budget or (by_lines.kept and not (
            capped and words == "if_more_kept")):
        return by_lines
    by_words = truncate_words(text, original_tokens, max_tokens, count)
    if by_words is None or (by_lines.kept and len(text) - by_words.omitted_chars <= kept_chars):
        return by_lines
    return words_below_lines(text, original_tokens, max_tokens, count, by_words, line_cut,
                             held=bool(by_lines.kept)) or by_lines


def _truncate_lines(text: str, original_tokens: int, max_tokens: int, count: TokenCounter,
                    *, head_share: float, fences: bool, rule: LineSplitting | None = None,
                    first_line: int = 1, numbers: FileLines | None = None) -> tuple[Truncation, bool, int]:
    """The line cut; whether its windows kept every line but the over-long ones (and those
    between them), which no larger grant could change; the characters it kept. The marker and
    the kept ranges name the lines by ``numbers`` when given, else from ``first_line`` on."""
    entry = probe_entry(("lines", text, head_share, fences, count, rule,
                          first_line if numbers is None else numbers), len(text))
    if "lines" not in entry:
        lines, trailing = split_lines(text)
        # (set before "lines": another thread that finds "lines" finds the chain)
        entry["chain"] = WindowChain(lines, lambda k: int(k * head_share))
        if rule is not None:
            entry["counts"] = LineCounts(lines, rule, rule.known(text))
        entry["lines"] = (lines, trailing, fence_states(lines) if fences else [None] * (len(lines) + 1))
    lines, trailing, states = entry["lines"]
    chain: WindowChain = entry["chain"]
    n = len(lines)
    end = "\n" if trailing else ""
    if numbers is None:
        numbers = FileLines.from_line(first_line, n)

    def parts(k: int) -> list[str | range]:
        head, tail = chain.split(k)
        out: list[str | range] = [range(0, head)]
        before_marker = states[head]
        if before_marker is not None:
            out.append(closing_fence(before_marker))
        out.append(_numbered_marker(n - k, numbers.numbered(head, n - tail)))
        after_marker = states[n - tail]
        if after_marker is not None:
            out.append(after_marker)
        out.append(range(n - tail, n))
        return out

    def render(k: int) -> str:
        return kept_probe(joined(lines, parts(k), end))

    counts: LineCounts | None = entry.get("counts")
    measure = None if counts is None else (lambda k, _: counts.count(parts(k), end))
    found = fit_line_windows(n - 1, render, count, max_tokens, entry["probes"], measure)
    if found is None:
        return marker_only(text, original_tokens, "line", n, count), False, 0
    k, out_text, tokens = found
    head, tail = chain.split(k)
    kept_chars = sum(len(line) + 1 for line in chain_lines(lines[:head], lines[n - tail:]))
    omitted = sum(b - a + 1 for a, b in numbers.numbered(head, n - tail)) or n - k  # as its marker says
    return (truncation_of(out_text, strategy="fenced_lines" if fences else "lines", unit="line",
                          original=text, original_tokens=original_tokens, tokens=tokens,
                          kept=numbers.numbered(0, head) + numbers.numbered(n - tail, n), omitted=omitted),
            held_off(lines, head, n - tail, max_tokens, count, lambda: count(joined(lines, parts(0), end))),
            kept_chars)


# ------------------------------------------------------------------ JSON


_JSON_PIECES_FROM = 4096
"""JSON from this many characters on is counted by pieces (``json_pieces.JsonPieces``): below it,
a probe's render is counted whole faster than it is laid out in pieces (a tau-bench record of
~750 characters: 155 us per cut whole, 338 by pieces; a 3.5 KB array of records: 0.8 ms whole,
0.44 by pieces)."""


PARSE_DEPTH = 400
"""Containers nested past which a JSON document is cut as a head as written (``json_deep``), its
value not used. Why: the parse, the encoders and the layout in pieces recurse (a frame or two a
level), and the recursion limit counts from the caller's frame: where a ``RecursionError``
stopped them depended on the call (the pieces, two frames a level and walked as far as twice the
grant, stopped at ~500 levels where the compact form fitted; a parse from 300 frames deeper
stopped at a 700-level document a parse from the test read), and the memo kept "past the parser"
for the text's every later cut, whose output then depended on what the process cut before.
Decided by the depth, per text (``json_shrink.text_nested_past`` when the parse itself ran out
of stack), the cut's kind is the same whatever the call and the grant; a document within it
needs ~500 frames, and a caller too deep to leave them has its cut made on a fresh stack
(``fresh_stack``), so the cut and the memo are the same from any stack."""


def _parse_json(text: str, entry: dict[str, Any], count: TokenCounter, rule: LineSplitting | None,
                original_tokens: int, max_tokens: int) -> Truncation | None:
    """``entry["json"]``: ``text``'s value and what its cuts share, or None when it is not to be
    cut as a value (``entry["deep"]``: a head as written; else not JSON: cut as text). Made once
    per text and the same whatever the grant: nothing a cut's grant decides is written here.

    Returns the cut when the compact form, counted before the search is set up
    (``json_compact``), fits the grant: ``entry["json"]`` is then left unset, made by the first
    cut it does not fit."""
    try:
        value, numbers = loads(text)  # NaN, 1e400, -0 kept: written back as they were
    except RecursionError:
        # past the stack: past PARSE_DEPTH (a head as written, kept for every cut), or a caller
        # too deep for a text within it: nothing kept, the cut is moved (``_truncate_json``)
        if not text_nested_past(text, PARSE_DEPTH):
            raise
        entry["deep"] = True
        entry["json"] = None
        return None
    except ValueError as error:
        # not JSON; or not to be written back as it was: a head as written. Not parsed again.
        entry["deep"] = isinstance(error, Unwritable)
        entry["json"] = None
        return None
    depth = nesting(value, PARSE_DEPTH)
    if depth > PARSE_DEPTH:
        entry["deep"] = True
        entry["json"] = None
        return None
    entry["nested"] = depth > SHRINK_DEPTH  # a head as written unless the compact form fits
    # Not in pieces past half of it: their walk recurses up to two frames a level (the compact
    # form is then counted whole, once per text).
    by_pieces = (depth <= PARSE_DEPTH // 2 and len(text) >= _JSON_PIECES_FROM and rule is not None
                 and rule.word_ends and pieces_apply(text))
    orjson_safe = orjson_writes_the_same(value)
    if "whole_tokens" not in entry:
        whole = count_compact(entry, text, value, orjson_safe, numbers, count,
                              PIECES_CHARS_PER_TOKEN * max_tokens if by_pieces else None)
        if whole is not None:
            entry["whole_tokens"] = whole
            if (fits := compact_fits(entry, text, original_tokens, max_tokens)) is not None:
                return fits
    saturated = saturations(value)  # the subtrees a probe's knob keeps whole: not walked
    pieces = JsonPieces(value, count, kept_probe, saturated, numbers) if by_pieces else None
    # set once: threads cutting one text share the entry's probes, so they must share its
    # renders too (each its own dict: the answer another thread's probe cached was missing
    # from this one's, a KeyError below)
    entry.setdefault("json", (value, saturated[id(value)], {}, pieces, saturated, orjson_safe, numbers))
    return None


def _truncate_json(text: str, original_tokens: int, max_tokens: int, count: TokenCounter,
                   rule: LineSplitting | None = None, first_line: int = 1,
                   fresh_stack: bool = False) -> Truncation:
    # the rule too: the entry's layout in pieces (``_parse_json``) is made only with one
    entry = probe_entry(("json", text, count, rule), len(text))
    if (fits := compact_fits(entry, text, original_tokens, max_tokens)) is not None:
        return fits
    try:
        if "json" not in entry and (
                fits := _parse_json(text, entry, count, rule, original_tokens, max_tokens)):
            return fits
        if entry["json"] is not None:
            return _cut_value(text, entry, original_tokens, max_tokens, count)
    except RecursionError:
        # A text within PARSE_DEPTH (past it, nothing recursive is run) from a caller whose
        # stack ran out: cut again on a stack that starts empty, as from a shallow caller (the
        # cut and the memo the same from any stack; ``fresh_stack``). There, a stack that still
        # ran out (a recursion limit lowered under PARSE_DEPTH's room): this cut alone, as text.
        if not fresh_stack:
            return on_fresh_stack(lambda: _truncate_json(text, original_tokens, max_tokens, count, rule,
                                                         first_line, fresh_stack=True))
    body = text.removeprefix(BOM)
    if (entry.get("deep") or entry.get("json") is not None) and (
            deep := cut_deep(body, entry, max_tokens, count, original_tokens, skip=len(text) - len(body))):
        return deep
    by_lines = _by_lines(text, original_tokens, max_tokens, count, head_share=0.5,
                         fences=has_fence(text), rule=rule, first_line=first_line)
    return or_blocks(by_lines, text, entry, max_tokens, count, rule, first_line)  # or by documents


def _cut_value(text: str, entry: dict[str, Any], original_tokens: int, max_tokens: int,
               count: TokenCounter) -> Truncation:
    """The cut of a parsed document (:func:`_parse_json`): its compact form when it fits, else a
    head as written when nested past :data:`SHRINK_DEPTH`, else the knob's largest fit."""
    value, top_max, renders, pieces, saturated, orjson_safe, numbers = entry["json"]

    def render(level: int) -> str:
        if level not in renders:
            stats = ShrinkStats()
            if pieces is None:
                shrunk = shrink(value, level, stats, top=True, saturated=saturated)
                renders[level] = (kept_probe(dump(shrunk, orjson_safe, numbers)), stats)
            else:  # only the answer is rendered: the probes are counted from the pieces
                renders[level] = (kept_probe(pieces.text(pieces.atoms(level, stats))), stats)
        out: str = renders[level][0]
        return out

    # A probe's count stops at twice the grant (``JsonPieces.tokens_within``): one knob step
    # can add a whole document of MB to a render, and the search probes near such steps.
    # Twice: a bound kept in the memo decides the next cuts' grants, a little larger.
    measure = None if pieces is None else (
        lambda level, limit: pieces.tokens_within(level, 2 * limit))
    # The compact form's count, once per text (a result at the budget's edge is cut again at
    # every build, and it was rendered and counted whole each time: ~0.2-0.6 s for 1-3 MB
    # nested a few hundred levels). A text that is its compact form (most APIs' JSON) has
    # the text's count, nothing rendered. Counted by pieces, a bound may be all that is
    # known of it (as of a probe's): measured again for a grant the bound does not decide.
    whole_tokens = entry.get("whole_tokens")
    if whole_tokens is None or 0 < -whole_tokens <= max_tokens:
        whole_tokens = entry["whole_tokens"] = (
            count(text) if _written_compact(text, value, orjson_safe, numbers)
            else count(render(top_max)) if measure is None else measure(top_max, max_tokens))
    found: tuple[int, str, int] | None
    if 0 <= whole_tokens <= max_tokens:  # compact form fits where the original did not
        found = (top_max, render(top_max), whole_tokens)
    elif entry["nested"]:  # nested deep: a head as written, as past the parser (``SHRINK_DEPTH``)
        body = text.removeprefix(BOM)
        return cut_deep(body, entry, max_tokens, count, original_tokens, skip=len(text) - len(body)) or (
            marker_only(text, original_tokens, "json_member", 0, count))
    else:
        found = fit_line_windows(top_max - 1, render, count, max_tokens, entry["probes"], measure)
    if found is None:
        return marker_only(text, original_tokens, "json_member", 0, count)
    level, out_text, tokens = found
    render(level)  # rendered already (``fit_line_windows`` renders its answer last): a lookup
    stats = renders[level][1]
    # a string's kept characters, or a number's (cut as a string of its literal's head)
    unit: Unit = "json_member" if isinstance(value, list | dict) else "char"
    if level == top_max:  # nothing dropped: the compact form fits where the original did not
        return truncation_of(out_text, strategy="none", unit=unit, original=text,
                             original_tokens=original_tokens, tokens=tokens, kept=stats.kept)
    return truncation_of(out_text, strategy="json", unit=unit, original=text,
                         original_tokens=original_tokens, tokens=tokens, kept=stats.kept,
                         omitted=stats.omitted, omitted_chars=stats.omitted_chars)


def _written_compact(text: str, value: Any, orjson_safe: bool, numbers: bool) -> bool:
    """Whether ``text`` is the compact form of its parse ``value`` (a compact form holds no
    line break: a pretty-printed text is not dumped to find out)."""
    return "\n" not in text and dump(value, orjson_safe, numbers) == text


# ------------------------------------------------------------------ entry points


def truncate(text: str, max_tokens: int, *, kind: ContentKind,
             count: TokenCounter, line_splitting: LineSplitting | None = None,
             first_line: int = 1, numbers: FileLines | None = None) -> Truncation:
    """``text`` cut to ``max_tokens`` at the boundaries of its ``kind`` (see module doc).

    Text that already fits is returned unchanged (``truncated=False``). ``line_splitting`` (the
    ``TokenCounter.line_splitting`` of the encoding ``count`` counts) lets line windows be
    counted from kept line blocks (:mod:`~contextfold.projections.line_counts`): same result.
    ``first_line``: the number of a ``file`` excerpt's first line (a read of lines 1000-3000),
    so its marker and kept ranges name the file's lines, as its ``#L1000-L3000`` ref does (also
    for ``json`` that does not parse and is cut by lines: a TOML excerpt starting with ``[``).
    ``numbers``: a ``file`` text whose lines are not all the file's, consecutive (a stale rest:
    a note line, and a marker line where a newer read's lines were cut out): which file line
    each line is, in place of ``first_line``.
    """
    check_budget(max_tokens)
    original_tokens = count(text)
    if kind not in ("file", "json"):  # JSON that does not parse is cut by lines
        first_line = 1
    if kind != "file":
        numbers = None
    if original_tokens <= max_tokens:
        lines, _ = split_lines(text)
        unit: Unit = "json_member" if kind == "json" else "line"
        every = (FileLines.from_line(first_line, len(lines)) if numbers is None
                 else numbers).numbered(0, len(lines))
        return truncation_of(text, strategy="none", unit=unit, original=text,
                             original_tokens=original_tokens, tokens=original_tokens,
                             kept=every if unit == "line" else [])
    match kind:
        case "log":
            # A log whose lines are all too long to keep whole (a progress bar's one line) is
            # cut at whitespace rather than shown as a marker alone: the grant is used, not lost.
            return _by_lines(text, original_tokens, max_tokens, count, head_share=1 / 3, fences=False,
                             rule=line_splitting)
        case "file":  # a fence (a README's, a docstring's) is never left open either
            return _by_lines(text, original_tokens, max_tokens, count, head_share=0.5,
                             fences=has_fence(text), rule=line_splitting, first_line=first_line,
                             numbers=numbers, words="if_none_kept")
        case "markdown" | "text":
            return _by_lines(text, original_tokens, max_tokens, count, head_share=0.5, fences=True,
                             rule=line_splitting)
        case "json":
            return _truncate_json(text, original_tokens, max_tokens, count, line_splitting, first_line)
        case _:
            assert_never(kind)

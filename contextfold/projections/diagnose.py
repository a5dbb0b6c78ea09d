"""Log diagnosis, and the lean rendering of a long log for the context.

A failing command's log is mostly noise: what the model needs is the exit
code, the first thing that went wrong, how much went wrong, and the end of the
log (DESIGN.md section 7: "a truncated log keeps the exit code, the first key
error and the tail"). :func:`diagnose_log` finds those; :func:`lean_log`
renders a header with them, then a head and a tail window of whole lines, and
a line naming where the full log lives.

The *first key error* is the first line (in log order) that matches one of
:data:`KEY_ERROR_PATTERNS`; when one line matches several, the earlier
pattern in that tuple names it (some only when the exit code is non-zero; with none
matching, a failing log's first ``path:line:col: message`` line that is no warning or note). The
patterns also know the translated messages of gcc, git, coreutils and bash (``错误：``,
``Fehler:``, ``没有那个文件或目录``: :mod:`~contextfold.projections.log_translations`). ANSI
colour codes are stripped before matching, and a line redrawn with carriage returns is read as a
terminal shows it, from its last carriage return on. A Python traceback is taken whole, from
``Traceback (most recent call last):`` to its final (first unindented)
exception line; any other match
takes its line plus the indented continuation lines right after it (a cargo
``--> src/main.rs:4:18`` pointer, more pytest ``E`` lines), at most
:data:`CONTINUATION_LINES`. A verdict line (``FAIL: test_b (t.T)``, ``> Task :x FAILED``) names
what failed, not why: its block reaches on to the key error that follows it (``_span``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from itertools import chain, repeat

from pydantic import BaseModel, ConfigDict

from contextfold.projections.code_fences import closing_fence, fence_states
from contextfold.projections.graphemes import ESCAPE_SEQUENCE
from contextfold.projections.lazy_regex import LazyPattern
from contextfold.projections.line_counts import LineCounts, LineSplitting, joined
from contextfold.projections.line_windows import WindowChain, held_off
from contextfold.projections.log_headers import header_plan, header_variants
from contextfold.projections.log_patterns import (
    FAIL_HINT,
    FAILED,
    KEY_ERROR_PATTERNS,
    LOCATED,
    WARN_HINTS,
    PatternName,
    candidate_lines,
    is_warning,
    match_line,
)
from contextfold.projections.truncate import (
    KeptRange,
    TokenCounter,
    Truncation,
    fit_line_windows,
    kept_probe,
    line_marker,
    marker_only,
    probe_entry,
    split_lines,
)
from contextfold.projections.truncate_words import truncate_words
from contextfold.projections.truncation_result import check_budget

__all__ = [
    "CONTINUATION_LINES",
    "KEY_ERROR_PATTERNS",
    "FirstError",
    "LogDiagnosis",
    "PatternName",
    "diagnose_log",
    "lean_log",
]

CONTINUATION_LINES = 8
"""Indented lines kept after a non-traceback key error."""
_TRACEBACK_MAX_LINES = 2000
"""A traceback that never reaches its exception line stops here (a cut-off log)."""
class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FirstError(_Frozen):
    """The first key error: its 1-based line span, which pattern matched, its text."""

    line: int
    end_line: int
    pattern: PatternName
    text: str


class LogDiagnosis(_Frozen):
    """What a model needs to know about a log before reading any of it.

    The counts are of *lines*: a line counts as an error line when it matches
    any key-error pattern, as a warning line when it says warn/warning or
    names a ``…Warning``, as a failed line when it says fail/failed/failure.
    """

    exit_code: int | None
    first_error: FirstError | None
    error_lines: int
    warning_lines: int
    failed_lines: int
    total_lines: int


_CR_AT_LINE_END = re.compile(r"(?<!\r)\r++(?=\n|\Z)")
r"""Carriage returns ending a line. Matched only from the first of a run: as ``\r+(?=\n)|\r+\Z``
it was tried from every ``\r`` of a run that no newline ends, each reading to the run's end
and giving it back (a tool output of 8,000 ``\r`` took 0.5 s of CPU, 32,000 nine)."""
_TO_COLUMN_ONE = re.compile(r"\x1b\[[01]?G")
"""The cursor sent to the line's first column (``ESC [1G``, how npm's progress line redraws
itself): a carriage return by another name, read as one (stripped with the colours, it glued a
thousand frames and the error after them into one line, ``…packagesERROR:``, no ``ERROR``)."""
_CR_OVERWRITTEN = re.compile(r"^[^\n]*\r", re.MULTILINE)
r"""What a carriage return inside a line sends back to be overwritten: a progress bar redrawn a
thousand times ends in ``\rERROR: … No space left on device``, and the header quoted the first
400 characters of progress frames instead of the error. (Anchored at line starts, each line is
scanned once, back to its last ``\r``.)"""



def _block_end(clean: list[str], start: int, pattern: PatternName) -> int:
    """Index of the last line of the key-error block that starts at ``start``."""
    n = len(clean)
    if pattern == "python_traceback":
        i = start + 1
        while i < n and i - start < _TRACEBACK_MAX_LINES:
            if clean[i] and not clean[i][0].isspace():
                return i  # the final "SomeError: message" line
            i += 1
        return min(i, n) - 1
    end = start
    if pattern == "panic" and _PANIC_AT.search(clean[start]) and start + 1 < n and clean[start + 1].strip():
        end += 1  # the panic's message
    while (end + 1 < n and end - start < CONTINUATION_LINES
           and clean[end + 1].strip()
           and (clean[end + 1][0].isspace()
                or (pattern == "pytest_e" and clean[end + 1].startswith("E "))
                or (pattern == "error" and _RUST_GUTTER.match(clean[end + 1]) is not None))):
        end += 1
    return end


_PANIC_AT = re.compile(r"\bpanicked at \S*:\d+:\d+:$")
"""Rust's panic line since 1.73: the message is printed on the next line, unindented
(``thread 'main' panicked at src/main.rs:4:5:`` then ``index out of bounds: …``)."""
_RUST_GUTTER = re.compile(r"^\d+ +\|")
"""rustc's source line under an error, its number in column 0 (``14 |     let y: i32 = "a";``): it
ended the block before the label saying what was wrong (``^^^ expected `i32`, found `&str```)."""


_VERDICT = LazyPattern(
    r"^\s*(?:--- )?FAIL(?=[:\s]|$)"                       # go, jest, unittest (the test_fail pattern)
    r"|\bFAILED\s*(?:\[\s*\d+%\])?$"                      # "> Task :app:compileJava FAILED", pytest -v
    r"|^[\s_=]*ERROR (?:collecting|at (?:setup|teardown) of|in) "  # pytest's, webpack's titles
    r"|^ERROR: \w+ \(")                                     # unittest's "ERROR: test_x (t.T)"
"""A line that names what failed, not why: a test runner's or build tool's verdict or title."""
_VERDICT_LOOKAHEAD = 3
"""Lines after a verdict searched for the error it stands for (a ``-----`` rule, a blank line and
pytest's "ImportError while importing test module" come between)."""
_GO_FAIL = re.compile(r"^(\s*)--- FAIL")
_GO_STATUS = re.compile(r"^\s*(?:--- (?:PASS|FAIL|SKIP)|=== )")
_GO_JSON = re.compile(r'^\{.*"Test":"((?:[^"\\]|\\.)*)".*"Output":"((?: |\\t)*)')
"""A ``go test -json`` output record: its test, and the indentation its output line opens with
(what :func:`_go_json` finds, without backtracking)."""
_GO_TEST, _GO_OUTPUT = '"Test":"', '"Output":"'
_JSON_CHARS = re.compile(r'(?:[^"\\]|\\.)*+')
_GO_INDENT = re.compile(r'(?: |\\t)*+')


def _go_json(line: str) -> tuple[str, str] | None:
    """The groups of ``_GO_JSON.match(line)`` for one line (no newline), in linear time.

    Why not the regex: its first ``.*`` backs off from the line's end to each ``"Test":"`` in
    turn, and from each the second ``.*`` reads to the end again for ``"Output":"``: a line
    above a failed test's record repeating ``"Test":"a",`` with no output after cost 0.16 s of
    CPU at 32 KB, 2.4 s at 128 KB. The regex's answer is the last ``"Test":"`` whose string
    (read once: it ends before the next one's ``t"``) closes before the line's last
    ``"Output":"``, which its greedy ``.*`` takes."""
    output = line.rfind(_GO_OUTPUT) if line.startswith("{") else -1
    at = line.rfind(_GO_TEST, 1, output - 1) if output >= 0 else -1
    while at >= 0:
        string = _JSON_CHARS.match(line, at + len(_GO_TEST))
        assert string is not None  # (a possessive star: it matches, if only nothing)
        if line.startswith('"', string.end()) and output > string.end():
            indent = _GO_INDENT.match(line, output + len(_GO_OUTPUT))
            assert indent is not None
            return string.group(), indent.group()
        at = line.rfind(_GO_TEST, 1, at + len(_GO_TEST) - 1)
    return None


def _go_json_start(clean: list[str], start: int) -> int:
    """Where the log of the test whose ``--- FAIL`` record is at ``start`` begins: the output
    records of the same test just above it, indented more deeply (``go test -v`` in JSON)."""
    verdict = _go_json(clean[start])
    if verdict is None:
        return start
    at = start
    while start > 0 and at - start < CONTINUATION_LINES:
        above = _go_json(clean[start - 1])
        if above is None or above[0] != verdict[0] or len(above[1]) <= len(verdict[1]):
            break
        start -= 1
    return start


def _span(clean: list[str], start: int, pattern: PatternName, failing: bool = True) -> tuple[int, int]:
    """Indexes of the first and last line of the first key error, matched at ``start``.

    A verdict line (:data:`_VERDICT`: ``FAIL: test_b (t.T)``, ``> Task :app:compileJava FAILED``,
    ``ERROR collecting tests/test_a.py``) says what failed; the error that says why follows it,
    unindented: the block reaches to the end of the first key error within
    :data:`_VERDICT_LOOKAHEAD` lines (a traceback, ``E`` lines, a javac ``error:``), unless another
    verdict comes first. Go's ``--- FAIL: TestAdd`` follows its test's log, indented more deeply
    (``    add_test.go:10: got 4, want 3``): those lines just above open the block."""
    end = _block_end(clean, start, pattern)
    line = clean[start]
    if pattern == "go_json_fail":
        return _go_json_start(clean, start), end
    if not _VERDICT.search(line):
        return start, end
    if go := _GO_FAIL.match(line):
        depth, at = len(go.group(1)), start
        while (start > 0 and at - start < CONTINUATION_LINES and clean[start - 1].strip()
               and len(clean[start - 1]) - len(clean[start - 1].lstrip()) > depth
               and not _GO_STATUS.match(clean[start - 1])):
            start -= 1
    for j in range(end + 1, min(end + 1 + _VERDICT_LOOKAHEAD, len(clean))):
        if _VERDICT.search(clean[j]):
            break
        if (name := match_line(clean[j], failing=failing)) is not None:
            return start, _block_end(clean, j, name)
    return start, end


def _first_error(clean: list[str], at: int, pattern: PatternName, failing: bool) -> FirstError:
    start, end = _span(clean, at, pattern, failing)
    return FirstError(line=start + 1, end_line=end + 1, pattern=pattern, text="\n".join(clean[start:end + 1]))


def diagnose_log(text: str, exit_code: int | None) -> LogDiagnosis:
    """The exit code, first key error and line counts of ``text`` (see module doc)."""
    lines, trailing = split_lines(text)
    # Colour codes, line-final carriage returns and what a carriage return overwrites hold no
    # newline: stripped from the whole text, each line is what stripping it alone gives, the
    # text a terminal shows (the last frame of a progress bar, the error printed over it).
    cleaned = ESCAPE_SEQUENCE.sub("", _TO_COLUMN_ONE.sub("\r", text)) if "\x1b" in text else text
    if "\r" in cleaned:
        cleaned = _CR_OVERWRITTEN.sub("", _CR_AT_LINE_END.sub("", cleaned))
    clean = lines if cleaned is text else cleaned.split("\n")
    if trailing and clean is not lines:
        clean.pop()
    low = cleaned.lower()
    candidates: Iterable[tuple[int, int]] = (candidate_lines(low).items() if len(low) == len(cleaned)
                                             else zip(range(len(clean)), repeat(-1)))
    first: FirstError | None = None
    errors = warnings = failed = 0
    failing = exit_code is not None and exit_code != 0
    for i, hints in candidates:
        line = clean[i]
        name = match_line(line, hints, failing)
        if name is not None:
            errors += 1
            if first is None:
                first = _first_error(clean, i, name, failing)
        if hints & WARN_HINTS and is_warning(line, hints):
            warnings += 1
        if hints & FAIL_HINT and FAILED.search(line):
            failed += 1
    if first is None and failing and (found := LOCATED.search(cleaned)) is not None:
        first, errors = _first_error(clean, cleaned.count("\n", 0, found.start()), "located", True), 1
    return LogDiagnosis(exit_code=exit_code, first_error=first, error_lines=errors,
                        warning_lines=warnings, failed_lines=failed, total_lines=len(lines))


# ------------------------------------------------------------------ lean log


def lean_log(text: str, exit_code: int | None, max_tokens: int, count: TokenCounter, *,
             artifact_ref: str | None = None,
             line_splitting: LineSplitting | None = None) -> Truncation:
    """A long log as diagnosis header + head window + tail window + where the rest is.

    A log that fits is returned unchanged: the caller still has the exit code.
    Otherwise a header is chosen by the grant, the richest that takes at most half of it
    (exit code first, then the first key error, condensed if need be; the cheapest where none
    is that small), and the log's part gets a room that never shrinks as the grant grows
    (:func:`~contextfold.projections.log_headers.header_plan`); then as many whole lines
    as fit the room, a third from the head and two thirds from the tail, grown along one chain
    (:class:`~contextfold.projections.line_windows.WindowChain`: a larger grant keeps every
    line a smaller one kept); when no line fits, or only the lines outside over-long ones do,
    a character excerpt that keeps more replaces them. A code fence the cut
    falls in is closed before the marker and re-opened after it. ``kept`` lists the head
    and tail line ranges. ``line_splitting``: as for
    :func:`~contextfold.projections.truncate.truncate` (same result, fewer tokenizations).
    """
    check_budget(max_tokens)
    where = artifact_ref if artifact_ref is not None else "not stored"
    # A failing log at the budget's edge is cut again at every build, each time to a slightly
    # different size: its lines, diagnosis, line blocks and probes are kept across the cuts.
    entry = probe_entry(("lean_log", text, exit_code, where, count, line_splitting), len(text))
    if "log" not in entry:
        lines, trailing = split_lines(text)
        entry["log"] = (count(text), lines, trailing)
    original_tokens, lines, trailing = entry["log"]
    n = len(lines)
    if original_tokens <= max_tokens:
        return Truncation(text=text, truncated=False, strategy="none", unit="line",
                          original_chars=len(text), original_tokens=original_tokens,
                          tokens=original_tokens, kept=(KeptRange(start=1, end=n),))
    if "parse" not in entry:  # one assignment: another thread never sees half of it
        entry["parse"] = (header_variants(diagnose_log(text, exit_code), where),
                          None if line_splitting is None
                          else LineCounts(lines, line_splitting, line_splitting.known(text)),
                          fence_states(lines) if "```" in text or "~~~" in text else None,
                          WindowChain(lines, lambda k: k // 3))  # a third head, two thirds tail
    variants: list[tuple[str, bool]]
    counts: LineCounts | None
    fences: list[str | None] | None
    lines_of: WindowChain
    variants, counts, fences, lines_of = entry["parse"]
    end = "\n" if trailing else ""

    def body(k: int) -> list[str | range]:
        """The log's part of ``k`` kept lines: the head window, the marker, the tail window (a
        fence the cut falls in closed before the marker, re-opened after)."""
        head, tail = lines_of.split(k)
        marker = line_marker(n - k, head + 1, n - tail)
        if fences is None:
            return [range(0, head), marker, range(n - tail, n)]
        before, after = fences[head], fences[n - tail]
        return [range(0, head), *([closing_fence(before)] if before is not None else []), marker,
                *([after] if after is not None else []), range(n - tail, n)]

    def framed_parts(k: int, header: str, framed: bool) -> list[str | range]:
        return [header, "[log excerpt]", *body(k), f"[full log: {where}]"] if framed else [header, *body(k)]

    def tokens_of(parts: list[str | range]) -> int:
        return count(joined(lines, parts, end)) if counts is None else counts.count(parts, end)

    if "frames" not in entry:  # each header's tokens with its frame and a bare marker
        entry["frames"] = ([tokens_of(framed_parts(0, h, f)) for h, f in variants], tokens_of(body(0)))
    frames, bare = entry["frames"]
    plan = header_plan(frames, bare, max_tokens)
    if plan is None:
        return marker_only(text, original_tokens, "line", n, count)
    chosen, room = plan
    header, framed = variants[chosen]
    found = fit_line_windows(n - 1, lambda k: kept_probe(joined(lines, body(k), end)), count, room,
                             entry["probes"].setdefault(None, {}),
                             None if counts is None else lambda k, _: counts.count(body(k), end))
    k = 0 if found is None else found[0]
    tokens = tokens_of(framed_parts(k, header, framed))
    while tokens > max_tokens and k > 0:  # counts not additive where the header meets the lines
        k -= 1
        tokens = tokens_of(framed_parts(k, header, framed))
    head, tail = lines_of.split(k)

    def kept_chars(k: int) -> int:
        head, tail = lines_of.split(k)
        return sum(len(line) + 1 for line in chain(lines[:head], lines[n - tail:]))

    def excerpt_at(room: int) -> Truncation | None:
        return _char_excerpt(text, lines, header, framed, where, max_tokens, room, count, original_tokens)

    # No line kept, or every line but the over-long ones (told at the least room that keeps
    # these lines, so for every room that keeps them alike): their characters may say more. An
    # excerpt shows no more than the lines the next room that keeps more lines keeps
    # (:func:`_capped`), so the characters shown never fall as the grant grows.
    if k == 0 or held_off(lines, head, n - tail, tokens_of(body(k)), count, lambda: bare):
        excerpt = excerpt_at(room - 1)
        if excerpt is not None and k < n - 1:
            more = fit_line_windows(n - 1, lambda k: kept_probe(joined(lines, body(k), end)), count,
                                    tokens_of(body(k + 1)), entry["probes"][None])
            excerpt = _capped(excerpt, excerpt_at, room - 1, len(text),
                              kept_chars(max(more[0] if more else 0, k + 1)))
        if excerpt is not None and len(text) - excerpt.omitted_chars > kept_chars(k):
            return excerpt
    if tokens > max_tokens:
        return marker_only(text, original_tokens, "line", n, count)
    return Truncation(
        text=joined(lines, framed_parts(k, header, framed), end), truncated=True, strategy="lean_log",
        unit="line", original_chars=len(text), original_tokens=original_tokens, tokens=tokens,
        kept=tuple(KeptRange(start=a, end=b) for a, b in ((1, head), (n - tail + 1, n)) if a <= b),
        omitted=n - k,
    )


def _capped(excerpt: Truncation | None, excerpt_at: Callable[[int], Truncation | None], room: int,
            size: int, cap: int) -> Truncation | None:
    """``excerpt`` (cut to ``room``), or where it shows more than ``cap`` characters the excerpt
    of the largest room that shows no more (None when none does).

    Why: an excerpt fills its room, a few characters a token, and the first room that kept a
    line (or one more) kept that line alone (a log's last, a few characters): one more token of
    grant showed fewer of the log (36 of the 39 long SWE-agent observations). Capped, the
    characters shown never fall as the grant grows: the excerpt grows to the cap, then the
    lines take over."""
    def chars(cut: Truncation | None) -> int:
        return 0 if cut is None else size - cut.omitted_chars

    if chars(excerpt) <= cap:
        return excerpt
    low, high, found = _LEAST_EXCERPT_TOKENS - 1, room, None
    while high - low > 1:
        mid = (low + high) // 2
        cut = excerpt_at(mid)
        if chars(cut) <= cap:
            low, found = mid, cut
        else:
            high = mid
    return found


_LEAST_EXCERPT_TOKENS = 8
"""Below this many tokens of room a character excerpt says less than the marker it replaces."""


def _char_excerpt(text: str, lines: list[str], header: str, framed: bool, where: str,
                  max_tokens: int, room: int, count: TokenCounter, original_tokens: int) -> Truncation | None:
    """Head and tail characters of the log, cut at a word break nearby (the ``words`` cut,
    :mod:`~contextfold.projections.truncate_words`), in place of a marker that kept no line because a
    line is longer than the whole room: a failing call whose output is one long line (an API's
    JSON error body) showed its diagnosis and nothing of the output, however large its grant.
    None when no excerpt fits beside the header. (It was None too where every line was shorter
    than the room, the lines kept as atoms; but a room short of a line and its marker then
    showed nothing where a smaller one had shown an excerpt: the caller caps an excerpt at what
    the first room that keeps a line keeps, :func:`_capped`, so short lines get one too.)"""
    def framed_text(excerpt: str) -> str:
        parts = [header, "[log excerpt]", excerpt, f"[full log: {where}]"] if framed else [header, excerpt]
        return "\n".join(parts)

    if room < _LEAST_EXCERPT_TOKENS:
        return None
    for _ in range(3):  # the joins may tokenize a token or two differently: shrink and retry
        if room < _LEAST_EXCERPT_TOKENS:
            return None
        # the words cut itself: ``truncate``'s log cut took lines where a few fitted, and the
        # excerpt was gone at a room where a smaller one had one
        cut = truncate_words(text, original_tokens, room, count)
        if cut is None:
            return None
        out = framed_text(cut.text)
        tokens = count(out)
        if tokens <= max_tokens:
            return Truncation(text=out, truncated=True, strategy="lean_log", unit="char",
                              original_chars=len(text), original_tokens=original_tokens,
                              tokens=tokens, kept=cut.kept, omitted=cut.omitted,
                              omitted_chars=cut.omitted_chars)
        room -= tokens - max_tokens
    return None


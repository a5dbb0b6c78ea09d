"""The key-error patterns a log is diagnosed by, and the word scan that finds the lines they can match.

Why apart from :mod:`~contextfold.projections.diagnose`: which lines of a log are errors is a
table of tools' output shapes that grows tool by tool, each with the hint word that lets a line
without it go unsearched (:data:`_ANYWHERE`); the blocks, counts and lean rendering built on
them do not change with it.
"""

from __future__ import annotations

import re
from typing import Literal, Protocol, TypeAlias

from ahocorasick_rs import BytesAhoCorasick

from contextfold.projections import log_translations as translated

__all__ = ["FAILED", "FAIL_HINT", "KEY_ERROR_PATTERNS", "LOCATED", "WARNING", "WARN_HINT", "WARN_HINTS",
           "WHEN_FAILING", "LinePattern", "PatternName", "candidate_lines", "is_warning", "match_line"]

PatternName: TypeAlias = Literal[
    "python_traceback", "panic", "fatal", "segfault", "npm_err", "make", "pytest_e",
    "failed", "test_fail", "error", "exception", "pnpm_err", "yarn_err", "not_found", "located",
    "go_json_fail",
]

_FATAL = re.compile(r"\b(?:fatal|FATAL)(?: error)?:|\bFATAL\b")   # git, cc
# "error:" in any case, cargo's "error[E0308]:", tsc/MSBuild/MSVC's "error TS2322:", an ERROR
# level, "TypeError:"-style names, and a JSON error member that holds something (an API's
# error body: ``"error": {...``).
# Also kubectl's "Error from server (NotFound): …", eslint's "  10:7  error  'x' is …",
# "CMake Error at CMakeLists.txt:27 (find_package):", apt's "E: Unable to locate package x"
# and "Err:2 http://… InRelease" (the line under it says why).
_ERROR = re.compile(r"(?i:\berror(?:\[\w+\])?:)|\b(?i:error) [A-Z]+\d+:|\bERROR\b"
                    r'|\b[A-Z]\w*Error\b:|"errors?"\s*:(?!\s*(?:null\b|false\b|""|\[\s*\]|\{\s*\}))'
                    r"|^Error from server\b|^\s+\d+:\d+\s+error\s|^CMake Error\b|^E: |^Err:\d+ ")
_NOT_FOUND = re.compile(r"\bcommand not found\b|No such file or directory")  # sh, ENOENT


def _or(*patterns: re.Pattern[str]) -> re.Pattern[str]:
    return re.compile("|".join(p.pattern for p in patterns))

class LinePattern(Protocol):
    """What a key-error pattern is to its readers: a search of one line (a compiled regex, or
    :class:`_ExceptionName`, which finds what its regex finds in linear time)."""

    def search(self, string: str, /) -> re.Match[str] | None: ...


_EXCEPTION = re.compile(r"\b[A-Z][\w.]*Exception\b")
_EXCEPTION_WORD = re.compile(r"Exception\b")
_NAME_START = re.compile(r"\b[A-Z]")
_NAME_REST = re.compile(r"[\w.]*+")


class _ExceptionName:
    r"""``_EXCEPTION`` (``\b[A-Z][\w.]*Exception\b``: ``java.lang.NullPointerException``,
    ``System.InvalidOperationException``), searched in linear time.

    Why not the regex's own search: it tries a match at every capital opening a word, and in a
    dotted run (``A.A.A.…``) each of those is one; from each, ``[\w.]*`` read to the end of the
    run and gave it back a character at a time looking for ``Exception``. One 32 KB line of page
    text holding the word "exception" cost 2.4 s of CPU in a build, 128 KB 39 s, in every process.

    So the starts are found as the regex would, in one pass: a start needs an ``Exception\b``
    after it in the same ``[\w.]`` run. Take the next such word; the first capital opening a
    word before it whose run (``[\w.]*+``, read once) reaches the word is the leftmost start with
    a match; a capital whose run ends before the word cannot reach any later word either, and
    the search goes on from its run's end. The regex is then matched at that start alone (its
    greedy end, the run's last ``Exception\b``, read in one pass of the run)."""

    pattern = _EXCEPTION.pattern

    def search(self, string: str, /) -> re.Match[str] | None:
        starts = words = 0
        while (word := _EXCEPTION_WORD.search(string, words)) is not None:
            at = word.start()
            while (start := _NAME_START.search(string, starts, at)) is not None:
                rest = _NAME_REST.match(string, start.end())
                assert rest is not None  # (a possessive star: it matches, if only nothing)
                starts = rest.end()
                if starts > at:
                    return _EXCEPTION.match(string, start.start())
            # no start before the word reaches it (nor any later word); a start from it on may
            starts, words = at, at + 1
        return None


KEY_ERROR_PATTERNS: tuple[tuple[PatternName, LinePattern], ...] = (
    ("python_traceback", re.compile(r"^Traceback \(most recent call last\):")),
    ("panic", re.compile(r"\bpanic: |\bpanicked at\b")),                 # Go, Rust
    ("fatal", _or(_FATAL, translated.FATAL)),                            # and as translated
    ("segfault", re.compile(r"Segmentation fault|SIGSEGV")),
    ("npm_err", re.compile(r"^npm (?:ERR!|error) ")),
    ("make", re.compile(r"^g?make(?:\[\d+\])?: \*\*\*")),
    ("pytest_e", re.compile(r"^E {2,}\S")),
    ("failed", re.compile(r"\bFAILED\b")),
    # A test runner's verdict opening a line: Go's "--- FAIL: TestAdd" (indented for a subtest)
    # and closing "FAIL\tpkg", Jest's " FAIL  src/x.test.js", unittest's "FAIL: test_x (...)".
    ("test_fail", re.compile(r"^\s*(?:--- )?FAIL(?=[:\s]|$)")),
    # The same in ``go test -json``: an output record of ``--- FAIL: TestAdd``.
    ("go_json_fail", re.compile(r'"Output":"(?: |\\t)*--- FAIL: ')),
    ("error", _or(_ERROR, translated.ERROR)),
    ("exception", _ExceptionName()),
    ("pnpm_err", re.compile(r"\bERR_PNPM_[A-Z0-9_]+")),
    # Only in a failing command's output (:data:`WHEN_FAILING`): words a passing run prints too.
    ("yarn_err", re.compile(r"^error ")),                                   # yarn v1
    ("not_found", _or(_NOT_FOUND, translated.NOT_FOUND)),
    # A Go compiler or vet message, a ruff/flake8/pylint finding: ``./main.go:5:2: undefined: foo``,
    # ``src/a.py:1:8: F401 [*] `os` imported but unused``.
    ("located", re.compile(r"^\S+\.go:\d+:\d+: \S|^\S+\.pyi?:\d+:\d+: [A-Z]+\d+\b")),
)
"""The documented key-error patterns, in precedence order."""
WHEN_FAILING: frozenset[PatternName] = frozenset({"yarn_err", "not_found", "located"})
"""Patterns tried only when the exit code says the command failed: ``error …`` opens a line of
prose, a file missing is a passing shell step's ``ls`` as often as not."""
LOCATED = re.compile(r"^\S+:\d+:\d+: (?!(?:" + translated.NOT_ERROR_WORDS + r") ?[:\uff1a])\S", re.MULTILINE)
"""A ``path:line:col: message`` line: a failing command's first key error when no pattern
matched (a compiler or linter this table does not know), unless its message opens with a word
saying it is a warning or a note: gcc in a language the table does not know printed a warning
first, and that was named the first error."""

_WARNING = re.compile(r"(?i:\bwarn(?:ing)?\b)|\b[A-Z]\w*Warning\b")
WARNING = _or(_WARNING, translated.WARNING)
FAILED = re.compile(r"(?i:(?<!\b0 )\bfail(?:ed|ure|ures)?\b(?!\s*[:=]\s*0(?!\.?\d)))")
"""A failed line's word, but not a zero count (cargo's ``0 failed``, Surefire's ``Failures: 0``,
``failures=0``): a run with one failing test was announced as having a dozen failed lines."""


def match_line(line: str, hints: int = -1, failing: bool = True) -> PatternName | None:
    """The first key-error pattern ``line`` matches, trying only those whose hint words the line
    holds (``hints``, a mask of :data:`_PATTERN_HINT`; -1: every pattern), and of
    :data:`WHEN_FAILING` only when ``failing``. A pattern with translations is tried as its two
    halves, each behind its own hint (``_PARTS``): the same match or none, and an English line
    never runs the translations."""
    for name, bit, part, when_failing in _PARTS:
        if hints & bit and (failing or not when_failing) and part.search(line):
            return name
    return None


def is_warning(line: str, hints: int = -1) -> bool:
    """Whether ``line`` is a warning line (:data:`WARNING`), trying the halves its hints allow
    (a line whose ``hints & WARN_HINTS`` is 0 is none)."""
    return bool((hints & WARN_HINT and _WARNING.search(line))
                or (hints & _WARN_TRANSLATED and translated.WARNING.search(line)))


_ANYWHERE = ("error", "warn", "fail", "faıl", "fatal", "panic", "exception", "segmentation fault",
             "sigsegv", "err_pnpm_", "command not found", "no such file or directory", ".go:", ".py:",
             ".pyi:")
_AT_LINE_START = ("traceback (", "npm ", "make", "gmake", "e  ", "e: ", "err:")
"""Lower-cased substrings, at least one of which a line holds (or, for the second tuple, starts
with) whenever any key-error, warning or failed pattern matches it: ``error`` for the
``error`` alternatives (``ERROR``, ``…Error:``, ``error TS2322:``), ``warn`` for both warning
alternatives, ``fail`` for ``FAILED``, a ``FAIL`` verdict and the failed count, and so on, pattern
by pattern. The ``(?i)`` patterns also take four non-ASCII letters for ASCII ones (``re``'s case
folding: ``İ ı`` for ``i``, ``ſ`` for ``s``, ``K`` for ``k``): of the three such words only
``fail`` has one of those letters, hence ``faıl``; ``İ`` lower-cases to two characters, and a
text holding it is matched line by line. A new pattern needs a word here (or shares one): a line
without any is never searched. Translated words (``错误：``, ``Fehler:``) have theirs in
:data:`.log_translations.HINTS`, each pattern behind a bit of its own (``_TRANSLATED_BIT``)."""
_TRANSLATED_BIT = {translated.FATAL: 16384, translated.ERROR: 32768, translated.NOT_FOUND: 65536,
                   translated.WARNING: 131072}
"""The hint bit of each translated pattern (:data:`.log_translations.HINTS`: its words)."""
_TRANSLATED_WORDS = tuple((w, _TRANSLATED_BIT[p]) for p, words in translated.HINTS.items() for w in words)
_HINTS = BytesAhoCorasick([w.encode() for w in _ANYWHERE] + [w.encode() for w, _ in _TRANSLATED_WORDS]
                          + [b"\n" + w.encode() for w in _AT_LINE_START])
_FIRST_LINE_START = len(_ANYWHERE) + len(_TRANSLATED_WORDS)
"""Index of the first line-start word in ``_HINTS`` (each found with the newline before it)."""
_LINE_START_BYTES = tuple(w.encode() for w in _AT_LINE_START)
_HINT_BIT = (1, 2, 4, 4, 8, 16, 32, 64, 64,  # error, warn, fail, faıl, fatal, panic, exception, segv x2
             2048, 4096, 4096, 8192, 8192, 8192,  # err_pnpm_, not found x2, .go: .py: .pyi:
             *(bit for _, bit in _TRANSLATED_WORDS),
             128, 256, 512, 512, 1024, 1, 1)  # traceback, npm, make, gmake, "e  ", apt's "e: " "err:"
"""Per word of ``_HINTS``: the bit of the patterns it is the hint of (below)."""
_PATTERN_HINT: dict[PatternName, int] = {
    "python_traceback": 128, "panic": 16, "fatal": 8, "segfault": 64, "npm_err": 256, "make": 512,
    "pytest_e": 1024, "failed": 4, "test_fail": 4, "go_json_fail": 4, "error": 1, "exception": 32,
    "pnpm_err": 2048, "yarn_err": 1, "not_found": 4096, "located": 8192}
"""The hint bit without which a key-error pattern cannot match (``WARNING``: 2, ``FAILED``: 4).
A log whose every line says ``warning`` ran twelve patterns on each of its lines: 5 s a 10 MB
log, 97 s a 55 MB one, in the first build that cut it."""
WARN_HINT, FAIL_HINT = 2, 4
_WARN_TRANSLATED = _TRANSLATED_BIT[translated.WARNING]
WARN_HINTS = WARN_HINT | _WARN_TRANSLATED
"""The hints of a warning line in any language."""

_HALVES: dict[PatternName, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "fatal": (_FATAL, translated.FATAL), "error": (_ERROR, translated.ERROR),
    "not_found": (_NOT_FOUND, translated.NOT_FOUND)}
def _halves(name: PatternName, pattern: LinePattern) -> tuple[tuple[int, LinePattern], ...]:
    if name not in _HALVES:
        return ((_PATTERN_HINT[name], pattern),)
    english, other = _HALVES[name]
    return (_PATTERN_HINT[name], english), (_TRANSLATED_BIT[other], other)


_PARTS: tuple[tuple[PatternName, int, LinePattern, bool], ...] = tuple(
    (name, bit, part, name in WHEN_FAILING)
    for name, pattern in KEY_ERROR_PATTERNS for bit, part in _halves(name, pattern))
"""What :func:`match_line` tries, in precedence order: (pattern name, hint bit, regex, only when
failing). A pattern with translations (``KEY_ERROR_PATTERNS`` holds the two as one regex) is its
English half behind its hint, then its translated half behind the translations' hint."""


def candidate_lines(low: str) -> dict[int, int]:
    """The lines of ``low`` (a lower-cased log) holding one of the substrings above, the only
    lines any pattern can match, each with the mask of the hints it holds (``_HINT_BIT``): only
    their patterns are tried. Found in one Aho-Corasick pass over the whole text instead of
    twelve regex searches on every line, which took a quarter of a second on a 1.2 MB log, at
    every cut of it. (A match never spans lines but for the newline that starts a line-start
    word; overlapping matches are all reported, so no hint of a line is missed.)"""
    data = low.encode("utf-8", "surrogatepass")  # a lone surrogate is a character like any other
    found = [(start + 1 if index >= _FIRST_LINE_START else start, _HINT_BIT[index])
             for index, start, _ in _HINTS.find_matches_as_indexes(data, overlapping=True)]
    found.sort()  # overlapping matches come by end, not by start
    if data.startswith(_LINE_START_BYTES):
        for index, word in enumerate(_LINE_START_BYTES, start=_FIRST_LINE_START):
            if data.startswith(word):
                found.insert(0, (0, _HINT_BIT[index]))
    out: dict[int, int] = {}
    line = pos = 0
    for at, bit in found:
        line += data.count(b"\n", pos, at)
        pos = at
        out[line] = out.get(line, 0) | bit
    return out


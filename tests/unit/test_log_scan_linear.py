"""The log diagnosis on lines built to make its patterns backtrack: it finds what the documented
regexes find, in work linear in the line (a performance hunt, each case found there).

No timings: a rule is compared with its regex, the characters its searches read are counted, and
inputs that took the old regexes ten minutes or more of CPU are run in a child process that is
given two (an unbounded regex cannot be interrupted in-process: ``re`` holds the GIL).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections import diagnose as diagnose_module
from contextfold.projections import log_patterns
from contextfold.projections.log_patterns import KEY_ERROR_PATTERNS

if TYPE_CHECKING:
    from contextfold.projections.log_patterns import LinePattern

EXCEPTION_REGEX = re.compile(r"\b[A-Z][\w.]*Exception\b")
"""The documented "exception" pattern (the reference)."""
CR_AT_LINE_END_REGEX = re.compile(r"\r+(?=\n)|\r+\Z")
"""Line-final carriage returns, as first written (the reference)."""

REALISTIC_LINES = [
    'Exception in thread "main" java.lang.NullPointerException: Cannot invoke "String.length()"',
    "Caused by: org.springframework.beans.factory.BeanCreationException: Error creating bean 'x'",
    "System.InvalidOperationException: Sequence contains no elements",
    "Unhandled exception. System.IO.FileNotFoundException: Could not find file '/app/settings.json'.",
    "   at com.example.App.main(App.java:12)",
    "kotlin.UninitializedPropertyAccessException: lateinit property repo has not been initialized",
    "java.util.concurrent.ExecutionException: java.lang.IllegalStateException: closed",
    "com.example.Outer$InnerException: nested", "E   app.errors.PaymentException: declined",
    "raise ConfigException('missing key')", "MyCustomException.Inner.DeeperException: x",
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='x', port=443)",
    "Exception: bare", "IOException", "NotAnException123 here", "ExceptionHandler registered",
    "e.Exception", "A.Exception.B", "x.Exception", "_Foo.BarException", "ÉtatException raised",
    "Ωmega.FooException", "a1.B2.C3Exception_x.DException!", "the exception was logged",
]

_EXCEPTION_PIECES = ["A", "a", ".", "Exception", "Exceptions", "Exception.", " ", "_", "é", "É", "1",
                     "x", "E", "xception", "java.lang.", "Error", "$", "..", "Ω", ":", "\t"]


def _exception_rule() -> LinePattern:
    return dict(KEY_ERROR_PATTERNS)["exception"]


@pytest.mark.parametrize("line", REALISTIC_LINES)
def test_the_exception_rule_matches_realistic_lines_as_its_regex(line: str) -> None:
    expected = EXCEPTION_REGEX.search(line)
    found = _exception_rule().search(line)
    assert (found and found.span()) == (expected and expected.span())


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_EXCEPTION_PIECES), max_size=24).map("".join))
def test_the_exception_rule_finds_what_its_regex_finds(line: str) -> None:
    expected = EXCEPTION_REGEX.search(line)
    found = _exception_rule().search(line)
    assert (found and found.span()) == (expected and expected.span())
    assert found is None or found.group() == line[found.start():found.end()]


class _Counted:
    """A compiled pattern whose searches and matches add up the characters they were made over:
    from ``pos`` to the match's end (one more for a match: the character that ended it), or to
    the end of what was searched when none; ``whole``: to the end of the string."""

    def __init__(self, pattern: re.Pattern[str], reads: list[int], whole: bool = False) -> None:
        self.pattern, self.reads, self.whole = pattern, reads, whole

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        found = self.pattern.search(string, pos, endpos)
        self.reads[0] += (found.end() if found else min(endpos, len(string))) - pos
        return found

    def match(self, string: str, pos: int = 0) -> re.Match[str] | None:
        found = self.pattern.match(string, pos)
        self.reads[0] += len(string) - pos if self.whole else (found.end() if found else pos) - pos + 1
        self.reads[1] += self.whole
        return found


_RUNS = "A." * 20_000


@pytest.mark.parametrize(("line", "expected"), [
    ("exception report: " + _RUNS, None),
    ("exception report: " + _RUNS + "Exception", (18, 18 + len(_RUNS) + 9)),
    ("exception report: " + "A.Exceptionx" * 5_000, None),
    ("A " * 20_000 + "Exception", None),
    (("A." * 500 + " ") * 40 + "B.Exception", (40 * 1001, 40 * 1001 + 11)),
    ("Exception " * 8_000, None),
])
def test_the_exception_rule_reads_each_character_a_bounded_number_of_times(
        monkeypatch: pytest.MonkeyPatch, line: str, expected: tuple[int, int] | None) -> None:
    """The regex's own search read a dotted run once per capital in it (quadratic; these lines
    took it seconds each): the rule's searches read the line a few times over, and the regex,
    which reads a whole run, is matched at one start at most (where the rule found a match)."""
    reads = [0, 0]
    for name in ("_EXCEPTION_WORD", "_NAME_START", "_NAME_REST"):
        monkeypatch.setattr(log_patterns, name, _Counted(getattr(log_patterns, name), reads))
    monkeypatch.setattr(log_patterns, "_EXCEPTION", _Counted(log_patterns._EXCEPTION, reads, whole=True))
    found = _exception_rule().search(line)
    assert (found and found.span()) == expected
    assert reads[1] == (expected is not None)
    assert reads[0] <= 4 * len(line)


_GO_PIECES = ['{', '"Test":"', '"Output":"', "a", '"', "\\", '\\"', "\\t", " ", ",", ":", "T", '"Test"',
              'est":"', "\\\\", "}", '"Output"', "--- FAIL: ", "\r", "é"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_GO_PIECES), max_size=16).map("".join))
def test_a_go_json_record_is_read_as_its_regex_reads_it(line: str) -> None:
    for text in (line, "{" + line):
        found = diagnose_module._GO_JSON.match(text)
        assert diagnose_module._go_json(text) == (found and (found.group(1), found.group(2)))


def test_a_go_json_record_keeps_its_test_and_indentation() -> None:
    line = ('{"Time":"2024-05-01T10:00:00Z","Action":"output","Package":"example.com/calc",'
            '"Test":"TestAdd/neg\\"q\\"","Output":"\\t    add_test.go:10: got 4, want 3\\n"}')
    assert diagnose_module._go_json(line) == ('TestAdd/neg\\"q\\"', "\\t    ")
    assert diagnose_module._go_json(line.replace('"Output"', '"Outcome"')) is None


_CR_PIECES = ["\r", "\r\r\r", "\n", "\r\n", "x", " ", "ERROR: y", "\x1b[1G"]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(_CR_PIECES), max_size=20).map("".join))
def test_line_final_carriage_returns_are_those_the_first_regex_removed(text: str) -> None:
    assert diagnose_module._CR_AT_LINE_END.sub("", text) == CR_AT_LINE_END_REGEX.sub("", text)


_CHILD = """
import json, sys
from contextfold.projections.diagnose import diagnose_log
head, unit, times, tail = json.loads(sys.argv[1])
found = diagnose_log(head + unit * times + tail, 1)
print(json.dumps([found.first_error.pattern, found.first_error.line, found.error_lines]))
"""
_RECORD = '{"Action":"output","Test":"TestAdd","Output":"--- FAIL: TestAdd (0.00s)\\n"}'

_HOSTILE: dict[str, tuple[tuple[str, str, int, str], list[object]]] = {
    # a 512 KB dotted run after the hint word: 39 s at 128 KB before, ~10 min here
    "dotted run": (("exception report: ", "A.", 262_144, "\nERROR: boom\n"), ["error", 2, 1]),
    # a 2 MB line of "Test" members above a failed test's record: 2.4 s at 128 KB, ~10 min here
    "go json": (("{", '"Test":"a",', 190_000, "\n" + _RECORD + "\n"), ["go_json_fail", 2, 1]),
    # 256 K carriage returns that no newline ends: 9 s for 32,000 before, ~10 min here
    "carriage returns": (("progress", "\r", 262_144, "x\nERROR: boom\n"), ["error", 2, 1]),
}


@pytest.mark.parametrize("case", sorted(_HOSTILE))
def test_a_hostile_log_is_diagnosed_in_linear_work(case: str) -> None:
    """Each of these took the diagnosis ten minutes or more of CPU; given two, in a child process
    (it needs well under a second), it finds the error after the hostile line."""
    parts, expected = _HOSTILE[case]
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(parts)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == expected

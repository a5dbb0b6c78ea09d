"""What the deterministic summary writes for one event: the lines a later turn reads instead of
the raw history (constraints, failures, the goal, each call)."""

from __future__ import annotations

import json
import re

import pytest

from contextfold.domain.events import (
    CompactionSummary,
    GoalSet,
    ModelResponse,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.projections.compaction import deterministic_summary
from contextfold.projections.fold import fold
from contextfold.projections.summary_text import USER_CHARS
from tests.unit.test_fold import Log

PAD = "Background: the billing service was split out of the monolith in 2021 and has its own schema. " * 12


def summary_of(log: Log) -> CompactionSummary:
    return deterministic_summary(log.records, fold(log.records))


def test_a_long_messages_constraint_sentences_are_kept_in_the_words_users_write_them() -> None:
    """A message over the bound keeps its opening and its constraint sentences: those worded
    without must/never/only, and those in Chinese, were dropped and the rule was gone after
    compaction. The rest is cited, not copied."""
    said = ["Avoid sudo; the CI box has no root access.", "所有数据库迁移都不得删除列，只能新增。",
            "Keep the public API backward compatible with v2 clients.", "必ずテストを実行してください。"]
    log = Log().add(*(UserInput(f"{PAD}\n{line}") for line in said))
    constraints = summary_of(log).constraints
    for at, line in enumerate(said, start=1):
        (entry,) = [c for c in constraints if c.startswith(f"user at event {at}: ")]
        assert f" … {line} (full text: event://run-1/{at})" in entry
        assert len(entry) <= USER_CHARS + 60  # the rest of a long message is not copied


def test_a_users_constraints_worded_without_a_keyword_survive_a_summary() -> None:
    """A 330-character task kept only its lines with a keyword (must/never/only/...): none, so
    "Leave the public signature of login() unchanged" and "Target Python 3.8" were gone, and
    with a goal set the message was not kept as the inferred goal either."""
    task = ("Users get logged out after 5 minutes on the dashboard; sessions should last 8 hours. "
            "The session handling lives in auth/session.py and auth/tokens.py, see the ticket for logs. "
            "Leave the public signature of login() unchanged, other teams call it. "
            "Target Python 3.8, production still runs it.")
    log = Log().add(GoalSet(goal="Fix the login bug"), UserInput(task))
    assert f"user at event 2: {task}" in summary_of(log).constraints


def test_a_long_user_message_is_quoted_bounded() -> None:
    """However long a message and however many of its sentences say "must", a summary quotes at
    most ``USER_CHARS`` of it: each entry is required content in every later request."""
    for text in ("x" * 30_000, "You must keep build 1234567 green. " * 1_000, PAD * 40):
        (entry,) = summary_of(Log().add(UserInput(text))).constraints
        assert len(entry) <= USER_CHARS + 60 and entry.endswith("(full text: event://run-1/1)")


def test_a_python_failure_is_known_by_its_exception_not_the_traceback_header() -> None:
    trace = ("Traceback (most recent call last):\n"
             + "".join(f'  File "/app/mod{i}.py", line {i}, in f{i}\n    g{i}()\n' for i in range(40))
             + "KeyError: 'user_id'\n")
    log = Log().add(UserInput("fix it"), ModelResponse(tool_calls=(ToolCall(call_id="c1", name="pytest"),)),
                    ToolResult(call_id="c1", content=trace, is_error=True, exit_code=1))
    (failure,) = summary_of(log).known_failures
    assert "KeyError: 'user_id' (Traceback, line 1)" in failure


@pytest.mark.parametrize(("log", "quoted"), [
    ("   Compiling proc-macro2 v1.0.70\n   Compiling thiserror v1.0.50\n"
     "error[E0425]: cannot find value `y` in this scope\n --> src/main.rs:3:13\n"
     'error: could not compile `m` (bin "m") due to 1 previous error\n',
     "error[E0425]: cannot find value `y` in this scope --> src/main.rs:3:13"),
    ("tests/test_api.py::test_error_response_has_code PASSED\n"
     "=================================== FAILURES ===================================\n"
     "E       assert 50.98 == 50.97\n", "E assert 50.98 == 50.97"),
    ("Linting 12 files: 0 errors, 0 warnings\n"
     "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.\n",
     "src/a.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'."),
    ("tests/test_api.py::test_total FAILED                   [100%]\n\nE       assert 50.98 == 50.97\n",
     "tests/test_api.py::test_total FAILED [100%] E assert 50.98 == 50.97"),
    ("FAIL: test_b (t.T)\n" + "-" * 70 + '\nTraceback (most recent call last):\n  File "/app/t.py", line 5\n'
     "    self.assertEqual(total(), 50.97)\nAssertionError: 50.98 != 50.97\n",
     "FAIL: test_b (t.T) AssertionError: 50.98 != 50.97 (Traceback, line 3)"),
    ("Linting 12 files: 0 errors, 0 warnings\nERROR in ./src/index.js 3:0-25\n"
     "Module not found: Error: Can't resolve './missing'\n",
     "ERROR in ./src/index.js 3:0-25 Module not found: Error: Can't resolve './missing'"),
    ("Checking the mirror for errors_report.txt\nUploading 3 files\nquota exceeded, upload refused\n",
     "quota exceeded, upload refused"),  # no key error: the last line, where it says why
], ids=["cargo", "pytest", "zero-count", "pytest-verdict", "unittest-verdict", "webpack-title", "none"])
def test_a_failure_is_known_by_the_error_the_log_diagnosis_finds(log: str, quoted: str) -> None:
    """The first line holding "error" in any word, any case, was quoted: ``Compiling thiserror
    v1.0.50`` for every failed cargo build, a PASSED test named for errors, ``0 errors``."""
    log_events = Log().add(UserInput("fix it"),
                           ModelResponse(tool_calls=(ToolCall(call_id="c1", name="sh"),)),
                           ToolResult(call_id="c1", content=log, is_error=True, exit_code=1))
    (failure,) = summary_of(log_events).known_failures
    assert failure.endswith(f" exit_code=1: {quoted}"), failure


def test_a_goal_read_from_the_first_message_says_it_was_inferred() -> None:
    log = Log().add(UserInput("hi, are you there?"), ModelResponse(text="Yes."))
    assert summary_of(log).goal == "(inferred from the user's message at event 1) hi, are you there?"


def test_long_arguments_are_shortened_at_value_boundaries() -> None:
    """The call line capped the arguments' JSON at 80 characters: inside a string, after the
    backslash of an escape (``"\\u4e2d`` cut to ``"\\``), as the seed says never to cut."""
    arguments = json.dumps({"path": "a.txt", "content": "é中" * 200, "mode": "w"})
    log = Log().add(UserInput("write it"), ModelResponse(tool_calls=(
        ToolCall(call_id="w1", name="write_file", arguments=arguments),)),
        ToolResult(call_id="w1", content="written"))
    (line,) = [c for c in summary_of(log).tool_calls_and_results if "w1" in c]
    shown = re.search(r"\(write_file\) (\{.*\}) at event", line)
    assert shown is not None
    excerpt = json.loads(shown.group(1))  # every key kept and no nesting: it is JSON
    assert excerpt["path"] == "a.txt" and excerpt["mode"] == "w"
    assert excerpt["content"].endswith("…") and ("é中" * 10) in excerpt["content"]


def test_arguments_of_many_members_are_read_only_as_far_as_the_line_shows_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each shortening step added up every member again: an object of 4,000 members took 2 s per
    call line, per summary, for every share a summary is tried at."""
    from contextfold.projections import summary_text

    dumped: list[object] = []
    real = summary_text._json_text

    def counted(value: object) -> str:
        dumped.append(value)
        return real(value)

    monkeypatch.setattr(summary_text, "_json_text", counted)
    arguments = json.dumps({f"key_{i}": f"translated value number {i} of the list" for i in range(4_000)})
    line = summary_text.args_excerpt(arguments, 80)
    assert line.endswith("more keys}") and line.startswith('{"key_0": "translated value number')
    assert len(dumped) < 40


@pytest.mark.parametrize("value, limit", [({"a": "x" * 100, "b": "y" * 100, "c": None}, 60),
                                          ({"path": "p" * 30, "content": "é中" * 500, "mode": "w"}, 50),
                                          ({"a": '"' * 200, "b": '"' * 200, "c": '"' * 200}, 80),
                                          ({"k" * 100: '"' * 100, "x": 1, "y": 2}, 80),
                                          ({"n": 10**60, "m": 10**60, "o": 1}, 80)])
def test_an_excerpt_with_keys_left_out_fits_its_limit_with_their_count(value: dict[str, object],
                                                                       limit: int) -> None:
    """The line stretched its first string to the whole limit, then added ", …N more keys" past it;
    a string of quotes was cut by characters, each shown as two (\\"); and a first member too
    wide to show came out as "{, …N more keys}"."""
    from contextfold.projections.summary_text import args_excerpt

    line = args_excerpt(json.dumps(value, ensure_ascii=False), limit)
    assert len(line) <= limit and line.endswith("}")
    assert line.startswith('{"') and not line.startswith('{"…"')  # the first key is named

"""Cuts by characters never split a user-perceived character, never exceed, never keep less.

Why: a one-line output with no whitespace is cut by characters (the words strategy), and so are
long JSON strings and quoted log lines; a code-point cut there left an orphan accent, half a
ZWJ sequence or half a flag at a kept end. Texts here are dense in multi-code-point clusters;
every kept end must be a cluster boundary of the original (checked against the whole text's
segmentation and against hand-written rules independent of the ``regex`` module).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from contextfold.domain.events import GoalSet, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.projections import truncate as truncate_module
from contextfold.projections.code_fences import open_fence
from contextfold.projections.compaction import deterministic_summary
from contextfold.projections.diagnose import lean_log
from contextfold.projections.fold import fold
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import Truncation, truncate
from tests.counters import Counter, cl100k, quarter
from tests.unit.test_fold import Log
from tests.unit.test_graphemes import CLUSTER_PIECES, boundaries, orphan_at
from tests.unit.test_json_shrink import assert_pieces_are_the_shrink

__all__: list[str] = []

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
counters = st.sampled_from([quarter, cl100k])
COUNTER = get_counter("cl100k_base")

one_line = st.lists(st.sampled_from([p for p in CLUSTER_PIECES if "\n" not in p and "\r" not in p]),
                    min_size=1, max_size=120).map("".join)
"""One line, mostly without whitespace: line windows keep nothing, so it is cut by characters."""


def clean_cut(text: str, at: int) -> bool:
    return at in boundaries(text) and not orphan_at(text, at)


def words_ends(text: str, result: Truncation) -> tuple[int, int]:
    """Where the words strategy's head ends and its tail starts in ``text``, checked against the
    result's text."""
    n = len(text)
    head = next((r.end for r in result.kept if r.start == 1), 0)
    tail = next((r.start - 1 for r in result.kept if r.end == n and r.start > 1), n)
    assert result.text == (f"{text[:head]}\n… [{tail - head} characters omitted] …\n{text[tail:]}")
    return head, tail


def kept_chars(text: str, result: Truncation) -> int:
    """Characters of ``text`` that ``result`` shows (a marker alone shows none)."""
    if result.strategy == "none":
        return len(text)
    if result.strategy != "words":
        return 0
    head, tail = words_ends(text, result)
    return head + len(text) - tail


def test_a_line_of_accents_and_emoji_is_cut_between_clusters() -> None:
    for unit in ["e\u0301", "\U0001F469\u200D\U0001F4BB", "\U0001F1EB\U0001F1F7", "\u2764\uFE0F",
                 "\U0001F44D\U0001F3FD"]:
        text = "x" + unit * 400
        cuts = [truncate(text, budget, kind="text", count=cl100k) for budget in range(5, 120)]
        words = [c for c in cuts if c.strategy == "words"]
        assert words, unit
        for cut in words:
            head, tail = words_ends(text, cut)
            assert clean_cut(text, head) and clean_cut(text, tail), (unit, cut.tokens, head, tail)


@SETTINGS
@given(text=one_line, count=counters, kind=st.sampled_from(["text", "log"]), data=st.data())
def test_words_cuts_keep_whole_clusters_within_budget_and_more_for_more(
        text: str, count: Counter, kind: str, data: st.DataObject) -> None:
    budgets = data.draw(st.lists(st.integers(0, count(text) + 1), min_size=1, max_size=6))
    kept = []
    for budget in sorted(budgets):
        result = truncate(text, budget, kind="text" if kind == "text" else "log", count=count)
        assert result.tokens == count(result.text)
        assert result.over_budget or result.tokens <= budget
        if result.strategy == "words":
            head, tail = words_ends(text, result)
            assert clean_cut(text, head) and clean_cut(text, tail), (head, tail)
            assert head > 0 or tail < len(text)  # a words cut keeps something
        kept.append(kept_chars(text, result))
    assert kept == sorted(kept)


@pytest.mark.parametrize("count", [quarter, cl100k])
def test_every_budget_of_one_emoji_line_is_clean_and_monotone(count: Counter) -> None:
    text = "ok " + "".join(CLUSTER_PIECES[7:]).replace("\n", "").replace("\r", "") * 3
    truncate_module._PROBES.clear()
    previous = -1
    for budget in range(0, count(text) + 2):
        result = truncate(text, budget, kind="text", count=count)
        assert result.over_budget or result.tokens <= budget
        if result.strategy == "words":
            head, tail = words_ends(text, result)
            assert clean_cut(text, head) and clean_cut(text, tail), (budget, head, tail)
        chars = kept_chars(text, result)
        assert chars >= previous, budget
        previous = chars


_SPACED = [*(p for p in CLUSTER_PIECES if "\n" not in p and "\r" not in p), "word "]
spaced_line = st.lists(st.sampled_from(_SPACED), min_size=1, max_size=80).map("".join)
"""One line with words: the tail starts after a space, and so right at a marker after one."""
short_line = st.lists(st.sampled_from(_SPACED), max_size=30).map("".join)
"""A line's end the tail reaches before the whole line fits: the marker before it is in reach."""
fence_marks = st.sampled_from(["```", "````", "~~~", " ```python", "```js", "  ~~~~ json", "`` `", " ```"])


@SETTINGS
@given(before=spaced_line, mark=fence_marks, after=short_line, count=counters)
# 5 characters at 11 tokens, 4 at 12: the tail "```js" moved past the text's end
@example(before="word aéaazaword éabzabzab", mark="```js", after="", count=cl100k)
@example(before="ézword zaééabazzéaaabéword ", mark=" ```python", after="", count=cl100k)
@example(before=" ", mark="```", after="", count=quarter)  # a fence as written: shown whole when it fits
def test_a_line_with_a_fence_marker_mid_line_keeps_more_for_more_and_no_fence_open(
        before: str, mark: str, after: str, count: Counter) -> None:
    """A words cut whose tail would open with a fence marker moved the tail to the next line (here
    the text's end), so one more token showed the tail no more: a larger grant showed less. Every
    grant, as the one-emoji-line test above: the tail reaches the marker at one grant only."""
    text = before + mark + after
    previous = -1
    for budget in range(0, count(text) + 2):
        result = truncate(text, budget, kind="text", count=count)
        assert result.over_budget or result.tokens <= budget
        if not result.over_budget and result.strategy != "none":  # a text shown whole is as written
            assert open_fence(result.text) is None, (budget, result.text)
        chars = (len(text) if result.strategy == "none" else
                 sum(r.end - r.start + 1 for r in result.kept) if result.strategy == "words" else 0)
        assert chars >= previous, (budget, chars, previous, result.text)
        previous = chars


def test_a_crlf_is_kept_or_dropped_whole() -> None:
    text = "a" * 30 + "\r\n" + "b" * 400
    words = [r for r in (truncate(text, budget, kind="log", count=quarter) for budget in range(5, 60))
             if r.strategy == "words"]
    assert words
    for result in words:
        head, tail = words_ends(text, result)
        assert not text[:head].endswith("\r") and clean_cut(text, tail)


# ------------------------------------------------------------------ JSON strings

_OMITTED = re.compile(r"… \[(\d+) chars omitted\]\Z")


def json_kept(original: str, shown: str) -> int:
    """How many characters of ``original`` the shortened JSON string ``shown`` keeps."""
    m = _OMITTED.search(shown)
    if m is None:
        assert shown == original
        return len(original)
    kept = shown[:m.start()]
    assert original.startswith(kept) and int(m.group(1)) == len(original) - len(kept)
    return len(kept)


json_text = st.lists(st.sampled_from(CLUSTER_PIECES), min_size=8, max_size=200).map("".join)


@SETTINGS
@given(value=json_text, count=counters, data=st.data())
def test_a_shortened_json_string_keeps_whole_clusters_within_budget_and_more_for_more(
        value: str, count: Counter, data: st.DataObject) -> None:
    text = json.dumps(value, ensure_ascii=False)
    budgets = data.draw(st.lists(st.integers(0, count(text)), min_size=1, max_size=6))
    kept = []
    for budget in sorted(budgets):
        result = truncate(text, budget, kind="json", count=count)
        assert result.over_budget or result.tokens == count(result.text) <= budget
        if result.over_budget:
            kept.append(0)
            continue
        at = json_kept(value, json.loads(result.text))
        assert clean_cut(value, at), (budget, at)
        kept.append(at)
    assert kept == sorted(kept)


def test_each_emoji_json_string_cut_is_clean() -> None:
    for unit in ["e\u0301", "\U0001F469\u200D\U0001F4BB", "\U0001F1EB\U0001F1F7", "\u2764\uFE0F",
                 "\U0001F44D\U0001F3FD"]:
        value = "x" + unit * 300
        text = json.dumps({"k": value}, ensure_ascii=False)
        shown = [json.loads(truncate(text, b, kind="json", count=cl100k).text).get("k")
                 for b in range(10, 300, 3)]
        cuts = [json_kept(value, s) for s in shown if isinstance(s, str) and s != value]
        assert cuts, unit
        assert all(clean_cut(value, at) for at in cuts), (unit, cuts)


json_values = st.recursive(
    json_text | st.integers(),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
    max_leaves=40,
)


@SETTINGS
@given(value=json_values, knobs=st.lists(st.integers(0, 80), min_size=1, max_size=6))
def test_pieces_cut_cluster_strings_byte_for_byte_as_the_shrink(value: Any, knobs: list[int]) -> None:
    assert_pieces_are_the_shrink(json.loads(json.dumps(value, ensure_ascii=False)), knobs)


# ------------------------------------------------------------------ a lean log's quoted error line

_QUOTED = re.compile(r"^(?:\[first key error\] line \d+: )?(ERROR: .*?)(?:… \[(\d+) chars omitted\])?$")


def quoted_error_cuts(error: str, shown: str) -> list[int]:
    """Where each quote of the line ``error`` in the lean log ``shown`` ends in ``error``."""
    cuts = []
    for line in shown.split("\n"):
        m = _QUOTED.match(line)
        if m is None:
            continue
        kept = m.group(1)
        assert error.startswith(kept)
        assert m.group(2) is None or int(m.group(2)) == len(error) - len(kept)
        cuts.append(len(kept))
    return cuts


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.lists(st.sampled_from([p for p in CLUSTER_PIECES if "\n" not in p and "\r" not in p]),
                     min_size=200, max_size=300).map("".join),
       pad=st.integers(0, 3), budgets=st.lists(st.integers(60, 600), min_size=1, max_size=4))
def test_a_lean_logs_quoted_error_line_ends_between_clusters(body: str, pad: int, budgets: list[int]) -> None:
    error = "ERROR: " + "y" * pad + body
    log = "\n".join([f"step {i}" for i in range(40)] + [error] + [f"done {i}" for i in range(40)])
    for budget in budgets:
        result = lean_log(log, 1, budget, cl100k)
        assert result.over_budget or result.tokens == cl100k(result.text) <= budget
        for at in quoted_error_cuts(error, result.text):
            assert clean_cut(error, at), (budget, at)


def test_each_emoji_error_line_is_quoted_whole_clusters() -> None:
    for unit in ["e\u0301", "\U0001F469\u200D\U0001F4BB", "\U0001F1EB\U0001F1F7", "\u2764\uFE0F",
                 "\U0001F44D\U0001F3FD"]:
        for pad in range(len(unit)):
            error = "ERROR: " + "y" * pad + unit * 300
            log = "\n".join(["start"] * 50 + [error] + ["ok"] * 50)
            cuts = [at for budget in (100, 150, 200, 250, 300, 400, 600, 800, 1000)
                    for at in quoted_error_cuts(error, lean_log(log, 1, budget, cl100k).text)]
            assert cuts, unit
            assert all(clean_cut(error, at) for at in cuts), (unit, pad, cuts)


# ------------------------------------------------------------------ a compaction summary's quotes


def test_a_summary_quotes_long_untrusted_text_up_to_a_cluster_boundary() -> None:
    for unit in ["e\u0301", "\U0001F469\u200D\U0001F4BB", "\U0001F1EB\U0001F1F7", "\u2764\uFE0F",
                 "\U0001F44D\U0001F3FD"]:
        for pad in range(len(unit)):
            texts = {tag: f"{tag}:" + "y" * pad + unit * 2100 for tag in ("USER", "GOAL", "SAID", "FAIL")}
            said = ModelResponse(text=texts["SAID"],
                                 tool_calls=(ToolCall(call_id="c1", name="sh", arguments="{}"),))
            failed = ToolResult(call_id="c1", content=texts["FAIL"], is_error=True, exit_code=1)
            lines: list[str] = []
            goal_set = GoalSet(goal=texts["GOAL"])
            for log in (Log().add(UserInput(texts["USER"]), said, failed), Log().add(goal_set)):
                summary = deterministic_summary(log.records, fold(log.records))
                lines += [summary.goal, *summary.decisions, *summary.inferences, *summary.known_failures]
            quotes = [m for line in lines for m in re.finditer(r"(USER|GOAL|SAID|FAIL):[^…]*", line)]
            assert {m.group(1) for m in quotes} == set(texts), (unit, lines)
            for m in quotes:
                original = texts[m.group(1)]
                assert original.startswith(m.group(0)) and clean_cut(original, len(m.group(0))), (unit, pad)


def test_a_spinner_line_is_never_cut_inside_an_escape_sequence() -> None:
    """npm's spinner redrawn with ESC [1G / ESC [0K is one line with no whitespace, cut by
    characters: the kept head ended with a dangling ``ESC [1`` in 17 of 49 budgets."""
    spinner = "".join(f"\x1b[1G{c}\x1b[0K" for c in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏" * 400)
    text = (spinner + "\x1b[1G\x1b[0Knpm error code E404\n"
            "npm error 404 Not Found - GET https://registry.npmjs.org/left-padd\n")
    escape = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
    for budget in range(60, 400, 7):
        out = lean_log(text, 1, budget, cl100k, artifact_ref="artifact:x").text
        for at in (m.start() for m in re.finditer("\x1b", out)):
            assert escape.match(out, at), (budget, out[at:at + 12])
    cut = truncate(spinner, 120, kind="log", count=cl100k)
    assert cut.truncated and all(escape.match(cut.text, m.start()) for m in re.finditer("\x1b", cut.text))

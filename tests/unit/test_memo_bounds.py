"""Process-wide memos that hold texts are bounded by bytes, not only by entries.

Why: a long-lived process builds for many runs, and a tool output may be megabytes. The secret
scan's memos were bounded by entries only (``redact``: 2,048 texts, each up to an artifact's 256
MiB; the builder's redaction results: 200,000), so a process that redacted 170 MB of distinct
tool outputs grew by ~190 MB and kept growing. These tests measure the memory the memos keep
once the texts' other owners are gone (``tracemalloc``), with the memos' real bounds. The token
counter's tables of counts were not bounded at all.
"""

from __future__ import annotations

import gc
import threading
import tracemalloc
from collections.abc import Iterator

import pytest

from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import BuildConfig
from contextfold.projections import fragment_facts as facts_module
from contextfold.projections import redact as redact_module
from contextfold.projections import tokens
from contextfold.projections.bounded_memo import BoundedMemo
from contextfold.projections.fold import fold
from contextfold.projections.fragment_facts import BuildCtx
from contextfold.projections.redact import config_policy, redact
from contextfold.projections.tokens import TokenCounter
from tests.unit.test_builder import recorded

MB = 1024 * 1024
SECRET = "AKIAZ7Q3B4N5K6L7M8P9"


def _output(i: int, size: int) -> str:
    """A tool output of ~``size`` characters that holds a secret (so it has a redacted copy)."""
    line = f"run {i:05d} step ok 0123456789 abcdefghij\n"
    return f"aws_access_key_id={SECRET}\n" + line * (size // len(line))


@pytest.fixture
def empty_memos() -> Iterator[None]:
    redact_module._REDACTED.clear()
    facts_module._REDACTIONS.clear()
    yield
    redact_module._REDACTED.clear()
    facts_module._REDACTIONS.clear()


def _held(before: int) -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - before


@pytest.mark.usefixtures("empty_memos")
def test_redact_keeps_at_most_its_character_bound_of_distinct_texts() -> None:
    bound = redact_module._REDACTED.max_bytes
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(3 * bound // MB):  # three times the bound, in 1 MB outputs with secrets
            assert SECRET not in redact(_output(i, MB)).text
        held = _held(before)
    finally:
        tracemalloc.stop()
    assert held <= bound + 2 * MB, f"{held / MB:.1f} MB held for a bound of {bound / MB:.0f} MB"


@pytest.mark.usefixtures("empty_memos")
def test_the_builds_redaction_results_keep_at_most_their_character_bound() -> None:
    """The builder's results by fragment and policy (``fragment_facts._REDACTIONS``) and the text memo
    under it: one 2 MB output with a secret, redacted under 48 policies (a process serving runs
    with different redaction settings), keeps at most both bounds once the state is gone."""
    state = fold(recorded([
        UserInput("dump the environment"),
        ModelResponse(tool_calls=(ToolCall(call_id="c1", name="sh"),)),
        ToolResult(call_id="c1", content=_output(0, 2 * MB))]))
    fid = next(fid for fid, e in state.entries.items() if e.kind == "tool_result")
    bound = facts_module._REDACTIONS.max_bytes + redact_module._REDACTED.max_bytes
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(48):  # 96 MB of redacted copies
            config = BuildConfig(redact_allow=(f"not-a-secret-{i}",))
            ctx = BuildCtx(state, config, None, state.required_ids(), state.counter.count,
                           policy=config_policy(config))
            assert SECRET not in ctx.full_text(fid)
        del ctx, state
        held = _held(before)
    finally:
        tracemalloc.stop()
    assert held <= bound + 4 * MB, f"{held / MB:.1f} MB held for bounds of {bound / MB:.0f} MB"


def test_bounded_memo_starts_over_past_either_bound_and_never_holds_an_oversized_text() -> None:
    memo: BoundedMemo[str, str] = BoundedMemo(max_entries=3, max_bytes=10)
    memo.put("a", "aaaa", 4)
    memo.put("b", "bbbb", 4)
    assert (memo.get("a"), len(memo), memo.bytes) == ("aaaa", 2, 8)
    memo.put("c", "ccc", 3)  # 11 bytes: starts over, then holds it
    assert (memo.get("a"), memo.get("c"), memo.bytes) == (None, "ccc", 3)
    for key in "xyz":
        memo.put(key, key, 1)  # the fourth entry (z) starts over
    assert (len(memo), memo.get("c"), memo.get("z"), memo.bytes) == (1, None, "z", 1)
    assert memo.put("big", "b" * 11, 11) == "b" * 11  # returned, never held
    assert (memo.get("big"), len(memo)) == (None, 1)
    memo.put("z", "other", 5)  # a key already held keeps its value and its count
    assert (memo.get("z"), memo.bytes) == ("z", 1)


def test_bounded_memo_counts_exactly_under_threads() -> None:
    memo: BoundedMemo[tuple[int, int], int] = BoundedMemo(max_entries=10_000, max_bytes=10**9)
    start = threading.Barrier(4)

    def fill(t: int) -> None:
        start.wait()
        for i in range(2_000):
            memo.put((t, i), i, 3)

    threads = [threading.Thread(target=fill, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert memo.bytes == 3 * len(memo) == 3 * 8_000


def test_a_token_counter_keeps_a_bounded_number_of_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A counter serves every run of the process: its tables of counts start over past their
    bounds (here lowered) instead of growing by every distinct text, and count right after."""
    monkeypatch.setattr(tokens, "_SHORT_COUNTS_LIMIT", 50, raising=False)
    monkeypatch.setattr(tokens, "_COUNTS_LIMIT", 100, raising=False)
    counter = TokenCounter()
    for i in range(1_000):
        short, long = f"short text {i}", f"a long text {i} " + "word " * 60
        assert counter.count(short) == counter.count_uncached(short)
        assert counter.count(long) == counter.count_uncached(long)
    rows = [(counter.encoding_name, bytes([i % 256, i // 256]) * 16, i, None) for i in range(1_000)]
    counter.preload(rows)  # counts another process made: the same bound
    assert counter.stats().size <= 150

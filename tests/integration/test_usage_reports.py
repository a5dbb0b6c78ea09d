"""Usage reports over a real store (SQLite and PostgreSQL): which request a report counts, and
which reports are refused or flagged when they are recorded."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contextfold.api import Run, open_store
from contextfold.domain.events import ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import ContextManifest

WINDOW, RESERVE = 3_000, 500
TRUE_RATIO = 1.2


def _grow(run: Run, i: int) -> None:
    words = " ".join(f"word{i}_{k}" for k in range(150))
    run.append(ModelResponse(text=f"step {i}", tool_calls=(ToolCall(call_id=f"c{i}", name="grep"),)),
               ToolResult(call_id=f"c{i}", content=f"result {i}: {words}", exit_code=0),
               UserInput(f"continue with part {i}: {words}"))


def _long_run(run: Run, turns: int = 8) -> None:
    run.append(RunStarted(model="claude-x", encoding="cl100k_base"), UserInput("start " + "x " * 50))
    for i in range(1, turns + 1):
        _grow(run, i)


def _refused_then_retried(run: Run) -> tuple[ContextManifest, ContextManifest]:
    """The provider refuses the turn's request for length ("your messages resulted in N tokens"):
    the runtime records N as the turn's usage, then builds the turn again in a smaller window."""
    first = run.build(window=WINDOW, reserve=RESERVE).manifest
    refused = math.ceil(first.selected_tokens * TRUE_RATIO)
    assert refused > WINDOW - RESERVE  # what the provider refused
    run.observe_usage(first.turn, refused)
    retry = run.build(window=math.floor(WINDOW / TRUE_RATIO) - 300, reserve=RESERVE).manifest
    assert retry.turn == first.turn and retry.selected_tokens < first.selected_tokens * 0.8
    return first, retry


def test_a_refused_requests_usage_pairs_with_its_own_build_not_the_smaller_retry(store_url: str) -> None:
    """The usage of a refused request was paired with the turn's last record, the smaller retry
    logged after it: a true ratio of 1.2 read as ~1.6+, and every later budget shrank by it."""
    with open_store(store_url) as store:
        run = store.run("refused")
        _long_run(run)
        first, retry = _refused_then_retried(run)
        assert len(run.records(first.turn)) == 2
        _grow(run, 99)  # the retry was answered; its usage is not reported
        nxt = run.build(window=WINDOW, reserve=RESERVE).manifest
        cal = nxt.calibration
        assert cal is not None and cal.samples == 1
        assert cal.last_estimated == first.selected_tokens
        refused = math.ceil(first.selected_tokens * TRUE_RATIO)
        assert cal.correction == round(refused / first.selected_tokens, 4)
        assert nxt.budget_tokens == math.floor((WINDOW - RESERVE) / cal.correction)
        assert run.replay(nxt.turn).ok
        # the retry's own report, recorded after it, replaces the refused one (the newest counts)
        run.observe_usage(retry.turn, math.ceil(retry.selected_tokens * 1.1))
        later = run.build(window=WINDOW, reserve=RESERVE, record=False).manifest
        assert later.calibration is not None and later.calibration.last_estimated == retry.selected_tokens
        assert later.calibration.correction == round(math.ceil(retry.selected_tokens * 1.1)
                                                     / retry.selected_tokens, 4)
        # a rebuild of the next turn as it was built still sees the refused request's pairing
        assert run.replay(nxt.turn).ok


def test_a_runs_total_passed_as_a_turns_usage_is_refused_unless_forced(store_url: str) -> None:
    """pydantic-ai's ``result.usage()`` is the run's total, every request summed: passed as a
    turn's usage it read as a ratio of 5-10x, under the 4x-the-window refusal, and the correction
    (capped at 4) quartered every later budget of the model. A report over 4x the turn's largest
    recorded estimate is refused, naming the likely cause; ``force=True`` records it (a response
    whose provider-side tools ran several requests counts that much: web search, code execution)."""
    from contextfold.domain.errors import InvalidInputError

    with open_store(store_url) as store:
        run = store.run("totals")
        run.append(RunStarted(model="claude-x", encoding="cl100k_base"), UserInput("start " + "x " * 50))
        total = 0
        for i in range(1, 16):  # what result.usage() says after each request: the sum so far
            m = run.build(window=60_000, reserve=RESERVE).manifest
            total += math.ceil(m.selected_tokens * 1.1)
            if total <= 4 * m.selected_tokens:
                run.observe_usage(m.turn, total)
            else:
                version = run.version
                with pytest.raises(InvalidInputError, match=(
                        rf"^implausible usage for turn {m.turn}: {total} input tokens, over 4x the "
                        rf"{m.selected_tokens} tokens its largest recorded request holds by our count "
                        r"\(a run's total, e\.g\. pydantic-ai's result\.usage\(\), not this request's\?")):
                    run.observe_usage(m.turn, total)
                assert run.version == version  # nothing written
                break
            _grow(run, i)
        else:
            raise AssertionError("the run's total never passed 4x a request")
        assert m.turn >= 3
        nxt = run.build(window=60_000, reserve=RESERVE, record=False).manifest
        assert nxt.calibration is not None and nxt.calibration.last_turn < m.turn
        # a provider-side tool's report (Anthropic web search: 16,083 input tokens for a 417-byte
        # request, pydantic-ai's cassettes) is recorded when the caller says it is this request's
        run.observe_usage(m.turn, total, force=True)
        forced = run.build(window=60_000, reserve=RESERVE, record=False).manifest
        assert forced.calibration is not None and forced.calibration.last_observed == total
        # the bound itself is plausible
        run.observe_usage(m.turn, 4 * m.selected_tokens)


def test_anthropics_uncached_input_tokens_alone_are_recorded_with_a_warning(store_url: str) -> None:
    """Anthropic's ``input_tokens`` excludes the prompt's cached part, and every Anthropic request
    the builder renders carries cache breakpoints: from the second request on, a runtime passing
    ``usage.input_tokens`` alone reports a few tokens (pydantic-ai's cassettes: 4-16 of 800-21,000),
    a ratio under 1, so the calibration never applied, and nothing said so. Recorded (it is not
    impossible) with a warning naming the fields to add; a whole count, a report that says what
    was cached, or a prompt too short to cache, warns of nothing."""
    import warnings

    from contextfold import UsageWarning

    with open_store(store_url) as store:
        run = store.run("anthropic")
        _long_run(run, turns=3)
        m = run.build("anthropic", window=WINDOW, reserve=RESERVE).manifest
        assert m.selected_tokens >= 1024
        with pytest.warns(UsageWarning, match=(
                rf"^usage for turn {m.turn}: 7 input tokens, under half the {m.selected_tokens} of its "
                r"anthropic request by our count, and no cached tokens: Anthropic's input_tokens "
                r"excludes the cache; pass input_tokens \+ cache_read_input_tokens \+ "
                r"cache_creation_input_tokens")):
            rec = run.observe_usage(m.turn, 7)
        assert rec.event == run.events()[-1].event  # recorded all the same
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            whole = m.selected_tokens + 40
            run.observe_usage(m.turn, whole, cached_tokens=whole - 7)
            run.observe_usage(m.turn, whole)
        neutral = run.build(window=WINDOW, reserve=RESERVE).manifest  # no cache breakpoints
        short = store.run("short")
        short.append(RunStarted(model="claude-x", encoding="cl100k_base"), UserInput("hi"))
        brief = short.build("anthropic", window=WINDOW, reserve=RESERVE).manifest
        assert brief.selected_tokens < 1024
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            run.observe_usage(neutral.turn, 7)
            short.observe_usage(brief.turn, 1)


def test_the_audit_pairs_a_report_with_the_request_calibration_pairs_it_with(store_url: str) -> None:
    """A turn built twice before its report (refused for length, then retried smaller): the audit
    compared the report with the turn's first record, calibration with the newest record before the
    report. Once the retry's own report is recorded the two disagreed (the chart and the report
    said x1.1 was x0.9 of the refused request). One rule now: both name the same request."""
    from contextfold.audit.data import audit_run
    from contextfold.audit.report import render_report

    with open_store(store_url) as store:
        run = store.run("audited")
        _long_run(run)
        first, retry = _refused_then_retried(run)
        refused = math.ceil(first.selected_tokens * TRUE_RATIO)

        def audited() -> tuple[int, str]:
            audit = audit_run(run, rebuild_missing=False)
            turn = next(t for t in audit.turns if t.turn == first.turn)
            assert turn.usage is not None and turn.manifest == first  # the turn is still its first record
            return turn.usage.estimated_tokens, render_report(audit)

        def calibrated() -> int:
            cal = run.build(window=WINDOW, reserve=RESERVE, record=False).manifest.calibration
            assert cal is not None and cal.last_turn == first.turn
            return cal.last_estimated

        # the refused request's report: the refused request (the turn's first record)
        estimated, html = audited()
        assert estimated == calibrated() == first.selected_tokens
        assert f'data-estimated="{first.selected_tokens}" data-observed="{refused}"' in html
        # the retry's own report: the retry, as calibration has it
        answered = math.ceil(retry.selected_tokens * 1.1)
        run.observe_usage(retry.turn, answered)
        estimated, html = audited()
        assert estimated == calibrated() == retry.selected_tokens
        assert f'data-estimated="{retry.selected_tokens}" data-observed="{answered}"' in html
        assert f"estimate was {retry.selected_tokens} (×{answered / retry.selected_tokens:.3f})" in html


_RUNTIME = '''
import sys
from contextfold.api import open_store
from contextfold.domain.events import ModelResponse, RunStarted, UserInput

def record(run, turn, input_tokens):  # a runtime's one place that records usage
    run.observe_usage(turn, input_tokens)

with open_store(sys.argv[1]) as store:
    run = store.run("loop")
    run.append(RunStarted(model="claude-x", encoding="cl100k_base"))
    for i in range(3):
        run.append(UserInput(f"part {i}: " + "word " * 1500))
        turn = run.build("anthropic", window=20_000, reserve=500).manifest.turn
        record(run, turn, 7)  # Anthropic's uncached input_tokens alone, every turn
        run.append(ModelResponse(text=f"done {i}"))
    record(run, turn, 7)  # the same report again: the same warning, from the same place
'''


def test_a_runtime_recording_usage_from_one_place_is_warned_of_each_turn(tmp_path: Path) -> None:
    """Under Python's default warning filter a warning shows once per distinct message and place
    (its registry keys on the text): a runtime that records every turn's usage from one line sees
    one warning per turn, as each names its turn, and a repeat of the same report once. A fresh
    interpreter, so no filter of pytest's decides."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    out = subprocess.run([sys.executable, "-c", _RUNTIME, f"sqlite:///{tmp_path / 'runs.db'}"],
                         capture_output=True, text=True, env=env, check=True)
    shown = re.findall(r"UsageWarning: usage for turn (\d+): 7 input tokens", out.stderr)
    assert shown == ["1", "2", "3"], out.stderr
    assert out.stderr.count("<string>:7: UsageWarning") == 3, out.stderr  # the line that called observe_usage

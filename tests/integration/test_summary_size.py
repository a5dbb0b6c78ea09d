"""A summary is required in every later request: its size follows the tools a run uses, not its
length, and one that would make the run unbuildable at its window is never recorded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contextfold.api import Store, open_store
from contextfold.compaction_api import compact
from contextfold.domain.errors import CompactionError
from contextfold.domain.events import (
    AnyEvent,
    HistoryCompacted,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.projections.compaction import deterministic_summary
from contextfold.projections.summary_check import summary_lines, validate_summary


@pytest.fixture
def cf_store(store_url: str) -> Iterator[Store]:
    with open_store(store_url) as store:
        yield store


def _busy_run(calls: int, tools: int) -> list[AnyEvent]:
    """``calls`` calls spread over ``tools`` tools, every 17th failing."""
    events: list[AnyEvent] = [PolicySet(text="Never push to main."), UserInput("Fix the bug in module x")]
    for i in range(calls):
        events += [ModelResponse(tool_calls=[ToolCall(call_id=f"c{i}", name=f"tool_{i % tools}",
                                                      arguments=f'{{"p": "{i}"}}')]),
                   ToolResult(call_id=f"c{i}", content=f"result {i}: " + "lorem ipsum " * 20,
                              is_error=i % 17 == 0, exit_code=1 if i % 17 == 0 else 0)]
    return events


def test_a_summary_of_4000_calls_is_bounded_and_cites_what_it_folds(cf_store: Store) -> None:
    """It was 44k tokens (every older success's id, one line per failure): a run built within 24k
    could not be built at its window after ``compact --strategy summary``."""
    run = cf_store.run("busy")
    run.append(_busy_run(4_000, 50))
    state = run.state()
    events = run.events()
    summary = deterministic_summary(events, state)
    tokens = state.counter.count("\n".join(summary_lines(summary)))
    assert tokens < 8_000
    failures = summary.known_failures
    assert failures[0].startswith("220 earlier known failures (read back in events://busy/1-8002), ")
    assert failures[-1].startswith("call c3995 (tool_45) failed at event 7994") and len(failures) == 17
    assert sum(line.startswith("earlier tool_") for line in summary.tool_calls_and_results) == 50
    validate_summary(summary, events, summary, "busy")  # every line cites what the events hold


def test_a_summary_that_would_not_fit_the_last_builds_window_is_refused(cf_store: Store) -> None:
    run = cf_store.run("tight")
    run.append(_busy_run(600, 60))
    run.build("openai-chat", window=2_600, reserve=400)
    version = run.state().version
    with pytest.raises(CompactionError, match=r"window of the run's last build \(2600, reserve 400"):
        compact(run, "summary")
    assert run.state().version == version  # nothing written
    report = compact(run, "summary", window=2_600, reserve=400)  # the ladder: what keeps it buildable
    assert report.pressure_after != "hard" and "summary" not in {e.strategy for e in report.events}
    wide = cf_store.run("wide")
    wide.append(_busy_run(600, 60))
    wide.build("openai-chat", window=32_000)
    compact(wide, "summary")  # fits the window it is built at: recorded
    assert any(isinstance(r.event, HistoryCompacted) and r.event.strategy == "summary" for r in wide.events())


def test_repeated_compactions_keep_one_line_per_tool_and_true_counts(cf_store: Store) -> None:
    """Each summary added its own line of older successes per tool (forty compactions, forty lines a
    tool), and a folded line counted an earlier folded line as one failure."""
    run = cf_store.run("again")
    run.append(_busy_run(0, 3))
    n = 0
    for _ in range(12):
        batch: list[AnyEvent] = []
        for _ in range(40):
            batch += [ModelResponse(tool_calls=[ToolCall(call_id=f"c{n}", name=f"tool_{n % 3}")]),
                      ToolResult(call_id=f"c{n}", content=f"result {n}", is_error=n % 2 == 0)]
            n += 1
        run.append(batch)
        compact(run, "summary", keep_recent=1)
    summaries = [r.event.summary for r in run.events()
                 if isinstance(r.event, HistoryCompacted) and r.event.strategy == "summary"]
    last = summaries[-1]
    assert sum(line.startswith("earlier tool_") for line in last.tool_calls_and_results) == 3
    folded = last.known_failures[0]
    failed_then = sum(1 for i in range(n - 1) if i % 2 == 0)  # the newest call is kept raw
    assert folded.startswith(f"{failed_then - 16} earlier known failures (read back in events://again/1-")


def test_a_plug_in_summary_line_that_starts_with_earlier_is_carried_as_written(cf_store: Store) -> None:
    """The next deterministic summary parsed it as its own per-tool line and kept its call ids only.
    (It names calls that succeeded: c0 failed, and a summary may not say it passed.)"""
    run = cf_store.run("plugin")
    note = ("earlier pytest runs: call c2 passed only after call c1 cleared the stale cache "
            "(do it again before any run)")
    run.append(_busy_run(8, 1))
    compact(run, "summary", keep_recent=1, summarizer=lambda covered, skeleton: skeleton.model_copy(
        update={"tool_calls_and_results": (note, *skeleton.tool_calls_and_results)}))
    run.append([item for i in range(8, 16) for item in (
        ModelResponse(tool_calls=[ToolCall(call_id=f"c{i}", name="tool_0")]),
        ToolResult(call_id=f"c{i}", content="ok"))])
    compact(run, "summary", keep_recent=1)
    last = [r.event.summary for r in run.events() if isinstance(r.event, HistoryCompacted)][-1]
    assert note in last.tool_calls_and_results


def test_a_long_result_and_its_retrieved_twin_replay_as_recorded(cf_store: Store) -> None:
    """A live run holds a result over 1,024 characters lazily, a replay's fold inline: the twin
    check saw the text in one and not the other, and the recorded turn failed replay --verify."""
    from contextfold.domain.events import EvidenceRetrieved

    text = "\n".join(f"line {i}: the service answered 200 in {i} ms" for i in range(50))
    run = cf_store.run("twin")
    run.append(UserInput("check the service"),
               ModelResponse(tool_calls=[ToolCall(call_id="c1", name="probe")]),
               ToolResult(call_id="c1", content=text, origin="workspace"),
               EvidenceRetrieved(content=text, source_ref="doc://probe", origin="workspace"),
               UserInput("and now?"))
    built = run.build("anthropic", window=16_000)
    assert run.replay(turn=built.manifest.turn).ok

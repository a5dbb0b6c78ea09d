"""Compaction through the store (SQLite and PostgreSQL) and on real traces.

- automatic compaction before each build keeps every turn replay-stable
  (``run.replay(turn).ok``), appends only ``history_compacted`` events (the raw
  events stay) and stubs / summaries read back to the raw content;
- the hard trigger fails with the typed error when nothing can make the
  required content fit;
- on the SWE-agent and OpenHands traces, auto-compacting to a 16k window keeps,
  at every later turn, the current goal, the latest error and the last exit code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from contextfold.api import Run, Store, open_store
from contextfold.compaction_api import auto_compact, build, compact, pressure, show
from contextfold.domain.errors import InvalidInputError, RequiredContextExceedsBudgetError
from contextfold.domain.events import (
    AnyEvent,
    CompactionSummary,
    HistoryCompacted,
    ModelResponse,
    PolicySet,
    RunStarted,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.domain.manifest import checked_config
from contextfold.importers import iter_runs, parse
from contextfold.projections.compaction import Strategy
from tests.conftest import TRACES
from tests.json_strings import joined_strings

NOISE = "\n".join(f"{i:04d} DEBUG worker heartbeat ok, queue depth {i % 7}" for i in range(120))


@pytest.fixture
def cf_store(store_url: str) -> Iterator[Store]:
    s = open_store(store_url)
    yield s
    s.close()


def _turn(t: int) -> list[AnyEvent]:
    failed = t % 5 == 0
    return [ModelResponse(text=f"checking step {t}", tool_calls=(ToolCall(call_id=f"c{t}", name="shell"),)),
            ToolResult(call_id=f"c{t}",
                       content=f"step {t}\n{NOISE}" + ("\nFAILED: step broke" if failed else ""),
                       is_error=failed, exit_code=3 if failed else 0, origin="workspace")]


def test_auto_compaction_is_replay_stable_and_keeps_raw_events(cf_store: Store) -> None:
    run = cf_store.run("r-compact")
    run.append(RunStarted(agent="a"), PolicySet(text="Never touch prod."), UserInput("Diagnose the worker."))
    turns = 24
    for t in range(1, turns + 1):
        build(run, "anthropic", window=9_000, reserve=1_000)
        run.append(_turn(t))
    build(run, "anthropic", window=9_000, reserve=1_000)
    events = run.events()
    compactions = [r for r in events if isinstance(r.event, HistoryCompacted)]
    assert {r.event.strategy for r in compactions} >= {"mask"}  # type: ignore[union-attr]
    assert sum(isinstance(r.event, ToolResult) for r in events) == turns  # raw results stay
    for turn in range(1, turns + 2):
        report = run.replay(turn)
        assert report.ok, (turn, report.differences)
    # read-back: a masked stub cites event://RUN/POS and show returns the raw result
    state = run.state()
    pos = min(state.masked)
    assert "FAILED: step broke" in show(run, f"event://r-compact/{pos}") or "heartbeat" in show(
        run, f"event://r-compact/{pos}")
    assert show(run, str(pos)) == show(run, f"event://r-compact/{pos}")
    group_pos = state.answer_group[pos]
    assert show(run, f"call://r-compact/c1@{group_pos}").startswith("result of call c1")


def test_auto_compaction_judges_pressure_with_the_usage_calibration(cf_store: Store) -> None:
    """The provider counted more tokens than tiktoken: the build's calibrated budget is below
    what the history needs, so auto-compaction must compact (it judged with the uncalibrated
    budget, found no pressure, and the build then dropped history it could have masked)."""
    run = cf_store.run("r-calibrated")
    run.append(RunStarted(agent="a"), PolicySet(text="Never touch prod."), UserInput("Diagnose the worker."))
    for t in range(1, 6):
        run.append(_turn(t))
    window, reserve = 12_000, 1_000
    first = run.build("anthropic", window=window, reserve=reserve)
    estimated = first.manifest.selected_tokens
    assert estimated < window - reserve and not first.manifest.truncations  # fits as tiktoken counts
    run.observe_usage(first.manifest.turn, input_tokens=window - 500)  # the provider counted more
    cfg = checked_config(provider="anthropic", window=window, reserve=reserve)
    assert pressure(run, run.state(), cfg) != "none"
    before = run.version
    build(run, "anthropic", window=window, reserve=reserve)
    written = [r.event for r in run.events()[before:]]
    assert any(isinstance(e, HistoryCompacted) for e in written)


def test_summary_compaction_reads_back_its_range_and_dry_run_appends_nothing(cf_store: Store) -> None:
    run = cf_store.run("r-sum")
    run.append(UserInput("Diagnose the worker."))
    for t in range(1, 13):
        run.append(_turn(t))
    version = run.version
    dry = compact(run, "summary", keep_recent=2, dry_run=True)
    assert dry.events and not dry.positions and run.version == version
    real = compact(run, "summary", keep_recent=2)
    assert [e.model_dump() for e in real.events] == [e.model_dump() for e in dry.events]
    (pos,) = real.positions
    summary = real.events[0]
    assert any("call c5 (shell) failed" in f and "exit_code=3" in f for f in summary.summary.known_failures)
    text = show(run, f"events://r-sum/{summary.covers_from}-{summary.covers_to}")
    assert text.count("--- event ") == summary.covers_to - summary.covers_from + 1
    assert "FAILED: step broke" in text
    built = run.build("openai-chat", window=8_000, reserve=1_000)
    body = json.dumps(built.request)
    assert f"events://r-sum/{summary.covers_from}-{summary.covers_to}" in body
    assert run.replay(built.manifest.turn).ok
    assert pos < run.version


def test_a_summary_quotes_the_error_of_a_log_kept_as_an_artifact(cf_store: Store) -> None:
    """A failing log over the artifact threshold was summarised from the event's head preview:
    a 3,000-test pytest run "failed" with ``tests/test_m0.py::test_case PASSED``."""
    run = cf_store.run("r-big")
    run.append(UserInput("Make the tests pass."))
    log = "".join(f"tests/test_m{i}.py::test_case PASSED\n" for i in range(3000)) + (
        "=================================== FAILURES ===================================\n"
        "E       assert 50.98 == 50.97\ntests/test_total.py:7: AssertionError\n")
    for t in range(4):
        run.append([ModelResponse(tool_calls=(ToolCall(call_id=f"c{t}", name="bash"),)),
                    ToolResult(call_id=f"c{t}", content=log, is_error=True, exit_code=1)])
    (summary,) = compact(run, "summary", keep_recent=1).events
    failures = summary.summary.known_failures
    quoted = "exit_code=1: E assert 50.98 == 50.97 [artifact:"
    assert failures and all(quoted in f for f in failures)


def test_an_unknown_strategy_or_a_keep_recent_that_is_no_count_is_a_typed_error(cf_store: Store) -> None:
    """compact(run, "sumary") raised a bare AssertionError (assert_never); with a window it
    silently only masked; keep_recent="3" raised TypeError; a reserve without a window was
    ignored. Nothing may be appended."""
    run = cf_store.run("r-args")
    run.append(UserInput("Diagnose the worker."))
    for t in range(1, 8):
        run.append(_turn(t))
    run.append(ModelResponse(tool_calls=(ToolCall(call_id="open", name="shell"),)))  # in flight
    version = run.version
    for attempt in (lambda: compact(run, "sumary"),  # type: ignore[arg-type]
                    lambda: compact(run, "sumary", window=4_000, reserve=500),  # type: ignore[arg-type]
                    lambda: build(run, "anthropic", window=4_000, reserve=500, strategy="sumary")):  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="unknown compaction strategy 'sumary'"):
            attempt()
    for keep in ("3", 1.5, None):
        with pytest.raises(InvalidInputError, match="keep_recent must be an integer"):
            compact(run, "mask", keep_recent=keep)  # type: ignore[arg-type]
    for reserve in (500, -5):  # without a window nothing is built: it was ignored, unchecked
        with pytest.raises(InvalidInputError, match=rf"^reserve \({reserve}\) goes with a window"):
            compact(run, "mask", reserve=reserve)
    assert run.version == version


def test_hard_trigger_fails_with_the_typed_error_when_nothing_fits(cf_store: Store) -> None:
    run = cf_store.run("r-hard")
    run.append(PolicySet(text="rule " * 3000), UserInput("go"))  # a policy is never shrunk
    for t in range(1, 4):
        run.append(_turn(t))
    with pytest.raises(RequiredContextExceedsBudgetError):
        build(run, "neutral", window=2_500, reserve=500)


def test_compact_to_a_window_that_cannot_fit_appends_nothing(cf_store: Store) -> None:
    """``compact(window=...)`` (``compact --window``) appended the masks of its ladder when even
    they left the required content over the window: the log changed, the window still did not
    fit, and only the report's pressure ("hard") said so. It now raises the typed error, naming
    the steps it planned, and appends nothing; a window that fits after them gets them."""
    run = cf_store.run("r-compact-hard")
    run.append(PolicySet(text="rule " * 3000), UserInput("go"))
    for t in range(1, 6):
        run.append(_turn(t))
    version = run.version
    for dry_run in (True, False):
        with pytest.raises(RequiredContextExceedsBudgetError) as caught:
            compact(run, "mask", window=2_500, reserve=500, keep_recent=1, dry_run=dry_run)
        assert "compaction planned mask of events" in str(caught.value) and "nothing was written" in str(
            caught.value)
        assert run.version == version
    report = compact(run, "mask", window=5_500, reserve=500, keep_recent=1)
    assert report.events and run.version == version + len(report.events)


def test_a_build_that_fails_after_auto_compaction_appends_nothing(cf_store: Store) -> None:
    """The recovery events (a cancellation of the call in flight) and the mask / summary events
    of the ladder were appended one by one before the build raised: a failed build left four
    compactions and a cancellation in the log. Nothing may be written; a build that fits
    appends them with its record, in one transaction."""
    run = cf_store.run("r-hard-clean")
    run.append(PolicySet(text="rule " * 3000), UserInput("go"))
    for t in range(1, 5):
        run.append(_turn(t))
    run.append(ModelResponse(tool_calls=(ToolCall(call_id="open", name="shell"),)))  # in flight
    version = run.version
    for attempt in (lambda: build(run, "neutral", window=2_500, reserve=500),
                    lambda: run.build("neutral", window=2_500, reserve=500, auto_compact=True),
                    lambda: run.build("neutral", window=2_500, reserve=500, auto_compact=True,
                                      record=False),
                    lambda: auto_compact(run, checked_config(window=2_500, reserve=500))):
        with pytest.raises(RequiredContextExceedsBudgetError):
            attempt()
        assert run.version == version and run.state().version == version
    built = build(run, "neutral", window=5_500, reserve=500)
    added = [r.event.type for r in run.events()[version:]]
    assert added[0] == "tool_call_cancelled" and added[-1] == "context_built"
    assert "history_compacted" in added and built.manifest.log_version == run.version - 1
    assert run.replay(built.manifest.turn).ok


def test_the_error_after_a_failed_auto_compaction_describes_the_log_as_it_is(cf_store: Store) -> None:
    """Every step of the ladder was folded into the snapshot under hard pressure (hard -> hard),
    and the error was that of the compacted snapshot: a summary ``e17`` that was never written,
    and a required total larger than the log's (the summary outgrew the input it covered). The
    error now lists the fragments of the log as it is and names the steps it planned."""
    run = cf_store.run("r-hard-error")
    run.append(UserInput("go"))
    for i in range(6):
        log = "\n".join(f"line {j} of call {i}: something happened here" for j in range(80))
        run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="shell"),)),
                   ToolResult(call_id=f"c{i}", content=log))
    version = run.version
    with pytest.raises(RequiredContextExceedsBudgetError) as plain:
        run.build("openai-chat", window=50, reserve=10)
    written = {f"e{r.position}" for r in run.events()} | {f"g{r.position}" for r in run.events()}
    attempts: list[Callable[[], object]] = [
        lambda: build(run, "openai-chat", window=50, reserve=10),
        lambda: run.build("openai-chat", window=50, reserve=10, auto_compact=True)]
    for attempt in attempts:
        with pytest.raises(RequiredContextExceedsBudgetError) as auto:
            attempt()
        assert auto.value.required == plain.value.required
        assert auto.value.required_tokens == plain.value.required_tokens
        ids = {fid for fid, _ in auto.value.required if fid[0] in "eg" and fid[1:].isdigit()}
        assert ids and ids <= written
        assert auto.value.note is not None and "nothing was written" in auto.value.note
        # a summary that would make the required content larger is not planned (``relieves``)
        assert "summary of events" not in str(auto.value) and "mask of events" in str(auto.value)
        assert run.version == version
    assert plain.value.note is None


# ---------------------------------------------------------------- real traces

SWE = TRACES / "swe-agent-demos"
OPENHANDS = TRACES / "openhands-event-streams"
_SWE_ERROR = re.compile(r"Traceback \(most recent call last\)|\w+Error:|command not found|"
                        r"No such file or directory|syntax error", re.IGNORECASE)


def test_the_error_names_a_summary_too_large_for_the_window_as_what_blocks_it(cf_store: Store) -> None:
    """When the largest required fragment is a summary already in the log, auto-compaction's error
    said only what it had planned, as if another summary could help: each new one merges it."""
    run = cf_store.run("big-summary")
    run.append(PolicySet(text="Be careful."), UserInput("go"))
    for t in range(60):
        run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{t}", name=f"tool_{t % 20}"),)),
                   ToolResult(call_id=f"c{t}", content=f"out {t} " + "x " * 50))
    run.compact("summary", keep_recent=1)
    (summary,) = [f for f in run.preview("openai-chat", window=64_000, reserve=1_000).manifest.fragments
                  if f.source_ref.startswith("events://")]
    with pytest.raises(RequiredContextExceedsBudgetError) as err:
        run.build("openai-chat", window=700, reserve=100, auto_compact=True)
    assert re.search(rf"the largest required fragment is the summary {summary.id} \(\d+ tokens\), which "
                     "every new summary merges and cannot make smaller: build with a larger window",
                     str(err.value))


def swe_events(path: Path) -> list[AnyEvent]:
    """A SWE-agent ``.traj`` as the importer records it, with a test's guess at which results
    failed: SWE-agent records no exit status (so the importer sets none), and this test checks
    that the latest failure survives compaction, so an observation showing a traceback or a
    shell error is taken for one here."""
    events = parse(path.read_bytes(), format="swe-agent", source=path.name)
    return [e.model_copy(update={"is_error": True})
            if isinstance(e, ToolResult) and _SWE_ERROR.search(e.content) else e for e in events]


def trace_runs() -> list[tuple[str, list[AnyEvent]]]:
    runs: list[tuple[str, list[AnyEvent]]] = []
    for i, path in enumerate(sorted(SWE.rglob("*.traj"))):
        runs.append((f"swe/{i}/{path.stem[:40]}", swe_events(path)))
    for path in sorted(OPENHANDS.glob("*.json*")):
        found = iter_runs(path.read_bytes(), format="openhands", source=path.name)
        for j, (_, events) in enumerate(found):
            runs.append((f"oh/{path.stem[:40]}/{j}", events))
    return runs


def check_survivors(run: Run, events: list[AnyEvent], request: dict[str, Any]) -> None:
    """The goal (the task's first 200 characters), the latest error and the last exit
    code of the log so far are in the rendered request."""
    text = joined_strings(request)
    task = next((e.text for e in events if isinstance(e, UserInput) and e.text.strip()), "")
    assert " ".join(task[:200].split()) in " ".join(text.split()), "goal lost"
    results = [e for e in events if isinstance(e, ToolResult)]
    errors = [e for e in results if e.is_error]
    if errors:
        assert errors[-1].call_id in text, f"latest error {errors[-1].call_id} lost"
    coded = [e for e in results if e.exit_code is not None]
    if coded:
        last = coded[-1]
        assert last.call_id in text, f"last exit code's call {last.call_id} lost"
        assert (f"exit code {last.exit_code}" in text or f"exit_code={last.exit_code}" in text), \
            f"last exit code {last.exit_code} of {last.call_id} lost"


@pytest.mark.skipif(not (SWE.is_dir() and OPENHANDS.is_dir()),
                    reason=f"traces not present under {TRACES} (set CONTEXTFOLD_TRACES)")
def test_traces_auto_compacted_to_16k_keep_goal_latest_error_and_exit_code(sqlite_url: str) -> None:
    runs = trace_runs()
    assert len(runs) >= 25
    compacted_runs = 0
    with open_store(sqlite_url) as store:
        for run_id, events in runs:
            run = store.run(run_id)
            starts = [i for i, e in enumerate(events) if isinstance(e, ModelResponse)] + [len(events)]
            done = 0
            for cut in starts[1:]:  # build before each later model response, and at the end
                run.append(events[done:cut])
                done = cut
                built = build(run, "openai-chat", window=16_000, reserve=2_000)
                check_survivors(run, events[:cut], built.request)
            if any(isinstance(r.event, HistoryCompacted) for r in run.events()):
                compacted_runs += 1
    assert compacted_runs >= 3  # the window really forced compaction on real runs (4 at 16k)


def test_a_compaction_covering_no_earlier_range_is_refused_and_writes_nothing(cf_store: Store) -> None:
    """A reversed cover (3-1) was accepted and summarised nothing; one past the event's own
    position (1-99 at position 5) was clipped, while its summary named events 1-99."""
    run = cf_store.run("r-bad-cover")
    run.append(UserInput("look"), *_turn(1), UserInput("and?"))
    summary = CompactionSummary(inferences=("the worker was checked",))
    for lo, hi in ((3, 1), (1, 99), (1, 5)):
        with pytest.raises(InvalidInputError, match=f"at position 5 covers positions {lo}-{hi}: "):
            run.append(HistoryCompacted(summary=summary, covers_from=lo, covers_to=hi))
        assert run.version == 4
    run.append(HistoryCompacted(summary=summary, covers_from=1, covers_to=4))
    shown = json.dumps(run.build("openai-chat").request)
    assert "the worker was checked" in shown and "step 1" not in shown


def test_a_record_of_a_turn_the_run_does_not_have_is_refused_and_writes_nothing(cf_store: Store) -> None:
    """An imported context_built of turn 999 in a run of 2 turns was accepted: ``manifest --turn
    999`` showed it while ``replay`` and ``audit`` said there was no turn 999."""
    from contextfold.domain.events import ContextBuilt

    run = cf_store.run("r-bad-record")
    run.append(UserInput("look"))
    run.build("openai-chat")  # a record of turn 1 at position 2
    record = next(r.event for r in run.events() if isinstance(r.event, ContextBuilt))
    run.append(*_turn(1))  # turn 2 is next; version 4
    cases: list[tuple[list[AnyEvent], str]] = [
             ([record.model_copy(update={"turn": 3})], "at position 5 is of turn 3"),
             ([record.model_copy(update={"log_version": 5})], "at position 5 is of turn 1 with log_version"),
             ([*_turn(2), record.model_copy(update={"turn": 4})], "at position 7 is of turn 4")]
    for batch, message in cases:  # the last: a model response in the batch, undone with it
        with pytest.raises(InvalidInputError, match=f"context_built {message}"):
            run.append(*batch)
        assert run.version == 4
    run.append(*_turn(2), record.model_copy(update={"turn": 3, "log_version": 6}))
    assert run.version == 7


@pytest.mark.parametrize("window", [3_000, 100_000])
def test_an_auto_compacting_build_names_its_recovery_events_in_repairs(cf_store: Store, window: int) -> None:
    """The recovery events an auto-compaction plans come first in its events, and the build found
    none left to name: its manifest's ``repairs`` (documented as the recovery events the build
    appended) was empty while the log got a TOOL_RESULT_LOST and a cancellation."""
    run = cf_store.run(f"r-auto-repairs-{window}")
    run.append(PolicySet(text="p"), UserInput("go"),
               ModelResponse(tool_calls=(ToolCall(call_id="lost1", name="sh"),)))  # never answered
    for t in range(1, 13):
        run.append(_turn(t))
    run.append(ModelResponse(tool_calls=(ToolCall(call_id="inflight", name="sh"),)))  # in flight
    expected = ["tool_result_lost:lost1", "tool_call_cancelled:inflight"]

    def recovery(repairs: tuple[str, ...]) -> list[str]:
        return [r for r in repairs if r.startswith(("tool_result_lost:", "tool_call_cancelled:"))]

    assert recovery(run.preview("anthropic", window=window, auto_compact=True).manifest.repairs) == expected
    version = run.version
    built = run.build("anthropic", window=window, auto_compact=True)
    appended = [f"{r.event.type}:{r.event.call_id}" for r in run.events()[version:]
                if r.event.type in ("tool_result_lost", "tool_call_cancelled")]
    assert appended == expected and recovery(built.manifest.repairs) == expected
    assert run.replay(built.manifest.turn).ok


def test_an_auto_compacted_build_with_nothing_to_compact_reads_no_log(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A build with ``auto_compact=True`` read the whole log and built twice from a snapshot with
    no memo, compaction or not: its cost grew with the run (400 turns: 3.9 s per 100 builds at
    turn 400, 0.6 s without it). With no pressure it reads nothing and builds on the run's state."""
    from contextfold.api import Run

    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r")
        run.append(UserInput("go"))
        for t in range(1, 30):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{t}", name="run"),)),
                       ToolResult(call_id=f"c{t}", content=f"out {t}"))
        expected = run.preview("openai-chat", window=32_000, reserve=1_000)

        def no_log(self: Run, *args: object, **kwargs: object) -> None:
            raise AssertionError("read the log")

        monkeypatch.setattr(Run, "events", no_log)
        built = run.build("openai-chat", window=32_000, reserve=1_000, auto_compact=True)
    assert built.manifest.request_hash == expected.manifest.request_hash


def test_auto_compaction_covers_the_newest_group_only_when_nothing_else_lets_the_build_be_made(
        cf_store: Store) -> None:
    """The newest tool group is required. A call whose arguments alone outgrow the budget (a
    whole file written: no cut may shorten arguments) made every build of the run fail, and
    ``auto_compact`` too, whose ladder always kept the newest group. Its last step now covers
    that group, and only when the build could not be made otherwise."""
    run = cf_store.run("r-last-resort")
    run.append(PolicySet(text="P"), UserInput("write the fixture file"),
               ModelResponse(tool_calls=(ToolCall(call_id="w1", name="write_file",
                                                  arguments=json.dumps({"path": "fixture.txt",
                                                                        "content": "data " * 30_000})),)),
               ToolResult(call_id="w1", content="written"), UserInput("thanks; now what is 2+2?"))
    with pytest.raises(RequiredContextExceedsBudgetError):
        run.build("openai-chat", window=16_000, reserve=2_000)
    built = run.build("openai-chat", window=16_000, reserve=2_000, auto_compact=True)
    compaction = [r.event for r in run.events() if isinstance(r.event, HistoryCompacted)][-1]
    assert compaction.strategy == "summary" and compaction.covers_to >= 4
    assert any(line.startswith('call w1 (write_file) {"path": "fixture.txt"')
               for line in compaction.summary.tool_calls_and_results)
    assert "now what is 2+2?" in json.dumps(built.request) and run.replay(built.manifest.turn).ok

    # under soft pressure (history dropped, the build made) the newest group stays raw
    soft = cf_store.run("r-soft")
    soft.append(PolicySet(text="P"), UserInput("go"))
    for t in range(1, 30):
        soft.append(_turn(t))
    soft.build("neutral", window=6_000, reserve=500, auto_compact=True)
    covers = [r.event.covers_to for r in soft.events() if isinstance(r.event, HistoryCompacted)]
    assert covers and max(covers) < soft.version - 2  # the newest call and its result not covered


def _moved_past_a_lost_call(run: Run) -> None:
    """A call never answered, a user input after it (the run moved past it: it is lost, but no
    build has recorded its TOOL_RESULT_LOST yet), then eight closed groups."""
    run.append(PolicySet(text="P"), UserInput("deploy"),
               ModelResponse(tool_calls=(ToolCall(call_id="lost1", name="deploy"),)),
               UserInput("hello? is it done"))
    for t in range(1, 9):
        run.append(_turn(t))
    run.append(UserInput("go on"))


@pytest.mark.parametrize(("strategy", "window"), [("mask", None), ("summary", None), ("summary", 4_000)])
def test_compact_records_the_loss_of_a_call_the_run_moved_past(cf_store: Store, strategy: Strategy,
                                                              window: int | None) -> None:
    """``compact`` (and ``contextfold compact``) said "nothing to compact" on a run whose lost call
    no build had recorded yet (a freshly imported trace): the call's group counted as open and
    every cut was pulled back before it. Auto-compaction folded the recovery events first; now
    an explicit compaction does too, and appends the TOOL_RESULT_LOST with its events."""
    run = cf_store.run(f"r-lost-{strategy}-{window}")
    _moved_past_a_lost_call(run)
    version = run.version
    dry = run.compact(strategy, window=window, dry_run=True)
    assert dry.events and dry.events[0].covers_from <= 3 and run.version == version
    report = run.compact(strategy, window=window)
    appended = [r.event for r in run.events()[version:]]
    assert [e.type for e in appended] == ["tool_result_lost", *["history_compacted"] * len(report.events)]
    assert report.positions == tuple(range(version + 2, version + 2 + len(report.events)))
    assert report.events[0].covers_from <= 3 < version + 1  # the lost call's group, closed by its marker
    built = run.build("anthropic", window=16_000)
    assert [r.event.type for r in run.events()[run.version - 1:]] == ["context_built"]  # no second marker
    assert "tool_result_lost:lost1" not in built.manifest.repairs and run.replay(built.manifest.turn).ok


def test_compact_with_nothing_to_compact_records_no_loss(cf_store: Store) -> None:
    """A compaction that finds no cut writes nothing, not even the recovery event it folded."""
    run = cf_store.run("r-lost-nothing")
    run.append(PolicySet(text="P"), UserInput("deploy"),
               ModelResponse(tool_calls=(ToolCall(call_id="lost1", name="deploy"),)), UserInput("done?"))
    version = run.version
    assert not run.compact("mask").events and run.version == version


def test_a_summary_of_an_earlier_input_lists_the_required_fragments_as_a_fresh_handle_does(
        cf_store: Store) -> None:
    """A long input, a short one after it, and a summary of the first: the build that cannot hold
    the summary and the newest input names them in log order, from the handle that built before
    the summary was appended as from a fresh one (it listed ``e5, e4`` from one and ``e4, e5``
    from the other: found by ``test_run_life_machine``)."""
    run = cf_store.run("r")
    run.append(RunStarted(agent="machine"), UserInput(" ".join(["alpha"] * 1500)))
    run.compact("mask", keep_recent=0)
    run.append(UserInput("alpha"))
    assert run.preview("openai-chat", window=150).manifest.fragments  # a build before the summary
    run.compact("summary", keep_recent=0)
    errors = []
    for handle in (run, cf_store.run("r")):
        with pytest.raises(RequiredContextExceedsBudgetError) as raised:
            handle.preview("openai-chat", window=150)
        errors.append(raised.value)
    listed = [fid for fid, _ in errors[0].required]
    assert len(listed) == 2 and listed == sorted(listed, key=lambda fid: int(fid[1:]))
    assert errors[0].required == errors[1].required and str(errors[0]) == str(errors[1])

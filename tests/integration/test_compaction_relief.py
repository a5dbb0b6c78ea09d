"""Auto-compaction records a step only when it relieves the pressure, and keeps the latest error.

A step that was merely no worse was recorded: a failing log longer than the budget keeps the
pressure soft whatever is compacted, so every build climbed the whole ladder, and one of its
steps masked (then summarized) the very log the model was fixing.
"""

from __future__ import annotations

import json
import re

from contextfold.api import Run, open_store
from contextfold.compaction_api import compact
from contextfold.domain.events import HistoryCompacted, ModelResponse, ToolCall, ToolResult, UserInput


def _failing_log_run(sqlite_url: str) -> Run:
    run = open_store(sqlite_url).run("r")
    run.append(UserInput("Fix the failing test. Do not edit tests/."))
    for t in range(8):
        call = ToolCall(call_id=f"c{t}", name="bash", arguments=f'{{"cmd": "cat f{t}"}}')
        run.append(ModelResponse(text=f"step {t}", tool_calls=(call,)),
                   ToolResult(call_id=f"c{t}", content=f"SMALL-RESULT-{t}: " + "ok\n" * 20))
    log = "\n".join(f"tests/test_x.py::test_{i} PASSED" for i in range(8000))
    run.append(ModelResponse(text="run tests", tool_calls=(ToolCall(call_id="big", name="pytest"),)),
               ToolResult(call_id="big", content=log + "\nE   AssertionError\n1 failed", is_error=True,
                          exit_code=1))
    return run


def _compactions(run: Run) -> list[HistoryCompacted]:
    return [r.event for r in run.events() if isinstance(r.event, HistoryCompacted)]


def test_auto_compaction_records_only_what_relieves_and_keeps_the_failing_log(sqlite_url: str) -> None:
    run = _failing_log_run(sqlite_url)
    run.build("anthropic", window=16_000, auto_compact=True)
    assert _compactions(run) == []  # the log is cut to fit whatever is compacted: no step helps
    run.append(ModelResponse(text="look", tool_calls=(ToolCall(call_id="n1", name="bash", arguments="{}"),)),
               ToolResult(call_id="n1", content="tiny"))
    built = run.build("anthropic", window=16_000, auto_compact=True)
    big = next(r.position for r in run.events()
               if isinstance(r.event, ToolResult) and r.event.call_id == "big")
    for event in _compactions(run):  # never the latest error's group, neither stubbed nor summarized
        assert event.covers_to < big - 1 or event.covers_from > big, event
    shown = built.body_bytes.decode().count("PASSED")
    plain = run.preview("anthropic", window=16_000).body_bytes.decode().count("PASSED")
    assert shown > 500 and shown >= plain - 50


def test_a_mask_stubs_results_either_side_of_the_latest_error(sqlite_url: str) -> None:
    """An error whose tool never ran again stays the latest however old it is: a mask that stopped
    before it would leave every later result raw for the rest of the run."""
    run = open_store(sqlite_url).run("r")
    run.append(UserInput("go"),
               ModelResponse(tool_calls=(ToolCall(call_id="d1", name="deploy", arguments="{}"),)),
               ToolResult(call_id="d1", content="ERROR: health check failed\n" + "trace\n" * 200,
                          is_error=True, exit_code=1))
    for t in range(6):
        run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"r{t}", name="read", arguments="{}"),)),
                   ToolResult(call_id=f"r{t}", content=f"READ-{t}\n" + "line\n" * 200))
    report = compact(run, "mask", keep_recent=2)
    covers = [(e.covers_from, e.covers_to) for e in report.events]
    assert covers == [(4, 11)], covers  # after the error's group (2-3); before it nothing to mask
    state = run.state()
    assert 3 not in state.masked and {5, 7, 9, 11} <= set(state.masked)
    text = run.preview("anthropic", window=200_000).body_bytes.decode()
    assert "health check failed" in text and len(re.findall(r"READ-\d", text)) == 2


def test_a_json_result_sent_whole_in_compact_form_is_no_pressure(sqlite_url: str) -> None:
    """A pretty-printed JSON result shown compact ("compacted ..., nothing omitted") was listed
    among the manifest's truncations, which the pressure measure counted as lost tokens: the
    auto-compaction masked the result the build had sent whole, and the model lost its data."""
    run = open_store(sqlite_url).run("r")
    doc = json.dumps({"items": [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(60)]},
                     indent=4)
    run.append(UserInput("go"),
               ModelResponse(tool_calls=(ToolCall(call_id="c1", name="list", arguments="{}"),)),
               ToolResult(call_id="c1", content=doc),
               ModelResponse(tool_calls=(ToolCall(call_id="c2", name="list", arguments="{}"),)),
               ToolResult(call_id="c2", content="ok"), UserInput("next"))
    seen = run.preview("openai-chat", window=1400, reserve=100).manifest
    (line,) = [f for f in seen.fragments if f.kind == "tool_result" and "compacted" in f.selection_reason]
    assert not any(seen.excluded.values()) and not line.truncated
    built = run.build("openai-chat", window=1400, reserve=100, auto_compact=True)
    assert _compactions(run) == []
    assert line.id in {f.id for f in built.manifest.fragments}

"""An OpenHands condensation is imported as the HistoryCompacted that stands in for what it forgot.

The shapes follow OpenHands' own events: the earlier stream's ``condensation`` action
(``CondensationAction``: ``forgotten_events_start_id`` .. ``forgotten_events_end_id`` or
``forgotten_event_ids``, ``summary``) and the V1 SDK's ``Condensation`` event. A view drops every
event any condensation forgot and shows the latest summary; the build of the imported run must
show the model the same.
"""

from __future__ import annotations

import json
from typing import Any

from contextfold.domain.events import AnyEvent, CompactionSummary, HistoryCompacted, ToolResult
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import parse
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from tests.unit.test_import_openhands_v1 import action, observation, text


def _b(value: Any) -> bytes:
    return json.dumps(value).encode()


def _pair(eid: int, command: str, output: str) -> list[dict[str, Any]]:
    """An earlier-stream action and its observation (no tool ids: the call is ``oh-<eid>``)."""
    return [{"id": eid, "source": "agent", "action": "run", "args": {"command": command}},
            {"id": eid + 1, "source": "agent", "observation": "run", "cause": eid, "content": output,
             "extras": {"metadata": {"exit_code": 0}}}]


def _condensation(eid: int, summary: str | None, **forgets: Any) -> dict[str, Any]:
    return {"id": eid, "source": "agent", "action": "condensation",
            "args": {"summary": summary, "summary_offset": 2, **forgets}}


def _history(*condensations: dict[str, Any]) -> list[dict[str, Any]]:
    first, second = condensations
    return [{"id": 0, "source": "agent", "action": "system", "args": {"content": "You are OpenHands."}},
            {"id": 1, "source": "user", "action": "message", "args": {"content": "Fix the parser."}},
            *_pair(2, "ls", "OUT-2"), *_pair(4, "cat a.py", "OUT-4"), *_pair(6, "cat b.py", "OUT-6"),
            first, *_pair(9, "pytest", "OUT-9"), *_pair(11, "cat c.py", "OUT-11"),
            second, *_pair(14, "pytest -x", "OUT-14"),
            {"id": 16, "source": "user", "action": "message", "args": {"content": "Go on."}}]


def _request_text(events: list[AnyEvent]) -> str:
    records = [RecordedEvent("r", i, e, f"{i:064x}") for i, e in enumerate(events, start=1)]
    return json.dumps(build_context(fold(records), BuildConfig()).request)


def _compactions(events: list[AnyEvent]) -> list[tuple[int, int, int, tuple[str, ...]]]:
    return [(pos, e.covers_from, e.covers_to, e.summary.inferences)
            for pos, e in enumerate(events, start=1) if isinstance(e, HistoryCompacted)]


def test_each_summary_covers_everything_forgotten_so_far_and_the_latest_is_what_the_model_sees() -> None:
    events = parse(_b(_history(
        _condensation(8, "S1: listed the files, read a.py", forgotten_events_start_id=2,
                      forgotten_events_end_id=5),
        _condensation(13, "S2: a.py and b.py read, the tests fail in c.py", forgotten_events_start_id=2,
                      forgotten_events_end_id=10))), format="openhands")
    # positions: 1 run_started, 2 policy, 3 user, 4-9 the first three pairs, 10 the first summary,
    # 11-14 two pairs, 15 the second summary (over the first one too), 16-17 a pair, 18 the input
    assert _compactions(events) == [(10, 4, 7, ("S1: listed the files, read a.py",)),
                                    (15, 4, 12, ("S2: a.py and b.py read, the tests fail in c.py",))]
    assert all(e.strategy == "summary" and e.summarizer == "openhands" and
               e.summary == CompactionSummary(inferences=e.summary.inferences)
               for e in events if isinstance(e, HistoryCompacted))
    text = _request_text(events)
    assert "S2: a.py and b.py read" in text and "S1: listed" not in text
    assert "inferences (not recorded facts)" in text  # an LLM's summary is not a recorded fact
    for gone in ("OUT-2", "OUT-4", "OUT-6", "OUT-9"):
        assert gone not in text
    for kept in ("OUT-11", "OUT-14", "Fix the parser.", "Go on."):
        assert kept in text


def test_a_condensation_that_is_not_one_legal_cover_or_has_no_summary_is_left_out() -> None:
    for second in (
        _condensation(13, "S2", forgotten_event_ids=[2, 3, 4]),  # the call 4 without its answer 5
        _condensation(13, "S2", forgotten_event_ids=[2, 3, 9, 10]),  # a gap: events 4-7 kept
        _condensation(13, None, forgotten_events_start_id=2, forgotten_events_end_id=10),  # only dropped
    ):
        events = parse(_b(_history(_condensation(8, "", forgotten_event_ids=[]), second)),
                       format="openhands")
        assert _compactions(events) == []
        assert sum(isinstance(e, ToolResult) for e in events) == 6  # every event kept whole
        assert "OUT-2" in _request_text(events)


def test_v1_condensation_names_the_events_it_forgets() -> None:
    conversation = [
        {"id": "e0", "source": "agent", "kind": "SystemPromptEvent",
         "system_prompt": text("You are OpenHands agent."), "tools": []},
        {"id": "e1", "source": "user", "kind": "MessageEvent",
         "llm_message": {"role": "user", "content": [text("Fix the failing test")]}, "extended_content": []},
        action("e2", "resp-1", "toolu_01", "terminal", {"command": "pytest -q"}),
        observation("e3", "e2", "toolu_01", "terminal", "OUT-3", exit_code=1),
        action("e4", "resp-2", "toolu_02", "terminal", {"command": "cat calc.py"}),
        observation("e5", "e4", "toolu_02", "terminal", "OUT-5", exit_code=0),
        {"id": "e6", "source": "environment", "kind": "Condensation",
         "forgotten_event_ids": ["e2", "e3", "e4", "e5"], "summary": "Ran the tests: add() is wrong.",
         "summary_offset": 2, "llm_response_id": "resp-c"},
        action("e7", "resp-3", "toolu_03", "terminal", {"command": "pytest -q"}),
        observation("e8", "e7", "toolu_03", "terminal", "OUT-8", exit_code=0),
    ]
    events = parse(_b(conversation), format="openhands")
    assert _compactions(events) == [(8, 4, 7, ("Ran the tests: add() is wrong.",))]
    text_ = _request_text(events)
    assert "Ran the tests: add() is wrong." in text_ and "OUT-8" in text_
    assert "OUT-3" not in text_ and "OUT-5" not in text_

    # a second condensation names only the events it newly forgets: its cover takes in the
    # first one's (that summary is no longer shown either)
    conversation += [
        {"id": "e9", "source": "environment", "kind": "Condensation", "forgotten_event_ids": ["e7", "e8"],
         "summary": "Fixed add(); the tests pass.", "summary_offset": 2},
        action("e10", "resp-4", "toolu_04", "finish", {"message": "Done."}),
        observation("e11", "e10", "toolu_04", "finish", "OUT-11"),
    ]
    events = parse(_b(conversation), format="openhands")
    assert _compactions(events)[1] == (11, 4, 10, ("Fixed add(); the tests pass.",))
    text_ = _request_text(events)
    assert "Fixed add(); the tests pass." in text_ and "add() is wrong" not in text_ and "OUT-8" not in text_

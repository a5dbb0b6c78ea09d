"""OpenHands event streams (real agent runs): import, fold, and at every turn the pairing rules hold."""

from __future__ import annotations

import pytest

from contextfold.domain.events import RuntimeNote
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.importers import iter_runs
from contextfold.projections.builder import build_context
from contextfold.projections.past_states import state_at_turn
from contextfold.projections.render import check_protocol, render
from contextfold.projections.state import ToolGroup
from tests.conftest import TRACES

OPENHANDS = TRACES / "openhands-event-streams"
pytestmark = pytest.mark.skipif(not OPENHANDS.exists(), reason="../shared/traces not present")


def _runs() -> list[tuple[str, list[RecordedEvent]]]:
    out = []
    for path in sorted(OPENHANDS.glob("*.json*")):
        for suffix, events in iter_runs(path.read_bytes(), format="openhands", source=str(path)):
            run_id = f"oh-{path.stem}-{suffix or 0}"
            out.append((run_id, [RecordedEvent(run_id, i, e, "") for i, e in enumerate(events, start=1)]))
    return out


def test_every_openhands_stream_keeps_pairing_at_every_turn() -> None:
    runs = _runs()
    assert len(runs) == 9
    turns_checked = 0
    for run_id, events in runs:
        responses = sum(1 for r in events if r.event.type == "model_response")
        for turn in range(1, responses + 2):
            state = state_at_turn(events, turn, run_id=run_id)
            seen: set[str] = set()
            for item in state.timeline():
                if isinstance(item, ToolGroup):
                    for slot in item.calls:
                        key = f"{slot.call_id}@{item.position}"
                        assert key not in seen
                        seen.add(key)
            built = build_context(state, BuildConfig(provider="anthropic", window=32_000, reserve=2_000),
                                  render=lambda c, p, n: render(c, p, max_tokens=n))
            check_protocol("anthropic", built.request)  # every call answered exactly once, right after
            turns_checked += 1
    assert turns_checked > 50


def test_a_refused_call_does_not_displace_the_task() -> None:
    """Multi-SWE-bench ponyc-4593: the runtime refused a malformed call (an ``error`` observation
    answering no call). Imported as a user input it became the required current input, and at a
    5,000-token window the issue statement (the task) was cut to a few hundred tokens."""
    path = OPENHANDS / "multi_swe_bench_example_output.jsonl"
    runs = dict(iter_runs(path.read_bytes(), format="openhands", source=path.name))
    records = [RecordedEvent("r", i, e, "") for i, e in enumerate(runs["ponylang__ponyc-4593"], start=1)]
    [note] = [r.event for r in records if isinstance(r.event, RuntimeNote)]
    assert "Parameter 'command' is expected" in note.text and note.is_error
    state = state_at_turn(records, sum(r.event.type == "model_response" for r in records) + 1, run_id="r")
    built = build_context(state, BuildConfig(provider="openai-chat", window=5_000, reserve=1_000),
                          render=lambda c, p, n: render(c, p, max_tokens=n))
    [task] = [f for f in built.manifest.fragments if f.kind == "user_input"]
    assert task.source_ref.endswith("/4") and task.required and not task.truncated

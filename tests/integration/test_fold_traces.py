"""Fold the 200 real tau-bench gpt-4o airline runs and check the protocol at every turn.

The importer is written elsewhere; a tiny local mapper turns the OpenAI chat
messages into events (system -> PolicySet, user -> UserInput, assistant ->
ModelResponse, tool -> ToolResult). 49 runs re-use a call id for different
calls: each answer must land on the call it followed, once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from contextfold.domain.events import (
    AnyEvent,
    ModelResponse,
    PolicySet,
    RunStarted,
    ToolCall,
    ToolResult,
    UserInput,
    canonical_json,
)
from contextfold.domain.fragments import ToolResultBlock
from contextfold.domain.log import GENESIS_HASH, RecordedEvent, chain_hash
from contextfold.projections.fold import fold, fold_event, new_state
from contextfold.projections.past_states import state_at_turn
from contextfold.projections.repair import recovery_events
from contextfold.projections.state import RunState, ToolGroup

pytestmark = pytest.mark.traces

REPO = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", REPO.parent / "shared" / "traces"))
TAU = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"


def _events(traj: list[dict[str, Any]]) -> list[AnyEvent]:
    out: list[AnyEvent] = [RunStarted(agent="tau-bench", model="gpt-4o")]
    for m in traj:
        role, content = m["role"], m.get("content") or ""
        if role == "system":
            out.append(PolicySet(text=content, source_ref="tau-bench://system"))
        elif role == "user":
            out.append(UserInput(content))
        elif role == "assistant":
            calls = tuple(ToolCall(call_id=c["id"], name=c["function"]["name"],
                                   arguments=c["function"]["arguments"])
                          for c in m.get("tool_calls") or ())
            out.append(ModelResponse(text=content, tool_calls=calls))
        elif role == "tool":
            out.append(ToolResult(call_id=m["tool_call_id"], content=content))
        else:
            raise AssertionError(f"unexpected role {role}")
    return out


def _record(run_id: str, events: list[AnyEvent]) -> list[RecordedEvent]:
    records: list[RecordedEvent] = []
    prev = GENESIS_HASH
    for pos, event in enumerate(events, start=1):
        prev = chain_hash(run_id, pos, prev, canonical_json(event))
        records.append(RecordedEvent(run_id, pos, event, prev))
    return records


def _check_turn(state: RunState) -> None:
    assert state.open_calls() == {}
    frags = {f.id: f for f in state.fragments()}
    ids = state.current_ids()
    owners: set[str] = set()
    for item in state.groups():
        answers = []
        for slot in item.calls:
            assert slot.answer_id is not None and slot.answer_id not in owners
            owners.add(slot.answer_id)
            block = frags[slot.answer_id].content[0]
            assert isinstance(block, ToolResultBlock) and block.call_id == slot.call_id
            answers.append(slot.answer_id)
        start = ids.index(item.fragment_id)
        assert list(ids[start + 1:start + 1 + len(answers)]) == answers
    assert owners == {fid for fid, f in frags.items() if f.kind == "tool_result"}


@pytest.fixture(scope="module")
def tau_runs() -> list[dict[str, Any]]:
    if not TAU.is_file():
        pytest.skip(f"traces not present at {TAU} (set CONTEXTFOLD_TRACES)")
    runs: list[dict[str, Any]] = json.loads(TAU.read_text(encoding="utf-8"))
    return runs


def test_tau_bench_pairing_at_every_turn(tau_runs: list[dict[str, Any]]) -> None:
    assert len(tau_runs) == 200
    reused_runs = 0
    for i, run in enumerate(tau_runs):
        run_id = f"tau-{run['task_id']}-{run['trial']}-{i}"
        records = _record(run_id, _events(run["traj"]))
        state = new_state(run_id)
        snapshots: list[RunState] = []
        for rec in records:
            if isinstance(rec.event, ModelResponse):
                # what the API layer does before a build: nothing to repair in these logs
                assert recovery_events(state, in_flight="wait") == []
                _check_turn(state)
                snapshots.append(state.snapshot())
            fold_event(state, rec)
        assert state.turn == len(snapshots)
        assert fold(records).fingerprint() == state.fingerprint()
        # each answer sits on the call it followed in the trace, also for re-used ids
        expected: list[tuple[str, str]] = []
        last_calls: dict[str, int] = {}
        for rec in records:
            if isinstance(rec.event, ModelResponse):
                for c in rec.event.tool_calls:
                    last_calls[c.call_id] = rec.position
            elif isinstance(rec.event, ToolResult):
                expected.append((f"g{last_calls[rec.event.call_id]}", rec.event.content))
        got: list[tuple[str, str]] = []
        for item in sorted((it for it in state.items.values() if isinstance(it, ToolGroup)),
                           key=lambda g: g.position):
            for slot in sorted(item.calls, key=lambda s: s.answer_position or 0):
                assert slot.answer_id is not None
                block = state.fragment(slot.answer_id).content[0]
                assert isinstance(block, ToolResultBlock)
                got.append((item.group_id, block.text))
        assert sorted(got) == sorted(expected)
        ids = [c.call_id for r in records if isinstance(r.event, ModelResponse)
               for c in r.event.tool_calls]
        if len(ids) != len(set(ids)):
            reused_runs += 1
        # replay of a few turns equals the live snapshot
        for n in sorted({1, len(snapshots) // 2 or 1, len(snapshots)}):
            if 1 <= n <= len(snapshots):
                assert state_at_turn(records, n).canonical() == snapshots[n - 1].canonical()
    assert reused_runs == 49

"""OpenHands event streams (real agent runs): import, fold, and at every turn the pairing rules hold."""

from __future__ import annotations

import pytest

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

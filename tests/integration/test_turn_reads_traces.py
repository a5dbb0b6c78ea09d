"""A past turn's state, the rebuild of a turn without a record and ``verify``, on real runs: the
reads that leave the records' manifests undecoded give what the old reads of the whole log gave
(SQLite and PostgreSQL).

Two tau-bench gpt-4o airline runs are recorded as an agent loop would (one ``openai-chat`` build
per turn under a window their history outgrows, each turn's usage observed), three turns of each
left without a record. Then, for every turn: ``Run.state(turn=N)`` against ``state_at_turn`` of
the whole log; for the turns without a record, ``Run.build(turn=N)`` against the rebuild from the
whole log (the nearest record's settings read from it, each calibration sample's record decoded
whole, as before); ``verify`` against itself with every event decoded whole.
"""

from __future__ import annotations

import os
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from contextfold.api import Run, open_store
from contextfold.audit.data import config_for_turn
from contextfold.domain.events import AnyEvent, ContextBuilt, ModelResponse
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import manifest_encoding
from contextfold.importers import iter_runs
from contextfold.projections.calibration import record_estimate
from contextfold.projections.past_states import state_at_turn
from contextfold.rebuild_api import nearest_config, rebuild
from contextfold.store.event_reads import EventReads

pytestmark = pytest.mark.traces

REPO = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("CONTEXTFOLD_TRACES", REPO.parent / "shared" / "traces"))
TAU = TRACES / "tau-bench-gpt4o-airline" / "gpt-4o-airline.json"
_UNRECORDED = (2, 4, 7)
"""The turns of each run left without a record (the first, then every other, is recorded)."""


@pytest.fixture(scope="module")
def tau_runs() -> list[list[AnyEvent]]:
    if not TAU.is_file():
        pytest.skip(f"traces not present at {TAU} (set CONTEXTFOLD_TRACES)")
    runs = iter_runs(TAU.read_bytes(), format="openai-chat", source=str(TAU))
    long_runs = (events for _, events in runs if sum(isinstance(e, ModelResponse) for e in events) >= 8)
    return list(islice(long_runs, 2))


def _record_loop(run: Run, events: list[AnyEvent]) -> None:
    """``events`` appended as the agent logged them, a build recorded before each model response
    (but those of ``_UNRECORDED``), its usage observed after the response."""
    turn, pending = 0, list[AnyEvent]()
    for event in events:
        if isinstance(event, ModelResponse):
            turn += 1
            run.append(pending)
            pending = []
            built = None if turn in _UNRECORDED else run.build("openai-chat", window=6_000, reserve=1_000)
            run.append(event)
            if built is not None:
                run.observe_usage(turn, built.manifest.selected_tokens * 11 // 10)
        else:
            pending.append(event)
    run.append(pending)


def _old_estimate(run: Run) -> Any:
    """``Run._estimate_at`` as it read a record before: decoded whole."""
    def estimate_at(position: int) -> Any:
        found = run.store.events.read(run.run_id, after=position - 1, upto=position)
        return record_estimate(found[0].event if found else None)
    return estimate_at


def _whole_parse(parse: Any) -> Any:
    def whole(self: EventReads, *args: Any, **_: Any) -> RecordedEvent:
        event: RecordedEvent = parse(self, *args)  # every event decoded whole, as verify decoded them
        return event
    return whole


def test_past_turns_read_without_manifests_are_the_whole_logs(store_url: str,
                                                             tau_runs: list[list[AnyEvent]]) -> None:
    assert len(tau_runs) == 2
    with open_store(store_url) as store:
        for n, events in enumerate(tau_runs):
            run_id = f"tau-{n}"
            _record_loop(store.run(run_id), events)
            run = store.run(run_id)  # a new Run: nothing remembered of the loop's builds
            whole = run.events()
            first = next(r.event for r in whole if isinstance(r.event, ContextBuilt))
            encoding = manifest_encoding(first.manifest)
            for turn in range(1, run.next_turn() + 1):
                old = state_at_turn(whole, turn, run_id=run_id, artifact_tokens=run._artifact_tokens(),
                                    recorded_encoding=encoding)
                assert run.state(turn=turn).fingerprint() == old.fingerprint(), (run_id, turn)
            for turn in _UNRECORDED:
                assert run.records(turn) == []
                cfg = config_for_turn(whole, turn)
                assert nearest_config(run, turn) == cfg
                result = store.run(run_id).build(turn=turn, record=False)
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(run, "_estimate_at", _old_estimate(run))
                    expected = rebuild(run, turn, cfg, record=False, records=[], events=whole)
                assert result.body_bytes == expected.body_bytes, (run_id, turn)
                assert result.manifest == expected.manifest, (run_id, turn)
                assert result.manifest.calibration is not None  # earlier turns' usage was read
            report = run.verify()
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(EventReads, "_parse", _whole_parse(EventReads._parse))
                assert run.verify() == report
            assert report.ok and report.events == run.version

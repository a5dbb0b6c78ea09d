"""An import keeps the time each event happened, where its trace says it (OpenHands events'
``timestamp``, legacy and V1; contextfold's own export's ``recorded_at``), and invents none for
the formats that do not (OpenAI chat, SWE-agent, ...): on the real traces.

Skips, with the reason, when the traces folder is absent (set CONTEXTFOLD_TRACES)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from contextfold.domain.event_times import utc_time
from contextfold.domain.events import ToolResultLost
from contextfold.importers import (
    TIMED_FORMATS,
    detect_format,
    event_files_notes_and_times,
    iter_runs,
    timed_runs_artifacts_and_notes,
)
from contextfold.store.event_store import EventStore
from tests.conftest import TRACES
from tests.unit.test_import_openhands_v1 import conversation

pytestmark = [
    pytest.mark.traces,
    pytest.mark.skipif(not TRACES.is_dir(), reason=f"traces folder {TRACES} is absent"),
]

OPENHANDS = sorted((TRACES / "openhands-event-streams").glob("*.json*"))


def _source_times(path: Path) -> set[datetime]:
    """Every ``timestamp`` the file holds, read as UTC."""
    found: set[datetime] = set()

    def walk(value: object) -> None:
        if isinstance(value, dict):
            stamp = value.get("timestamp")
            if isinstance(stamp, str):
                found.add(utc_time(stamp))
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    text = path.read_text()
    for doc in ([json.loads(line) for line in text.splitlines() if line.strip()] if path.suffix == ".jsonl"
                else [json.loads(text)]):
        walk(doc)
    return found


@pytest.mark.parametrize("path", OPENHANDS, ids=lambda p: p.name)
def test_openhands_events_keep_their_trace_s_timestamps(path: Path) -> None:
    data = path.read_bytes()
    fmt = detect_format(data, source=str(path))
    runs, times, _, _ = timed_runs_artifacts_and_notes(data, format=fmt, source=str(path))
    stamps = _source_times(path)
    for (_, events), run_times in zip(runs, times, strict=True):
        assert run_times is not None and len(run_times) == len(events)
        assert run_times[0] is None  # the run's start: added by the import, the trace gives no time
        for event, at in zip(events, run_times, strict=True):
            if isinstance(event, ToolResultLost):
                assert at is None  # inferred by the import: not a trace's event
            if at is not None:
                assert at in stamps and at.tzinfo is UTC
        if stamps:
            assert any(t is not None for t in run_times)
        else:  # resolver_mock_output.jsonl holds no timestamps: none recorded, none invented
            assert all(t is None for t in run_times)


def test_a_known_openhands_trace_s_times_are_its_own_read_as_utc() -> None:
    path = TRACES / "openhands-event-streams" / "runtime_trajs_basic.json"
    runs, times, _, _ = timed_runs_artifacts_and_notes(path.read_bytes(), format="openhands",
                                                       source=str(path))
    (_, events), = runs
    assert [e.type for e in events] == ["run_started", "user_input", "model_response", "tool_result",
                                        "model_response"]
    assert times == [[None, datetime(2025, 1, 27, 22, 44, 56, 900854, tzinfo=UTC),
                      datetime(2025, 1, 27, 22, 45, 13, 764487, tzinfo=UTC),
                      datetime(2025, 1, 27, 22, 45, 13, 801384, tzinfo=UTC),
                      datetime(2025, 1, 27, 22, 45, 18, 405685, tzinfo=UTC)]]


@pytest.mark.parametrize("folder,fmt", [("tau-bench-gpt4o-airline", "openai-chat"),
                                        ("swe-agent-demos", "swe-agent")])
def test_formats_without_times_record_none(folder: str, fmt: str) -> None:
    assert fmt not in TIMED_FORMATS
    path = next(p for p in sorted((TRACES / folder).rglob("*")) if p.suffix in (".json", ".traj"))
    runs, times, _, _ = timed_runs_artifacts_and_notes(path.read_bytes(), format=fmt, source=str(path))
    assert runs and times == [None] * len(runs)


def test_a_v1_conversation_s_events_keep_their_timestamps_one_file_each() -> None:
    events = conversation()
    files = [(f"events/event-{i:05d}.json", json.dumps(e).encode()) for i, e in enumerate(events)]
    parsed, _, times = event_files_notes_and_times(files)
    assert len(times) == len(parsed)
    assert {t for t in times if t is not None} == {datetime(2026, 11, 2, 10, 0, 1, tzinfo=UTC),
                                                   datetime(2026, 11, 2, 10, 0, 2, tzinfo=UTC)}
    # the system prompt and the user's message carry no timestamp in this conversation: no time
    assert times[:3] == [None, None, None]


def test_an_imported_run_is_stored_with_its_trace_s_times(sqlite_url: str) -> None:
    path = TRACES / "openhands-event-streams" / "multi_swe_bench_example_output.jsonl"
    runs, times, _, _ = timed_runs_artifacts_and_notes(path.read_bytes(), format="openhands",
                                                       source=str(path))
    with EventStore(sqlite_url) as store:
        store.append_new_runs(runs, times={suffix: t for (suffix, _), t in zip(runs, times, strict=True)
                                           if t is not None})
        for (suffix, _), run_times in zip(runs, times, strict=True):
            assert run_times is not None
            expected = {i: t for i, t in enumerate(run_times, start=1) if t is not None}
            assert store.event_times(suffix) == expected
    assert [s for s, _ in iter_runs(path.read_bytes(), format="openhands")] == [s for s, _ in runs]

"""A long run's records read once, and without their manifests, by the rebuild of a turn without a
record, a usage observation, a compaction and a new process's fold (SQLite and PostgreSQL).

A record's manifest lists every fragment its build left out, so on a long run it is most of the
log (an 800-turn run: ~200 MB of manifest JSON). Measured on such a run
(``scripts/bench_turn_reads.py``): the rebuild of a turn without a record read every record after
the turn twice (for the turn's records, then for the nearest one's ``config``), a usage
observation in a new process decoded every manifest to learn the run's head for its append (29 s),
and a compaction decoded each twice, for the live state and for its planner's log (87 s, 1.4 GB),
though none of them reads more of a record than a few keys. Asserted without timing: a spy on the
store's event decoder counts the records decoded whole and those read for a few keys; the answers
are those of every read decoding every record whole (:func:`~tests.record_spy.whole_reads`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from contextfold.api import Run, open_store
from contextfold.cli import main
from contextfold.cli_audit import audit_turn
from contextfold.compaction_api import plan_auto_compaction
from contextfold.domain.errors import EncodingConflictError, InvalidInputError
from contextfold.domain.events import CompactionSummary, ContextBuilt
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.calibration import ESTIMATE_KEYS
from tests import record_spy
from tests.record_spy import TURNS, WholeRecords, loop, whole_reads

whole_records = record_spy.whole_records  # the fixture

_NONE: frozenset[str] = frozenset()
_CONFIG = frozenset({"config"})


def _twice(store_url: str, spy: WholeRecords, call: Callable[[Run], Any]) -> Any:
    """``call`` on the run ``loop`` of a new store (no head, no state kept), the spy reset first;
    asserted to answer as it does with every event read whole (in another new store), and its
    answer returned. The spy counts the first call's reads only."""
    with open_store(store_url) as store:
        spy.reset()
        answer = call(store.run("loop"))
    counted = (spy.decoded, list(spy.heads), list(spy.turns))
    with open_store(store_url) as store, whole_reads():
        assert call(store.run("loop")) == answer
    spy.decoded, spy.heads, spy.turns = counted
    return answer


def _manifest_cli(store_url: str, turn: int, capsys: pytest.CaptureFixture[str]) -> Callable[[Run], Any]:
    def call(_: Run) -> Any:
        assert main(["--store", store_url, "manifest", "loop", "--turn", str(turn), "--json"]) == 0
        return capsys.readouterr().out
    return call


@pytest.mark.parametrize("how", ["build", "audit", "manifest", "why"])
def test_an_unrecorded_turns_rebuild_reads_each_record_once(
        store_url: str, whole_records: WholeRecords, capsys: pytest.CaptureFixture[str], how: str) -> None:
    """``run.build(turn=N)``, ``audit --turn N``, ``manifest --turn N`` and ``why --turn N`` of a
    past turn without a record read the records after the turn's previous response for the turn's
    (each for its turn), then every record of the run again for the nearest one's ``config``. Each
    record is read once for its turn and ``config`` now (those up to the turn's previous response
    only once none of the later ones is the turn's), none whole; the other reads of a record
    without its manifest are the fold's, of the records before the turn (and ``audit``'s check of
    the chain, of every record). The answers are the old ones."""
    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run, rebuild=False, usage=True)
        turn = run.next_turn() - TURNS + 4
        recorded = Counter(r.event.turn for r in run.events() if isinstance(r.event, ContextBuilt))
        assert turn not in recorded and len(recorded) == TURNS - 1
    calls: dict[str, Callable[[Run], Any]] = {
        "build": lambda run: run.build(turn=turn, record=False).body_bytes,
        "audit": lambda run: (lambda found: (found[0], found[1].body_bytes))(audit_turn(run, turn)),
        "manifest": _manifest_cli(store_url, turn, capsys),
        "why": lambda _: (main(["--store", store_url, "why", "loop", "--turn", str(turn), "nosuchtool"]),
                          capsys.readouterr().out),
    }
    _twice(store_url, whole_records, calls[how])
    assert whole_records.decoded == 0
    read = Counter(t for t, keys in whole_records.turns if keys == _CONFIG)
    assert read == Counter(set(recorded)), read  # each record once, for its config
    bare = Counter(t for t, keys in whole_records.turns if keys == _NONE and t > turn)
    assert bare == (Counter(t for t in recorded if t > turn) if how == "audit" else Counter()), bare
    assert {keys for _, keys in whole_records.turns} <= {_NONE, _CONFIG, frozenset({"encoding"}),
                                                       frozenset(ESTIMATE_KEYS)}


def test_a_recorded_turns_read_reads_no_record_before_it(store_url: str, whole_records: WholeRecords) -> None:
    """A turn with a record is read from its previous response on, as ``Run.records`` reads it: the
    records before it are not read for the nearest one's ``config``, which it does not need."""
    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run, rebuild=False)
        last = run.next_turn() - 1
    whole = _twice(store_url, whole_records, lambda run: run.build(turn=last, record=False).body_bytes)
    assert whole and whole_records.decoded == 1  # the turn's record
    assert {t for t, keys in whole_records.turns if keys == _CONFIG} <= {last}


def test_a_usage_observation_decodes_no_record_whole(store_url: str, whole_records: WholeRecords) -> None:
    """``observe_usage`` in a new process made the store's head of the run (what an append needs)
    from the log with every record whole, and read the turn's records whole for their
    ``window_tokens``: an 800-turn run, 29 s. Each record is read for its ``encoding`` (the head)
    and the turn's for their ``window_tokens``, ``selected_tokens`` and ``provider`` now; a report
    no request of the turn could produce is refused as before, and one that could is recorded as
    before."""
    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run, usage=True)
        first = run.next_turn() - TURNS

    def refused(run: Run) -> str:
        with pytest.raises(InvalidInputError) as caught:
            run.observe_usage(first, 10**8)
        return str(caught.value)

    assert "window" in _twice(store_url, whole_records, refused)
    assert whole_records.decoded == 0
    observed = _twice(store_url, whole_records, lambda run: run.observe_usage(first + 1, 1_500).event)
    assert observed.turn == first + 1
    assert whole_records.decoded == 0
    # the turn's records, every record once for the head, the head's last row for its hash
    assert set(whole_records.heads) <= {frozenset({"provider", "selected_tokens", "window_tokens"}),
                                        frozenset({"encoding"}), _NONE}
    assert whole_records.heads.count(frozenset({"encoding"})) == TURNS


def _summary(run: Run, **options: Any) -> Any:
    return run.compact("summary", dry_run=True, **options)


@pytest.mark.parametrize("compact", [
    pytest.param(lambda run: run.compact("mask", dry_run=True), id="mask"),
    pytest.param(_summary, id="summary"),
    pytest.param(lambda run: _summary(run, window=2_000, reserve=500), id="window"),
])
def test_a_compaction_decodes_no_record_whole(store_url: str, whole_records: WholeRecords,
                                              compact: Callable[[Run], Any]) -> None:
    """A compaction in a new process folded the run with every record whole and read the log
    whole again for its planner (an 800-turn run: 87 s, 1.4 GB), which reads no record, and for
    the newest live record's ``config``: each record is read for its ``encoding`` (the fold), then
    for its ``config`` (the planner's log) now; the report is the old one."""
    with open_store(store_url) as store:
        loop(store.run("loop"))
    report = _twice(store_url, whole_records, compact)
    assert report.events and report.replaced_tokens > report.stand_in_tokens
    assert whole_records.decoded == 0
    assert set(whole_records.heads) <= {frozenset({"encoding"}), _CONFIG,
                                        frozenset(ESTIMATE_KEYS)}


def test_a_plug_in_summarizer_is_handed_the_records_whole(store_url: str,
                                                          whole_records: WholeRecords) -> None:
    """A plug-in summarizer (an LLM) is handed the covered events as logged: its session reads the
    log whole, records and manifests, as before."""
    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run)
        logged = {r.position: r.event for r in run.events()}
    seen: list[RecordedEvent] = []

    def summarizer(events: Sequence[RecordedEvent], skeleton: CompactionSummary) -> CompactionSummary:
        seen.extend(events)
        return skeleton

    with open_store(store_url) as store:
        report = store.run("loop").compact("summary", summarizer=summarizer, dry_run=True)
    records = [(r.position, r.event) for r in seen if isinstance(r.event, ContextBuilt)]
    assert report.events and records
    assert all(event == logged[position] and event.manifest for position, event in records)


def test_an_auto_compaction_and_a_new_fold_decode_no_record_whole(store_url: str,
                                                                  whole_records: WholeRecords) -> None:
    """A build with auto-compaction in a new process (``compaction_api.build``, ``build
    --auto-compact``) folds the run and plans on its log: both read every record whole before. The
    live state folded in a new process is the one a whole read folds, and the plan too."""
    with open_store(store_url) as store:
        loop(store.run("loop"))
    fingerprint = _twice(store_url, whole_records, lambda run: run.state().fingerprint())
    assert fingerprint and whole_records.decoded == 0
    assert set(whole_records.heads) == {frozenset({"encoding"})}
    config = BuildConfig(provider="anthropic", window=2_000, reserve=500)

    def plan(run: Run) -> Any:
        state, events, report = plan_auto_compaction(run, run._existing_state(), config)
        return state.fingerprint(), events, report

    _, events, report = _twice(store_url, whole_records, plan)
    assert events and report.events
    assert whole_records.decoded == 0


def test_a_head_is_not_made_from_records_read_without_their_encoding(store_url: str) -> None:
    """A new store's whole read of a run also makes the head an append needs, the run's encoding
    (its first record's) included; a read of the records for other keys than ``encoding`` makes
    none, so a record naming another encoding is still refused."""
    with open_store(store_url) as store:
        loop(store.run("loop"))
        record = next(r.event for r in store.run("loop").events() if isinstance(r.event, ContextBuilt))
    named = record.manifest["encoding"]
    assert named
    with open_store(store_url) as store:
        assert len(list(store.events.iter_events("loop", keep=["config"]))) == store.events.version("loop")
        other = record.model_copy(update={"manifest": {**record.manifest, "encoding": named + "-other"}})
        with pytest.raises(EncodingConflictError):
            store.events.append("loop", [other])


def test_show_reads_no_record_whole_to_learn_the_names_a_log_was_recorded_under(
        store_url: str, whole_records: WholeRecords) -> None:
    """``show`` of a ref naming another run (refused) or a call by an older name reads every record
    of the run for the name its manifest holds (``show_refs._recorded_names``): it decoded each
    whole, its manifest listing most of a long run's log. Each is read for its ``run_id`` now, and
    the answers (the refusal, a call's result) are the old ones."""
    from contextfold.show_refs import show

    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run, rebuild=False)
        pos = next(r.position for r in run.events() if isinstance(r.event, ContextBuilt)) + 1

    def refused(run: Run) -> str:
        with pytest.raises(InvalidInputError) as caught:
            show(run, "event://elsewhere/3")
        return str(caught.value)

    assert "elsewhere" in _twice(store_url, whole_records, refused)
    assert whole_records.decoded == 0
    assert whole_records.heads and set(whole_records.heads) <= {frozenset({"run_id"})}

    def event_and_call(run: Run) -> tuple[str, str]:
        response = run.store.events.read(run.run_id, after=pos - 1, upto=pos)[0]
        call = response.event.tool_calls[0].call_id  # type: ignore[union-attr]
        with pytest.raises(InvalidInputError):  # a split naming no run this log was recorded under
            show(run, f"call://old/{call}@{pos}")
        return show(run, f"event://loop/{pos + 1}"), show(run, f"call://loop/{call}@{pos}")

    shown = _twice(store_url, whole_records, event_and_call)
    assert "step" in shown[1] and shown[0] == shown[1]
    assert whole_records.decoded == 0

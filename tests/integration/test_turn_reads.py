"""Checking one turn of a long run reads that turn's records whole, not every record of the run
(SQLite and PostgreSQL).

A record's manifest lists every fragment its build left out, so it grows with the run: reading
each record whole to check one turn made ``replay``, ``audit --turn``, ``why`` and ``diff`` of an
800-turn run peak at ~900 MB, and their cost grow as the square of the run. Asserted here without
timing: a spy on the store's event decoder counts the records decoded whole (manifest and all),
which must be the asked turn's, however many records the run holds.
"""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

from contextfold.api import Run, open_store
from contextfold.audit.data import config_for_turn
from contextfold.cli import main
from contextfold.cli_audit import audit_turn
from contextfold.domain.canonical import canonical_utf8
from contextfold.domain.errors import IntegrityError, TurnNotFoundError
from contextfold.domain.events import ContextBuilt, ModelResponse, UserInput
from contextfold.domain.log import GENESIS_HASH, RecordedEvent, chain_hash
from contextfold.domain.manifest import manifest_encoding
from contextfold.projections.calibration import ESTIMATE_KEYS, record_estimate
from contextfold.projections.past_states import state_at_turn, state_at_version
from contextfold.rebuild_api import nearest_config, rebuild
from contextfold.store.event_reads import EventReads
from tests import record_spy
from tests.record_spy import TURNS, WholeRecords, loop

whole_records = record_spy.whole_records  # the fixture


def test_a_turns_records_are_the_only_ones_decoded_whole(store_url: str,
                                                          whole_records: WholeRecords) -> None:
    """``records(N)`` decoded every record after turn N's previous response (an early turn: all of
    them) to keep turn N's; the others are now read for their turn only. What it returns is what
    the whole read of the log gives, a late rebuild's record included."""
    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run)
        every = [r.event for r in run.events() if isinstance(r.event, ContextBuilt)]
        first = run.next_turn() - TURNS
        assert len(every) == TURNS and every[0].turn == first
        for turn in (first, first + 4, first + TURNS - 1, first + TURNS):
            whole_records.decoded = 0
            records = run.records(turn)
            assert records == [e for e in every if e.turn == turn]
            assert whole_records.decoded == len(records)
        assert [r.rebuild for r in run.records(first + 4)] == [True]
        assert run.records(first + TURNS) == []  # the next turn: none yet


def test_a_recorded_turns_rebuild_decodes_no_other_record(store_url: str,
                                                          whole_records: WholeRecords) -> None:
    """A recorded turn's rebuild read the log up to its build with every earlier record whole,
    though the fold notes a record's turn and position only: the last turn of an 800-turn run held
    every record of the run (970 MB). ``replay`` and ``audit --turn`` (its check of the chain
    included) decode the turn's own record now, and still reproduce it byte for byte."""
    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run)
        first = run.next_turn() - TURNS
        for turn in (first, first + 4, first + TURNS - 1):
            whole_records.decoded = 0
            report = run.replay(turn)
            assert report.ok, report.differences
            assert report.rebuilt.model_dump(mode="json") == report.recorded.manifest
            assert whole_records.decoded == 1
            # audit --turn verifies the chain first: every event parsed, each record without its
            # manifest (it decoded every record whole: an 800-turn run, 37 s); the turn's record
            # is the only one read whole
            whole_records.decoded = 0
            verdict, result = audit_turn(run, turn)
            assert verdict["ok"] and verdict["check"]["records"] == 1, verdict
            assert result.manifest.request_hash == report.recorded.request_hash
            assert whole_records.decoded == 1


def test_a_fold_reads_the_log_as_a_whole_read_does_without_manifests(store_url: str,
                                                                     whole_records: WholeRecords) -> None:
    """``fold_events`` gives the events, positions and chain hashes a whole read gives, each record
    with an empty manifest (not decoded), up to the position asked; a fold of either is the same."""
    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run)
        whole = run.events()
        whole_records.decoded = 0
        slim = list(store.events.fold_events("loop"))
        assert whole_records.decoded == 0
        assert [(r.position, r.hash) for r in slim] == [(r.position, r.hash) for r in whole]
        assert [r.event for r in slim] == [
            r.event.model_copy(update={"manifest": {}}) if isinstance(r.event, ContextBuilt) else r.event
            for r in whole]
        assert state_at_version(slim, run.version).fingerprint() == state_at_version(
            whole, run.version).fingerprint()
        assert [r.position for r in store.events.fold_events("loop", upto=40)] == list(range(1, 41))


def test_why_of_what_a_turn_does_not_hold_decodes_no_other_record(
        store_url: str, whole_records: WholeRecords, capsys: pytest.CaptureFixture[str]) -> None:
    """``why --turn N QUERY`` of a query the turn's manifest does not hold folds the log up to the
    turn's build (is it a tool the build did not expose?) and, for a position, looks for the
    compaction covering it: both read the log with every record whole (the last turn of an
    800-turn run: 1.5 GB). The live state a position's query folds too (``Run.state``, one event
    at a time) is not counted; apart from it, the turn's record is the only one read whole."""
    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run)
        last = run.next_turn() - 1
        record_at = next(r.position for r in run.events() if isinstance(r.event, ContextBuilt))
    state = Run.state

    def paused(self: Run, **kw: Any) -> Any:
        whole_records.paused = True
        try:
            return state(self, **kw)
        finally:
            whole_records.paused = False

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Run, "state", paused)
        for query in ("nosuchtool", f"e{record_at}"):
            whole_records.decoded = 0
            assert main(["--store", store_url, "why", "loop", "--turn", str(last), query]) == 1
            assert whole_records.decoded == 1, query
            assert f"nothing in turn {last}'s manifest matches '{query}'" in capsys.readouterr().out


def _old_estimate(run: Run) -> Any:
    """``Run._estimate_at`` as it read a record before: the record decoded whole."""
    def estimate_at(position: int) -> Any:
        found = run.store.events.read(run.run_id, after=position - 1, upto=position)
        return record_estimate(found[0].event if found else None)
    return estimate_at


def _old_encoding(events: list[RecordedEvent]) -> str | None:
    """``run_encoding`` as it read the first record before: decoded whole, from the log."""
    first = next((r.event for r in events if isinstance(r.event, ContextBuilt)), None)
    return manifest_encoding(first.manifest) if first is not None else None


def test_a_past_state_decodes_no_record_whole(store_url: str, whole_records: WholeRecords) -> None:
    """``Run.state(turn=N)`` folded the whole log read into a list, every record decoded whole:
    an 800-turn run's first turn took 27 s and 2.1 GB. It folds the log up to the turn's model
    response now, each record's manifest unread (the first record read for its ``encoding``
    alone), and the state is the one the old path folds, for every turn."""
    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run, usage=True)
        first = run.next_turn() - TURNS
        whole = run.events()
        records_before: dict[int, int] = {}  # turn -> the records before its model response
        for rec in whole:
            if isinstance(rec.event, ModelResponse):
                records_before[len(records_before) + 1] = sum(
                    1 for r in whole[:rec.position] if isinstance(r.event, ContextBuilt))
        for turn in (1, first, first + 4, first + TURNS - 1, first + TURNS):
            whole_records.decoded, whole_records.heads = 0, []
            state = run.state(turn=turn)
            assert whole_records.decoded == 0, turn
            # the records folded (those before the turn's response), and the first one's encoding
            folded = records_before.get(turn, TURNS)
            assert len(whole_records.heads) == folded + 1, (turn, whole_records.heads)
            assert whole_records.heads.count(frozenset({"encoding"})) == 1
            old = state_at_turn(whole, turn, run_id="loop", artifact_tokens=run._artifact_tokens(),
                                recorded_encoding=_old_encoding(whole))
            assert state.fingerprint() == old.fingerprint(), turn
        with pytest.raises(TurnNotFoundError):
            run.state(turn=first + TURNS + 1)


def test_an_unrecorded_turns_rebuild_decodes_no_record_whole(store_url: str,
                                                              whole_records: WholeRecords) -> None:
    """The rebuild of a past turn without a record read the whole log, every record decoded whole,
    for the nearest record's settings and the fold, and each observed turn's record whole for the
    calibration (an 800-turn run: 59 s, 2.1 GB). The records are read for their turn and ``config``
    now, the calibration's for its three keys, the log up to the turn without manifests; the
    request and manifest are the old path's, byte for byte."""
    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run, rebuild=False, usage=True)
        turn = run.next_turn() - TURNS + 4
        run = store.run("loop")  # a new Run: no estimate remembered from the loop's builds
        whole_records.decoded, whole_records.heads = 0, []
        result = run.build(turn=turn, record=False)
        assert whole_records.decoded == 0
        assert frozenset({"config"}) in whole_records.heads
        assert frozenset(ESTIMATE_KEYS) in whole_records.heads  # the calibration's samples
        assert all(keys <= {"config", "encoding", *ESTIMATE_KEYS} for keys in whole_records.heads)
        assert run.version == store.events.version("loop")  # nothing recorded
    with open_store(store_url) as store:  # a new Run: nothing remembered of the calls above
        run = store.run("loop")
        whole_records.paused = True
        events = run.events()
        cfg = config_for_turn(events, turn)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(run, "_estimate_at", _old_estimate(run))
            old = rebuild(run, turn, cfg, record=False, records=[], events=events)
        assert cfg == nearest_config(run, turn) and cfg.provider == "anthropic"
        assert result.body_bytes == old.body_bytes and result.manifest == old.manifest
        assert result.manifest.calibration is not None  # the observed turns were read


def test_verify_decodes_no_record_whole(store_url: str, whole_records: WholeRecords) -> None:
    """``verify`` parsed every event whole, each record's manifest too (an 800-turn run: 37 s):
    it parses each record without it now, and says what it said."""
    with open_store(store_url) as store:
        run = store.run("loop")
        loop(run)
        whole_records.decoded, whole_records.heads = 0, []
        report = run.verify()
        assert whole_records.decoded == 0 and len(whole_records.heads) == TURNS
        assert (report.ok, report.events) == (True, run.version)


_RECORD = {"config_hash": "c", "log_version": 0,
           "manifest": {"config": {"window": 9_000}, "selected_tokens": 7}, "prefix_hash": "p",
           "provider": "neutral", "request_hash": "r", "turn": 1, "type": "context_built", "v": 1}
_FORGED: dict[str, Any] = {
    # (not a name a release writes: a snake_case one asks for an upgrade, test_newer_release_log)
    "a field no record has": {**_RECORD, "Extra field": 1},
    "no manifest": {k: v for k, v in _RECORD.items() if k != "manifest"},
    "a manifest that is a list": {**_RECORD, "manifest": [1, 2]},
    "a null manifest": {**_RECORD, "manifest": None},
    "a turn that is a bool": {**_RECORD, "turn": True},
    "a user input under a record's topic": {"blocks": [{"text": "hi", "type": "text"}], "type": "user_input",
                                            "v": 1},
    "a record as written": _RECORD,
}


@pytest.mark.parametrize("forged", sorted(_FORGED))
def test_a_record_read_without_its_manifest_is_refused_as_a_whole_read_refuses_it(
        store_url: str, forged: str) -> None:
    """A record read without its manifest (a fold's, a turn search's, verify's) is refused exactly
    when, and as, the whole decode refuses it: a record with a field no record has, or no
    manifest, was read as a record with an empty manifest where the whole read said it does not
    parse, so ``verify`` could not have read records without their manifests. Rows written by
    hand, each chained as a writer would."""
    body = canonical_utf8(_FORGED[forged])
    with open_store(store_url) as store:
        events = store.events
        events.backend.recorder.insert_events([StoredEvent(
            "forged", 1, "context_built@1", chain_hash("forged", 1, GENESIS_HASH, body).encode() + body)])
        whole_error = ""
        try:
            whole = events.read("forged")
        except IntegrityError as exc:
            whole_error = str(exc)
        for slim in (lambda: list(events.fold_events("forged")),
                     lambda: list(events.record_heads("forged")),
                     lambda: events.turn_records("forged", 1),
                     lambda: [events.record_keys("forged", 1, ["config"])],
                     # the reads of one record for a few keys: a turn's (its window), every one's
                     # (the nearest config, a compaction's planner), a live fold's (the encoding)
                     lambda: events.turn_records("forged", 1, keep=["window_tokens"]),
                     lambda: list(events.turn_read("forged", 1, keep=["config"]).later),
                     lambda: list(events.record_heads("forged", ["config"], upto=1)),
                     lambda: list(events.fold_events("forged", keep=["config"])),
                     lambda: list(events.iter_events("forged", keep=["encoding"]))):
            if whole_error:
                with pytest.raises(IntegrityError) as caught:
                    slim()
                assert str(caught.value) == whole_error
            else:
                read = slim()
                assert [r.hash for r in read if r is not None] in ([], [whole[0].hash])
        report = events.verify("forged")
        with pytest.MonkeyPatch.context() as patch:  # verify as it was: each event decoded whole
            parse = EventReads._parse

            def whole_parse(self: EventReads, *args: Any, **_: Any) -> RecordedEvent:
                return parse(self, *args)
            patch.setattr(EventReads, "_parse", whole_parse)
            assert events.verify("forged") == report
        assert report.ok == (forged == "a record as written")
        if report.ok:  # the keys asked for, and only those
            kept = events.record_keys("forged", 1, ["config", "no such key"])
            assert kept is not None and kept.event == ContextBuilt.model_validate(
                {**_RECORD, "manifest": {"config": {"window": 9_000}}})
        if whole_error:
            assert report.reason == whole_error
            # an append learns the run's head from the log, each record read for its encoding
            with pytest.raises(IntegrityError) as caught:
                events.append("forged", [UserInput("go on")])
            assert str(caught.value) == whole_error

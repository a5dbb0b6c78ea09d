"""Times read, kept and resolved to turns (``domain.event_times``, ``domain.turn_times``): pure,
every edge given its own times, no clock read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from contextfold.domain.errors import InvalidInputError, TimeNotInRunError
from contextfold.domain.event_times import from_micros, shown_time, source_time, to_micros, utc_time
from contextfold.domain.events import AnyEvent, ContextBuilt, ModelResponse, RunStarted, UserInput
from contextfold.domain.turn_times import BuiltRequest, built_requests, turn_at

T = datetime(2026, 12, 7, 14, 3, tzinfo=UTC)


def s(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


def record(turn: int, log_version: int) -> ContextBuilt:
    return ContextBuilt(turn=turn, provider="neutral", request_hash="r", prefix_hash="p", config_hash="c",
                        manifest={}, log_version=log_version)


@pytest.mark.parametrize("text", ["2026-12-07T14:03:00Z", "2026-12-07T14:03", "2026-12-07 14:03",
                                  "2026-12-07T14:03:00+00:00", "2026-12-07T16:03+02:00",
                                  "2026-12-07T09:03:00-05:00", " 2026-12-07T14:03:00.000000z "])
def test_every_spelling_of_one_instant_reads_as_it_and_a_bare_time_is_utc(text: str) -> None:
    assert utc_time(text) == T and utc_time(text).tzinfo is UTC


def test_utc_has_no_daylight_saving_gap_or_fold() -> None:
    """Europe/Berlin's clocks went back at 01:00 UTC on 2026-10-25: 02:30 local happened twice,
    once at +02:00 and once at +01:00. Given with their offsets, they are an hour apart; a bare
    time is UTC, which has neither gap nor fold."""
    summer, winter = utc_time("2026-10-25T02:30+02:00"), utc_time("2026-10-25T02:30+01:00")
    assert winter - summer == timedelta(hours=1)
    assert utc_time("2026-10-25T02:30") == datetime(2026, 10, 25, 2, 30, tzinfo=UTC)
    assert utc_time("2026-03-29T02:30") - utc_time("2026-03-29T01:30") == timedelta(hours=1)


@pytest.mark.parametrize("text", ["", "yesterday", "14:03", "2026-13-01T00:00", "2026-12-07T14:03 UTC"])
def test_what_is_no_time_is_refused_saying_what_is_read(text: str) -> None:
    with pytest.raises(InvalidInputError, match="ISO 8601"):
        utc_time(text)
    assert source_time(text) is None  # an import keeps the event, with no time


def test_a_trace_s_timestamp_that_is_no_time_gives_none() -> None:
    assert source_time(None) is None and source_time(1738017896.9) is None and source_time("  ") is None
    assert source_time("2025-01-27T22:44:56.900854") == datetime(2025, 1, 27, 22, 44, 56, 900854, tzinfo=UTC)


@pytest.mark.parametrize("moment", [T, datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
                                    datetime(2026, 12, 7, 16, 3, 0, 1, tzinfo=timezone(timedelta(hours=2)))])
def test_a_kept_time_reads_back_to_the_microsecond(moment: datetime) -> None:
    assert from_micros(to_micros(moment)) == moment
    assert from_micros(to_micros(moment)).tzinfo is UTC


def test_a_naive_datetime_is_not_kept() -> None:
    with pytest.raises(InvalidInputError, match="without a zone"):
        to_micros(datetime(2026, 12, 7, 14, 3))


def test_shown_time_is_utc_with_z_or_a_dash() -> None:
    assert shown_time(utc_time("2026-12-07T16:03:00.5+02:00")) == "2026-12-07T14:03:00.500000Z"
    assert shown_time(None) == "-"


def log(*items: tuple[AnyEvent, datetime | None]) -> list[tuple[int, AnyEvent, datetime | None]]:
    return [(position, event, at) for position, (event, at) in enumerate(items, start=1)]


def imported() -> list[tuple[int, AnyEvent, datetime | None]]:
    """A trace without records: start (no time), input, response, result, response."""
    return log((RunStarted(), None), (UserInput("go"), s(0)), (ModelResponse(text="a"), s(10)),
               (UserInput("more"), s(20)), (ModelResponse(text="b"), s(30)))


def test_a_turn_without_a_record_was_built_after_the_last_event_before_its_response() -> None:
    assert built_requests(imported()) == [BuiltRequest(1, s(0), 2, record=False),
                                         BuiltRequest(2, s(20), 4, record=False)]
    requests = built_requests(imported())
    assert turn_at("r", s(5), requests).turn == 1  # the model was answering turn 1
    assert turn_at("r", s(15), requests).turn == 1  # turn 1 answered; turn 2 not built yet
    assert turn_at("r", s(25), requests).turn == 2
    assert turn_at("r", s(10_000), requests).turn == 2  # after the last: the last request built
    assert "no later request was built" in turn_at("r", s(10_000), requests).why


def test_the_time_of_a_build_is_its_own_turn_at_or_before_is_inclusive() -> None:
    requests = built_requests(imported())
    found = turn_at("r", s(20), requests)
    assert found.turn == 2 and found.request.position == 4
    assert "last event before its model response, at position 4" in found.why
    assert turn_at("r", s(20) - timedelta(microseconds=1), requests).turn == 1


def test_records_give_their_turn_s_times_and_a_turn_built_again_counts_its_last_build() -> None:
    events = log((RunStarted(), s(0)), (UserInput("go"), s(0)), (record(1, 2), s(1)),
                 (ModelResponse(text="a"), s(5)), (record(2, 4), s(6)), (record(2, 4), s(8)),
                 (ModelResponse(text="b"), s(9)), (record(3, 7), s(12)))
    requests = built_requests(events)
    assert [(r.turn, r.at, r.record) for r in requests] == [(1, s(1), True), (2, s(6), True),
                                                            (2, s(8), True), (3, s(12), True)]
    with pytest.raises(TimeNotInRunError, match="before its first request, turn 1's"):
        turn_at("r", s(0.5), requests)
    assert turn_at("r", s(7), requests).turn == 2
    assert turn_at("r", s(8), requests).request.position == 6  # the build again, at 8
    found = turn_at("r", s(12), requests)
    assert found.turn == 3 and "context_built record at position 8" in found.why  # the pending turn


def test_equal_times_go_to_the_one_later_in_the_log() -> None:
    """One append records a batch at one time: a response, its result and the next turn's record
    share it. The request built last is the later one in the log."""
    events = log((UserInput("go"), s(0)), (record(1, 1), s(0)), (ModelResponse(text="a"), s(1)),
                 (UserInput("x"), s(1)),
                 (record(2, 4), s(1)))
    requests = built_requests(events)
    assert turn_at("r", s(0), requests).turn == 1
    assert turn_at("r", s(1), requests).turn == 2


def test_imported_times_out_of_order_are_ordered_by_time() -> None:
    """A trace whose clock stepped back: turn 2's request time is before turn 1's. The answer is
    by time, not by position."""
    events = log((UserInput("go"), s(100)), (ModelResponse(text="a"), s(110)),
                 (UserInput("more"), s(50)), (ModelResponse(text="b"), s(60)))
    requests = built_requests(events)
    assert [r.turn for r in requests] == [2, 1]
    assert turn_at("r", s(55), requests).turn == 2
    assert turn_at("r", s(105), requests).turn == 1
    with pytest.raises(TimeNotInRunError, match="turn 2's"):
        turn_at("r", s(0), requests)


def test_a_run_without_times_has_no_turn_by_time() -> None:
    events = log((RunStarted(), None), (UserInput("go"), None), (ModelResponse(text="a"), None))
    assert built_requests(events) == []
    with pytest.raises(TimeNotInRunError, match=r"carry no times.*--turn N"):
        turn_at("r", T, [])


def test_a_rebuild_s_record_is_no_request_the_model_saw() -> None:
    """``replay`` or ``build --turn`` of a past turn without a record records a rebuild, later:
    the turn keeps the time its request was built, and the rebuild's time names no turn."""
    events = [*imported(), (6, record(2, 5).model_copy(update={"rebuild": True}), s(1000))]
    assert built_requests(events) == built_requests(imported())
    assert turn_at("r", s(2000), built_requests(events)).request.position == 4

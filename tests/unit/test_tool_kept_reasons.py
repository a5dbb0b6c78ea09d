"""The manifest says why each declared tool is there, also for a tool the history calls that is
kept by its own unit after its calls were left out.

``builder._kept_tools`` labelled every such tool ``relevant (bm25 0.00)``: a tool kept only
because the run's whole toolkit fits ``max_tools`` is there as ``toolkit`` (``tool_exposure``
rule 6), and one kept for the turn of the input it was called in as ``recent`` (rule 5). Real
builds, rendered for Anthropic and checked against its SDK's request types.
"""

from __future__ import annotations

from contextfold.api import render_request
from contextfold.domain.events import (
    AnyEvent,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.render import validate_sdk_types
from contextfold.projections.state import RunState

CODING = (ToolSpec(name="read_file", description="Read a file of the workspace"),
          ToolSpec(name="edit_file", description="Replace text in a file"),
          ToolSpec(name="bash", description="Run a shell command"))
"""Three tools under the default cap of 12: the whole toolkit is declared (rule 6)."""
RESULT = "\n".join(f"line {i}: some source text of the module under repair" for i in range(150))


def _state(*events: AnyEvent) -> RunState:
    state = new_state("kept")
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("kept", pos, event, ""))
    return state


def _declared(built: BuildResult) -> dict[str, str]:
    assert validate_sdk_types("anthropic", built.request)
    assert {t.name for t in built.manifest.tools} == {t["name"] for t in built.request.get("tools", ())}
    return {t.name: t.reason for t in built.manifest.tools}


def _called_then_cut(*, query: str) -> dict[str, str]:
    """read_file called once, then bash four times; at 4000 tokens the read_file group (the
    oldest) is left out, the latest bash groups kept."""
    events: list[AnyEvent] = [PolicySet(text="You are a coding agent."), ToolsRegistered(tools=CODING),
                              UserInput("Login is broken, fix it"),
                              ModelResponse(tool_calls=(ToolCall(call_id="c1", name="read_file",
                                                                 arguments='{"path": "auth.py"}'),)),
                              ToolResult(call_id="c1", content=RESULT)]
    for i in range(4):
        events += [ModelResponse(tool_calls=(ToolCall(call_id=f"b{i}", name="bash",
                                                      arguments='{"cmd": "pytest"}'),)),
                   ToolResult(call_id=f"b{i}", content=RESULT)]
    events += [ModelResponse(text="Done."), UserInput(query)]
    built = build_context(_state(*events), BuildConfig(provider="anthropic", window=4_000, reserve=500),
                          render=render_request)
    called = [b["name"] for m in built.request["messages"] if isinstance(m["content"], list)
              for b in m["content"] if b.get("type") == "tool_use"]
    assert "read_file" not in called and "bash" in called, called  # read_file's call left out
    return _declared(built)


def test_a_called_tool_kept_because_the_whole_toolkit_fits_is_labelled_toolkit() -> None:
    declared = _called_then_cut(query="yes, go ahead")
    toolkit = "toolkit (the run's whole toolkit fits max_tools)"
    assert declared == {"read_file": toolkit, "edit_file": toolkit, "bash": "referenced"}


def test_a_called_tool_kept_for_its_relevance_now_is_labelled_relevant_with_its_score() -> None:
    declared = _called_then_cut(query="read the file again")
    reason = declared["read_file"]
    assert reason.startswith("relevant (bm25 ") and reason != "relevant (bm25 0.00)", reason
    assert declared["bash"] == "referenced"

"""``tool_inputs`` keeps its last answer per provider on the state: it must be the answer a fresh
state gives (a new process folding the same log), event after event.

The memo's inputs are the policies, the registered specs, the unregistered tools and the names
the history calls; each event below changes one of them (a registration, a call of a registered
tool, a call of a tool the log never registered and a provider refuses the name of, a policy that
denies one, a registration that replaces the toolkit, a policy that pins one), and the answer of
the state that kept its memo through all of them is compared with a fresh one's at each step.
"""

from __future__ import annotations

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
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.state import RunState
from contextfold.projections.tool_candidates import ToolInputs, tool_inputs

READ = ToolSpec(name="read", description="print a document")
SHELL = ToolSpec(name="shell", description="run a command")
GREP = ToolSpec(name="grep", description="search the files")

EVENTS: tuple[AnyEvent, ...] = (
    PolicySet(text="be careful"),
    ToolsRegistered(tools=(READ, SHELL)),
    UserInput("read the notes"),
    ModelResponse(tool_calls=(ToolCall(call_id="c1", name="read"),)),
    ToolResult(call_id="c1", content="the notes"),
    ModelResponse(tool_calls=(ToolCall(call_id="c2", name="multi_tool_use.parallel"),)),
    ToolResult(call_id="c2", content="no such tool", is_error=True),
    PolicySet(text="never", source_ref="runtime://deny", denied_tools=("shell",)),
    ToolsRegistered(tools=(READ, GREP), replace=True),
    PolicySet(text="pin", source_ref="runtime://pin", pinned_tools=("grep",)),
    UserInput("and grep for the word"),
)
CONFIGS = tuple(BuildConfig(provider=p, window=8_000, reserve=1_000)
                for p in ("neutral", "openai-chat", "anthropic", "gemini"))


def _folded(events: tuple[AnyEvent, ...]) -> RunState:
    state = new_state("memo")
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("memo", pos, event, ""))
    return state


def _plain(inputs: ToolInputs) -> tuple[object, ...]:
    """The answer's fields, the specs by their JSON (a fresh state's are other objects)."""
    return (*inputs._replace(registry={}),
            {name: spec.model_dump(mode="json") for name, spec in inputs.registry.items()})


def test_the_kept_answer_is_a_fresh_states_after_every_event() -> None:
    kept = new_state("memo")
    changed = 0
    last: dict[str, tuple[object, ...]] = {}
    for pos, event in enumerate(EVENTS, start=1):
        fold_event(kept, RecordedEvent("memo", pos, event, ""))
        fresh = _folded(EVENTS[:pos])
        for config in CONFIGS:
            got = tool_inputs(kept, config)
            assert tool_inputs(kept, config) is got  # asked again with nothing new: the kept answer
            want = _plain(tool_inputs(fresh, config))
            assert _plain(got) == want, (pos, config.provider)
            changed += last.get(config.provider) != want
            last[config.provider] = want
    assert changed >= 4 * 6  # the events do change the answer (else the test shows nothing)


def test_a_build_after_the_toolkit_changes_declares_the_new_one() -> None:
    """Through the builder: the tools a request declares follow the registration that replaced
    the toolkit, as a fresh state's request does."""
    from contextfold.api import render_request
    from contextfold.projections.builder import build_context

    config = BuildConfig(provider="openai-chat", window=8_000, reserve=1_000)
    state = _folded(EVENTS[:5])
    build_context(state, config, render=render_request)
    for pos, event in enumerate(EVENTS[5:], start=6):
        fold_event(state, RecordedEvent("memo", pos, event, ""))
        fresh = _folded(EVENTS[:pos])
        got = build_context(state, config, render=render_request)
        want = build_context(fresh, config, render=render_request)
        assert got.body_bytes == want.body_bytes, pos
        assert got.manifest.repairs == want.manifest.repairs, pos

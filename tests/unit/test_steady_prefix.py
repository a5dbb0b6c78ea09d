"""A request's stable prefix stays the same from turn to turn where the budget forces cuts.

Providers cache a request's longest unchanged opening. A finding of the prompt-cache hunt on the
tau-bench airline runs (``scripts/measure_prefix_reuse.py``), f02: an instruction (the stable
prefix) was cut at one turn and whole at the next as the history grew and shrank, so the cache
key flipped (an AGENTS.md of 700 words at window 8k: cut in 34 of 571 builds, 23 flips).

Real builds from a log (fold + build_context with real tiktoken counts), one per turn as an
agent loop builds them.
"""

from __future__ import annotations

from contextfold.api import render_request
from contextfold.domain.events import (
    AnyEvent,
    InstructionSet,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import BuildResult, build_context
from contextfold.projections.fold import fold_event, new_state
from tests.unit.test_builder import build, recorded

AGENTS = "AGENTS.md: " + " ".join(f"rule{i} keep the migrations folder untouched." for i in range(90))


def _turns(turns: int, *, instruction: bool) -> list[list[AnyEvent]]:
    """The log as an agent loop sees it before each model response: a policy, maybe an
    instruction, then ``turns`` steps of a user message, a call and its ~150-token result."""
    events: list[AnyEvent] = [PolicySet(text="You are a careful coding agent.")]
    if instruction:
        events.append(InstructionSet(text=AGENTS, source_ref="file://AGENTS.md"))
    out: list[list[AnyEvent]] = []
    for t in range(turns):
        events.append(UserInput(f"step {t}: please look at module {t} and report what it does."))
        out.append(list(events))
        events.append(ModelResponse(text=f"Reading module {t}.",
                                    tool_calls=(ToolCall(call_id=f"c{t}", name="read", arguments="{}"),)))
        out.append(list(events))
        body = " ".join(f"line {t}.{i}: value = compute({i}) # module {t}" for i in range(14))
        events.append(ToolResult(call_id=f"c{t}", content=body))
    return out


def _builds(logs: list[list[AnyEvent]], window: int) -> list[BuildResult]:
    return [build(events, "anthropic", window=window, reserve=window // 4) for events in logs]


def test_an_instruction_that_fits_beside_its_share_of_history_is_never_cut_as_history_grows() -> None:
    builds = _builds(_turns(24, instruction=True), 5_000)
    instr = [[f for f in b.manifest.fragments if f.kind == "instruction"] for b in builds]
    assert builds[-1].manifest.excluded.get("low_priority", 0) > 0  # the history is cut
    assert all(len(i) == 1 and not i[0].truncated for i in instr), [
        (b.manifest.turn, [(f.tokens, f.truncated) for f in i]) for b, i in zip(builds, instr, strict=True)]
    assert len({b.manifest.cache_key for b in builds[2:]}) == 1  # (from the turn the tool joins)



def test_a_key_made_from_the_last_keys_members_is_the_key_of_the_whole_prefix() -> None:
    """The stable prefix's key is remade from the last key's members where their objects are the
    same (the system prompt's JSON, kept while the layout hands out the same system tuple) when
    only the declared tools changed, as they do when a sliding history calls other tools. It must
    be the key a state with nothing remembered computes from the whole prefix, per provider, and
    move when the policy does."""
    events: list[AnyEvent] = [
        PolicySet(text="You are a careful coding agent. " * 40),
        ToolsRegistered(tools=(ToolSpec(name="read", description="Read a module"),)),
        UserInput("please read module 1"),
        ToolsRegistered(tools=(ToolSpec(name="grep", description="Search the modules"),)),
        UserInput("and search for compute"),
        PolicySet(text="You are a careful coding agent, v2."),
        UserInput("once more"),
    ]
    records = recorded(events)
    for provider in ("neutral", "anthropic", "openai-chat"):
        state, folded, keys = new_state("r"), 0, []
        for upto in (3, 5, 7):  # each turn built on the one state, as an agent loop builds
            for rec in records[folded:upto]:
                fold_event(state, rec)
            folded = upto
            keys.append(build_context(state, BuildConfig(provider=provider),
                                      render=render_request).manifest.cache_key)
        assert keys == [build(events[:upto], provider).manifest.cache_key for upto in (3, 5, 7)]
        assert len(set(keys)) == 3  # a tool declared, then a new policy: each moves the key

"""A request's stable prefix stays the same from turn to turn where the budget forces cuts.

Providers cache a request's longest unchanged opening. A finding of the prompt-cache hunt on the
tau-bench airline runs (``scripts/measure_prefix_reuse.py``), f02: an instruction (the stable
prefix) was cut at one turn and whole at the next as the history grew and shrank, so the cache
key flipped (an AGENTS.md of 700 words at window 8k: cut in 34 of 571 builds, 23 flips).

Real builds from a log (fold + build_context with real tiktoken counts), one per turn as an
agent loop builds them.
"""

from __future__ import annotations

from contextfold.domain.events import (
    AnyEvent,
    InstructionSet,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.projections.builder import BuildResult
from tests.unit.test_builder import build

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

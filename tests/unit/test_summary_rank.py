"""What a bounded summary folds first: chatter before what the user asked for, plain successes
before unverified side effects and entries naming ids (``summary_bounds``).

The caps once folded each list's oldest entries, by recency alone: in a chat loop the user's
"ok, carry on" messages of the last 32 turns stayed and the constraints of turns 1 and 20 were
folded away (the seed, section 10: constraints from turns 1, 20 and 50 still hold after
compaction), and of 40 deploys the first, failed one's deployment id was folded out of the
side effects (the seed, 5.3: deployment ids and unverified states are not summarised away).
"""

from __future__ import annotations

import json

import pytest

from contextfold.domain.events import (
    GoalSet,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolResultLost,
    UserInput,
)
from contextfold.domain.log import RecordedEvent
from contextfold.projections.compaction import CompactionPlan, plan_compaction
from contextfold.projections.fold import fold
from contextfold.projections.summary_bounds import bounded_fields
from contextfold.projections.summary_check import CALL_CITE, validate_summary
from tests.unit.test_fold import Log

CONSTRAINTS = {1: "Never touch legacy/ledger.py.",
               20: "From now on, write every commit message in French.",
               50: "Do not use the requests library; use httpx."}


def chatty(turns: int = 60) -> Log:
    """A chat loop whose user says "ok, carry on" every turn but three."""
    log = Log("chat").add(PolicySet(text="You are a coding assistant."),
                          GoalSet(goal="port the billing service", success_contract=("all tests green",)))
    for t in range(1, turns + 1):
        log.add(UserInput(CONSTRAINTS.get(t, f"ok, carry on with part {t}")),
                ModelResponse(text=f"working on part {t}", tool_calls=(ToolCall(
                    call_id=f"c{t}", name="sh", arguments=json.dumps({"cmd": f"make part{t}"})),)),
                ToolResult(call_id=f"c{t}", content=f"part {t} built\n" + "compiler output line\n" * 20))
    return log.add(UserInput("what is left?"))


def covered(log: Log, plan: CompactionPlan) -> list[RecordedEvent]:
    return [r for r in log.records if plan.event.covers_from <= r.position <= plan.event.covers_to]


@pytest.mark.parametrize("room", [None, 400])
def test_constraints_of_turns_1_20_50_stay_whole_and_acknowledgements_fold_first(room: int | None) -> None:
    log = chatty()
    plan = plan_compaction(fold(log.records), log.records, "summary", keep_recent=1,
                           max_summary_tokens=room)
    assert plan is not None
    constraints = plan.event.summary.constraints
    for text in CONSTRAINTS.values():
        assert any(c.endswith(f": {text}") for c in constraints), (text, constraints)
    folded = [c for c in constraints if " earlier constraints (read back in events://chat/" in c]
    assert len(folded) == 1
    # the folded line names where each folded message is read back (`show`, `why`)
    assert "readable whole there" in folded[0]
    assert room or "the user's at events 6, 9, " in folded[0]
    validate_summary(plan.event.summary, covered(log, plan), plan.event.summary, "chat")


def test_the_first_user_input_is_kept_whole_even_at_the_smallest_share() -> None:
    log = Log("t").add(PolicySet(text="p"), UserInput("Port the billing service to Go."))
    for t in range(1, 80):
        log.add(UserInput(f"Also remember rule number {t}: never skip the step {t} review."))
    log.add(UserInput("go"))
    plan = plan_compaction(fold(log.records), log.records, "summary", keep_recent=1, max_summary_tokens=1)
    assert plan is not None
    assert "user at event 2: Port the billing service to Go." in plan.event.summary.constraints


def test_chatter_is_folded_before_a_short_instruction_without_a_keyword() -> None:
    """"Reply in French from now on." has no constraint word and few words; an "ok" has both too."""
    said = tuple(f"user at event {i}: " + ("Reply in French from now on." if i == 3 else "ok thanks")
                 for i in range(2, 12))
    out = bounded_fields({"constraints": said}, "events://r/1-20", (1.0, 0.125))["constraints"]
    assert "user at event 3: Reply in French from now on." in out
    assert "user at event 2: ok thanks" in out  # the first user input: the task, always kept
    assert out[0].startswith("6 earlier constraints (read back in events://r/1-20)")


def deploys(n: int = 40) -> Log:
    log = Log("r").add(PolicySet(text="Deploy each service once."), UserInput("deploy all 40 services"))
    for i in range(1, n + 1):
        log.add(ModelResponse(tool_calls=(ToolCall(call_id=f"call_{i:02d}", name="deploy",
                                                   arguments=json.dumps({"service": f"svc{i}"})),)))
        if i == 1:
            log.add(ToolResult(call_id="call_01", is_error=True, exit_code=1,
                               content="Created deployment dep-7f3a01\nERROR: health check timed out"))
        elif i == 2:
            log.add(ToolResultLost(call_id="call_02", reason="the worker died"))
        else:
            log.add(ToolResult(call_id=f"call_{i:02d}", content=f"Created deployment dep-{i:04d}\nhealthy"))
    return log.add(UserInput("status?"))


@pytest.mark.parametrize("room", [None, 300])
def test_unverified_side_effects_stay_whole_and_folded_ones_keep_their_ids(room: int | None) -> None:
    log = deploys()
    plan = plan_compaction(fold(log.records), log.records, "summary", keep_recent=1,
                           max_summary_tokens=room)
    assert plan is not None
    s = plan.event.summary
    (line,) = [e for e in s.tool_calls_and_results if e.startswith("call call_01 ")]
    assert "dep-7f3a01" in line  # (and said once: the side effect cites its call's line)
    for key in ("side_effects", "tool_calls_and_results"):
        lines = getattr(s, key)
        assert any(e.startswith("call call_01 ") for e in lines), lines
        assert any(e.startswith("call call_02 ") for e in lines), lines
        folded = [e for e in lines if " earlier " in e and "(read back in events://r/" in e]
        assert len(folded) == 1, lines
        assert "{ids: " in folded[0]  # the ids of the folded deploys, verbatim (the newest of them)
    assert any(e.startswith("call call_01 ") and e.endswith(": error: unverified") for e in s.side_effects)
    assert any(e.startswith("call call_02 ") and "TOOL_RESULT_LOST" in e for e in s.known_failures)
    assert len(s.side_effects) <= 33
    validate_summary(s, covered(log, plan), s, "r")


def test_a_folded_line_carries_the_ids_of_what_it_folds() -> None:
    entries = tuple(f"call c{i} (deploy) {{}}: reported success by the tool {{ids: dep-{i:04d}}}"
                    for i in range(1, 41))
    out = bounded_fields({"side_effects": entries}, "events://r/1-90")["side_effects"]
    assert out[0].startswith("8 earlier side effects (read back in events://r/1-90)")
    assert all(f"dep-{i:04d}" in out[0] for i in range(1, 9))
    assert len(out) == 33


def test_the_media_a_user_gave_stay_whole_when_evidence_refs_fold() -> None:
    """The task's screenshot is the oldest evidence ref: by recency alone it folded first of 40."""
    shot = "artifact:" + "a" * 64 + " (image/png, attached to the user's message at event 3)"
    reads = tuple(f"file://src/m{i}.py@r{i}" for i in range(40))
    out = bounded_fields({"evidence_refs": (shot, *reads)}, "events://r/1-90")
    assert out["evidence_refs"][0].startswith("9 earlier evidence refs") and shot in out["evidence_refs"]


def test_a_folded_line_says_how_it_picked_the_calls_it_names() -> None:
    """The calls a folded line names are picked by rank (a failed one first), then the newest: the
    line said "the newest: call w0, call w1, call w2, ..." of the three oldest, which had failed.
    It now claims no order, and says how many calls it leaves unnamed."""
    entries = tuple(
        f"call w{i} (write_file) {{}} at event {i} -> "
        + ("error exit_code=1 is_error=true" if i < 5 else "ok is_error=false")
        for i in range(60))
    out = bounded_fields({"tool_calls_and_results": entries}, "events://r/1-90",
                         (0.0625, 1.0))["tool_calls_and_results"]
    folded = out[0]
    assert folded.startswith("58 earlier tool calls and results (read back in events://r/1-90)")
    assert "the newest:" not in folded, folded
    named = CALL_CITE.findall(folded)
    assert named == ["w0", "w1", "w2", "w59"], folded  # (w3 and w4 stay whole)
    assert folded.endswith(", citing call w0, call w1, call w2, call w59 and 54 more calls"), folded
    whole = bounded_fields({"tool_calls_and_results": entries[:6]}, "events://r/1-90",
                           (0.0625, 1.0))["tool_calls_and_results"]
    assert whole[0].endswith(", citing call w0, call w1, call w2, call w5"), whole[0]  # all named

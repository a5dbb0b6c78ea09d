"""A plug-in summary may not state otherwise than the log does (the seed, 5.3): side effects and
the ids they name stay, an outcome the log leaves lost or unverified is not written as known, and
a decision cites what backs it. Each case here was recorded before the check."""

from __future__ import annotations

import pytest

from contextfold.domain.errors import CompactionError
from contextfold.domain.events import (
    CompactionSummary,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolResultLost,
    UserInput,
)
from contextfold.projections.compaction import deterministic_summary
from contextfold.projections.fold import fold
from contextfold.projections.summary_check import validate_summary
from tests.unit.test_fold import Log


def deploys() -> Log:
    return Log().add(
        PolicySet(text="Ship it."), UserInput("deploy v2 to eu"),
        ModelResponse(tool_calls=(ToolCall(call_id="d1", name="deploy", arguments='{"v": "2"}'),)),
        ToolResult(call_id="d1", content="deployment dep-77120 started; health check not yet verified"),
        ModelResponse(tool_calls=(ToolCall(call_id="d2", name="deploy", arguments='{"v": "2", "r": "eu"}'),)),
        ToolResultLost(call_id="d2", reason="the worker died"),
        UserInput("and?"))


def checked(update: dict[str, object]) -> CompactionSummary:
    log = deploys()
    skeleton = deterministic_summary(log.records, fold(log.records))
    return validate_summary(skeleton.model_copy(update=update), log.records, skeleton, log.run_id)


def test_the_deterministic_summary_passes_its_own_check() -> None:
    assert checked({}).side_effects


def test_a_summary_that_drops_a_side_effect_is_refused() -> None:
    with pytest.raises(CompactionError, match=r"drops side effects of calls \['d1', 'd2'\]"):
        checked({"side_effects": ()})


def test_a_summary_that_drops_an_id_a_result_named_is_refused() -> None:
    log = deploys()
    skeleton = deterministic_summary(log.records, fold(log.records))
    lines = {key: tuple(e.replace("dep-77120", "the deployment") for e in getattr(skeleton, key))
             for key in ("tool_calls_and_results", "side_effects")}
    with pytest.raises(CompactionError, match=r"drops ids .*'dep-77120'"):
        validate_summary(skeleton.model_copy(update=lines), log.records, skeleton, log.run_id)


@pytest.mark.parametrize("call", ["d1", "d2"])
def test_a_summary_that_writes_a_lost_or_unverified_call_as_known_is_refused(call: str) -> None:
    log = deploys()
    skeleton = deterministic_summary(log.records, fold(log.records))
    rosy = tuple(f"call {call} (deploy) succeeded: dep-77120 healthy" if f"call {call} " in e else e
                 for e in skeleton.tool_calls_and_results)
    with pytest.raises(CompactionError, match=rf"outcome of calls \['{call}'\] as known"):
        validate_summary(skeleton.model_copy(update={"tool_calls_and_results": rosy}), log.records,
                         skeleton, log.run_id)


def test_an_uncited_decision_is_refused_and_a_cited_one_recorded() -> None:
    with pytest.raises(CompactionError, match="belongs under inferences"):
        checked({"decisions": ("Deployment is healthy in all regions",)})
    assert checked({"decisions": ("retry call d2 in eu", "roll back if event 4's health check fails")})


@pytest.mark.parametrize("run_id, arguments", [("run-1", '{"cmd": "grep -rn \'unknown option\' src"}'),
                                               ("lost-baggage-17", '{"cmd": "ls"}')])
def test_words_in_arguments_or_the_run_id_do_not_make_an_outcome_unsure(run_id: str, arguments: str) -> None:
    """The check read a call line whole: "unknown" in a failed grep's arguments, or "lost" in the
    run id every event ref names, marked the call's outcome unsure, and the skeleton itself, as a
    plug-in summary returned it, was refused."""
    log = Log(run_id).add(
        UserInput("look"),
        ModelResponse(tool_calls=(ToolCall(call_id="g1", name="bash", arguments=arguments),)),
        ToolResult(call_id="g1", content="nothing found", is_error=True, exit_code=1),
        ModelResponse(tool_calls=(ToolCall(call_id="u1", name="update_reservation", arguments="{}"),)),
        ToolResult(call_id="u1", content="updated"), UserInput("ok"))
    skeleton = deterministic_summary(log.records, fold(log.records))
    assert validate_summary(skeleton, log.records, skeleton, run_id) == skeleton

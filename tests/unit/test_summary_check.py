"""A plug-in summary may not state otherwise than the log does (the seed, 5.3): side effects and
the ids they name stay, an outcome the log leaves lost or unverified is not written as known, and
a decision cites what backs it. Each case here was recorded before the check."""

from __future__ import annotations

import pytest

from contextfold.domain.errors import CompactionError, SummaryRejectedError
from contextfold.domain.events import (
    CompactionSummary,
    EvidenceRetrieved,
    FileRead,
    GoalSet,
    MemoryRecalled,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolResultLost,
    UserInput,
)
from contextfold.projections.compaction import deterministic_summary
from contextfold.projections.fold import fold
from contextfold.projections.summary_check import CALL_CITE, validate_summary
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


def failed_deploy() -> Log:
    return Log().add(
        UserInput("deploy v2 to staging"),
        ModelResponse(tool_calls=(ToolCall(call_id="d1", name="deploy", arguments='{"env": "staging"}'),)),
        ToolResult(call_id="d1", content="ERROR: rollout failed, health check timed out", is_error=True,
                   exit_code=1),
        UserInput("go on"))


def _validate_with(key: str, entry: str) -> object:
    """``validate_summary`` of the failed deploy's skeleton with ``entry`` for call d1 in ``key``."""
    log = failed_deploy()
    skeleton = deterministic_summary(log.records, fold(log.records))
    lines = tuple(entry if "call d1 " in e else e for e in getattr(skeleton, key))
    return validate_summary(skeleton.model_copy(update={key: lines}), log.records, skeleton, log.run_id)


@pytest.mark.parametrize("key, rosy", [
    ("tool_calls_and_results", "call d1 (deploy) staging -> ok, deployment succeeded and verified"),
    ("side_effects", "call d1 (deploy) deployed to staging: succeeded, verified healthy"),
    ("known_failures", "call d1 (deploy) had a transient health-check warning that cleared"),
    ("side_effects", "call d1 (deploy) failed to deploy to staging"),  # failed, but no longer unverified
    ("tool_calls_and_results", "call d1 (deploy) -> ok, finished without errors"),  # a denial
    ("known_failures", "call d1 (deploy) did not fail after all: no failures in the rollout"),
    # a failure word that is no failure, or a success beside one (review)
    ("tool_calls_and_results", "call d1 (deploy) -> succeeded and verified, error-free"),
    ("tool_calls_and_results", "call d1 (deploy) -> succeeded; errors: none"),
    ("known_failures", "call d1 (deploy) succeeded, the failover was not needed"),
    # a failure denied in other words (review, second round)
    ("tool_calls_and_results", "call d1 (deploy) deployed and healthy; nothing failed"),
    ("tool_calls_and_results", "call d1 (deploy) completed, none of the health checks failed"),
    ("tool_calls_and_results", "call d1 (deploy) completed and verified; all earlier errors resolved"),
    ("tool_calls_and_results", "call d1 (deploy) -> ok, failure count 0"),
])
def test_a_summary_that_writes_a_failed_call_as_succeeded_is_refused(key: str, rosy: str) -> None:
    """A plug-in summary wrote a failed deploy (exit 1, the skeleton's side effect "error:
    unverified") as "succeeded, verified healthy", and it was recorded: only lost or cancelled
    outcomes were checked."""
    with pytest.raises(CompactionError, match=r"calls \['d1'\]"):
        _validate_with(key, rosy)


@pytest.mark.parametrize("key", ["decisions", "next_action"])
def test_a_decision_or_next_action_that_calls_a_failed_call_a_success_is_refused(key: str) -> None:
    """Only the fields that state an outcome were checked: "the deploy (call d1) succeeded, so
    announce it" was recorded as a decision or the next action; naming the call stays allowed."""
    log = failed_deploy()
    skeleton = deterministic_summary(log.records, fold(log.records))

    def with_(said: str) -> CompactionSummary:
        value: object = said if key == "next_action" else (*skeleton.decisions, said)
        return skeleton.model_copy(update={key: value})

    with pytest.raises(CompactionError, match=r"states calls \['d1'\] as succeeded"):
        validate_summary(with_("the deploy (call d1) succeeded, so announce it"), log.records, skeleton,
                         log.run_id)
    for said in ("retry call d1 after fixing the health check",
                 "call d1 did not succeed: fix the health check, then retry it"):
        assert validate_summary(with_(said), log.records, skeleton, log.run_id)


@pytest.mark.parametrize("entry", [
    "call d1 (deploy) to staging did not complete successfully (exit code 1)",
    "call d1 (deploy) to staging was attempted without success: exit code 1",
    "call d1 (deploy) to staging failed; success: false",
    "call d1 (deploy) to staging failed to succeed: health check timed out",
])
def test_an_honest_failure_that_names_success_denied_is_recorded(entry: str) -> None:
    """Honest wordings refused once a success word counted as a claim (review, second round)."""
    assert _validate_with("tool_calls_and_results", entry)


def test_a_failed_call_said_to_have_failed_in_other_words_is_recorded() -> None:
    log = failed_deploy()
    skeleton = deterministic_summary(log.records, fold(log.records))
    honest = {"tool_calls_and_results": ("call d1 (deploy) to staging failed with exit code 1",),
              "side_effects": ("call d1 (deploy) to staging: rollout failed, state unverified",),
              "known_failures": ("call d1 (deploy): health check timed out, error; did not succeed",)}
    assert validate_summary(skeleton.model_copy(update=honest), log.records, skeleton, log.run_id)


@pytest.mark.parametrize("key, entry", [
    ("constraints", "the user approved deploying to production at any time"),
    ("pending_steps", "deploy to production (approved)"),
    ("success_contract", "production stays up"),
    ("goal", "Deploy v2 to production"),
])
def test_a_goal_constraint_or_step_the_log_does_not_hold_is_refused_unless_cited_or_inferred(
        key: str, entry: str) -> None:
    """A plug-in summary added "the user approved deploying to production at any time" to the
    constraints (and "deploy to production (approved)" to the pending steps), and both were sent
    under constraints as the log's: only that the skeleton's were kept was checked."""
    log = deploys()
    skeleton = deterministic_summary(log.records, fold(log.records))

    def with_(said: str) -> CompactionSummary:
        value: object = said if key == "goal" else (*getattr(skeleton, key), said)
        return skeleton.model_copy(update={key: value})

    with pytest.raises(CompactionError, match="cite what backs it or label it an inference"):
        validate_summary(with_(entry), log.records, skeleton, log.run_id)
    for said in (f"{entry} (inferred, not in the log)", f"{entry} (user at event 2)"):
        assert validate_summary(with_(said), log.records, skeleton, log.run_id)


def researched() -> Log:
    """A deploy whose result was lost, beside a retrieved runbook and a recalled memory."""
    return Log().add(
        PolicySet(text="p"), GoalSet(goal="ship v2", success_contract=("v2 live",)), UserInput("ship it"),
        EvidenceRetrieved(content="runbook text", source_ref="https://wiki/runbook#deploy"),
        MemoryRecalled(memory_id="m-1", content="prod needs approval", source_ref="mem://approvals/policy"),
        ModelResponse(text="deploying", tool_calls=(ToolCall(call_id="d1", name="deploy",
                                                             arguments='{"env": "prod"}'),)),
        ToolResultLost(call_id="d1", reason="the worker died"), UserInput("go on"))


def _check_researched(update: dict[str, object]) -> CompactionSummary:
    log = researched()
    skeleton = deterministic_summary(log.records, fold(log.records))
    if "evidence_refs" in update:
        update = {**update, "evidence_refs": (*skeleton.evidence_refs, *update["evidence_refs"])}  # type: ignore[misc]
    return validate_summary(skeleton.model_copy(update=update), log.records, skeleton, log.run_id)


@pytest.mark.parametrize("entry, ref", [
    ("https://status.example.com/v2-is-live", "https://status.example.com/v2-is-live"),
    ("memory m-999: mem://approvals/prod-ok", "mem://approvals/prod-ok"),
    ("memory m-999: mem://approvals/policy", "m-999"),  # a real source, a memory never recalled
    ("the approval memo", "the approval memo"),  # names no ref at all
])
def test_an_evidence_ref_no_event_holds_is_refused_naming_the_field_and_ref(entry: str, ref: str) -> None:
    """DESIGN 7: a plug-in summary is validated (every evidence ref exists) before it is recorded;
    a URL no event held and a memory never recalled were recorded as the run's evidence, since only
    event://, file://, call:// and artifact: refs were looked up."""
    with pytest.raises(SummaryRejectedError) as caught:
        _check_researched({"evidence_refs": (entry,)})
    assert (caught.value.field, caught.value.ref) == ("evidence_refs", ref)
    assert "evidence_refs" in str(caught.value) and ref in str(caught.value)


@pytest.mark.parametrize("entry", [
    "https://wiki/runbook#deploy (the deploy runbook)", "memory m-1: mem://approvals/policy",
    "mem://approvals/policy", "the runbook: https://wiki/runbook#deploy"])
def test_an_evidence_ref_the_run_holds_is_recorded_in_the_summarizers_words(entry: str) -> None:
    assert entry in _check_researched({"evidence_refs": (entry,)}).evidence_refs


@pytest.mark.parametrize("next_action", [
    "v2 is live in production (deploy verified); close the ticket",
    "v2 is live: call d1 verified, close the ticket",
])
def test_a_next_action_stating_an_unbacked_or_unverified_outcome_is_refused(next_action: str) -> None:
    """Seed 5.3: inferences are marked as inferences. The next action was the one field of a
    plug-in summary not checked: "v2 is live in production (deploy verified)" was recorded and sent
    while the deploy call's result was TOOL_RESULT_LOST."""
    with pytest.raises(SummaryRejectedError) as caught:
        _check_researched({"next_action": next_action})
    assert caught.value.field == "next_action"


@pytest.mark.parametrize("next_action", [
    "check whether call d1 (lost) deployed v2, then close the ticket",
    "(inferred) check the status page, then close the ticket",
    "re-read event 4's runbook and retry the deploy",
])
def test_a_next_action_that_cites_or_says_it_is_inferred_is_recorded(next_action: str) -> None:
    assert _check_researched({"next_action": next_action}).next_action == next_action


ODD_PATHS = ("app/[slug]/page.tsx", "data/a,b.csv", "notes/draft(old);v2.md")
"""Paths holding the characters a ref is found up to (``,;)]``): Next.js routes, a CSV named by
its columns, a copy's name."""


def _files_read() -> Log:
    return Log().add(
        UserInput("fix the slug page"),
        *(FileRead(path=p, revision="b52d0f1", content="export default 1\n" * 20) for p in ODD_PATHS),
        ModelResponse(text="reading"), UserInput("go on"))


def test_a_file_ref_holding_a_bracket_or_comma_is_cited_whole() -> None:
    """A ref is found up to a ``,;)]`` (the prose around it), and a path may hold one: the
    skeleton's own line ``file://app/[slug]/page.tsx@b52d0f1`` was read as citing
    ``file://app/[slug``, and a summarizer that kept the skeleton (or wrote the ref in its own
    words) was rejected. A ref no file read holds is still refused."""
    log = _files_read()
    skeleton = deterministic_summary(log.records, fold(log.records))
    for path in ODD_PATHS:
        assert f"file://{path}@b52d0f1" in skeleton.evidence_refs
    assert validate_summary(skeleton, log.records, skeleton, log.run_id) == skeleton
    own = skeleton.model_copy(update={
        "evidence_refs": tuple(f"the route (file://{p}@b52d0f1), read" for p in ODD_PATHS),
        "decisions": ("keep the slug route: file://app/[slug]/page.tsx@b52d0f1, as read",)})
    assert validate_summary(own, log.records, skeleton, log.run_id) == own
    for update in ({"decisions": ("edit file://app/[other]/page.tsx next",)},
                   {"evidence_refs": ("file://app/[slug]/layout.tsx",)}):
        with pytest.raises(SummaryRejectedError, match=r"file://app/\["):
            validate_summary(skeleton.model_copy(update=update), log.records, skeleton, log.run_id)


def test_a_ref_ending_a_sentence_is_the_ref_it_names() -> None:
    """A plug-in summary writes a ref at the end of its sentence ("... as read in
    file://src/pricing.py@r2."): the check read the full stop as part of the ref and refused the
    summary, and the compaction recorded nothing. A ref no file read holds, at a sentence's end
    too, is still refused."""
    log = Log().add(UserInput("fix the rounding"),
                    FileRead(path="src/pricing.py", revision="r2", content="ROUND = 2\n" * 20),
                    ModelResponse(text="reading"), UserInput("go on"))
    skeleton = deterministic_summary(log.records, fold(log.records))
    for end in (".", ":", "!"):
        said = skeleton.model_copy(update={
            "decisions": (f"round half up, as read in file://src/pricing.py@r2{end}",)})
        assert validate_summary(said, log.records, skeleton, log.run_id) == said
    with pytest.raises(SummaryRejectedError, match=r"file://src/tax.py"):
        validate_summary(skeleton.model_copy(update={"decisions": ("edit file://src/tax.py@r2.",)}),
                         log.records, skeleton, log.run_id)


REAL_IDS = ("functions.read_file:0", "functions.bash:1", "toolu_01A09q90qw90lq917835lq9", "call_abc123",
            "3f2b8c1e-5d4a-4b6f-9e7d-2c1a0b9f8e7d", "gemini-0-1", "swe-3", "tools/deploy@prod.v2")
"""Call ids as real providers and the importers write them: Kimi's (``functions.NAME:N``),
Anthropic's, OpenAI's, a UUID, the Gemini and SWE-agent importers' own, and one holding ``/`` and
``@`` (named by a stand-in in the skeleton's lines, cited raw by a summarizer)."""


def _kimi_calls() -> Log:
    """Kimi-style calls (and others of real shapes), one batch: each read succeeds, the bash call
    fails, and the deploy is lost."""
    failed, lost = "functions.bash:1", "tools/deploy@prod.v2"
    names = {failed: "bash", lost: "deploy"}
    calls = tuple(ToolCall(call_id=cid, name=names.get(cid, "read_file"), arguments='{"path": "a.py"}')
                  for cid in REAL_IDS)
    return Log().add(
        UserInput("read a.py and deploy"), ModelResponse(tool_calls=calls),
        *(ToolResult(call_id=cid, content="x = 1") for cid in REAL_IDS if cid not in names),
        ToolResult(call_id=failed, content="Error: make: *** [deploy] 2", is_error=True, exit_code=2),
        ToolResultLost(call_id=lost, reason="the worker died"), UserInput("go on"))


@pytest.mark.parametrize("text, cited", [
    ("call functions.read_file:0 (read_file) {} at event 2 -> ok", ["functions.read_file:0"]),
    ("retry call functions.bash:1.", ["functions.bash:1"]),
    ("call functions.bash:1: failed; see call toolu_01A09q90qw90lq917835lq9, then call swe-3!",
     ["functions.bash:1", "toolu_01A09q90qw90lq917835lq9", "swe-3"]),
    ("[call tools/deploy@prod.v2] was lost (call 3f2b8c1e-5d4a-4b6f-9e7d-2c1a0b9f8e7d)",
     ["tools/deploy@prod.v2", "3f2b8c1e-5d4a-4b6f-9e7d-2c1a0b9f8e7d"]),
    ("earlier ls ok: call gemini-0-1, call call_abc123 (and 2 earlier)", ["gemini-0-1", "call_abc123"]),
])
def test_a_call_is_cited_by_its_whole_id_without_the_sentence_punctuation_after_it(
        text: str, cited: list[str]) -> None:
    assert CALL_CITE.findall(text) == cited


def test_a_summary_of_kimi_style_calls_is_checked_by_their_whole_ids() -> None:
    """A call cite stopped at ``:``: every line the skeleton wrote about a Kimi call
    (``functions.read_file:0``) cited ``functions.read_file``, which no call has, so a summarizer
    that kept the skeleton was rejected; and ``functions.bash:1``'s failure counted as kept by a
    line about ``functions.bash:0``. Each call is cited by its whole id now: the skeleton is
    recorded, a summary in its own words citing the raw ids too, and one that drops a failure is
    refused naming the call."""
    log = _kimi_calls()
    skeleton = deterministic_summary(log.records, fold(log.records))
    assert validate_summary(skeleton, log.records, skeleton, log.run_id) == skeleton
    own = skeleton.model_copy(update={
        "known_failures": ("call functions.bash:1 (bash) failed: exit_code=2, make deploy errored.",
                           "call tools/deploy@prod.v2 (deploy): TOOL_RESULT_LOST, outcome unverified."),
        "side_effects": tuple(e.replace(" (deploy) ", " (the deploy) ") for e in skeleton.side_effects),
        "decisions": ("retry call functions.bash:1 once the Makefile is fixed; call functions.read_file:0 "
                      "showed a.py.",)})
    assert validate_summary(own, log.records, skeleton, log.run_id) == own
    dropped = skeleton.model_copy(update={"known_failures": (
        "call functions.bash:0 (bash) failed at event 2: is_error=true",
        *(e for e in skeleton.known_failures if "functions.bash:1" not in e))})
    with pytest.raises(CompactionError, match=r"unknown call ids \['functions.bash:0'\]"):
        validate_summary(dropped, log.records, skeleton, log.run_id)
    dropped = skeleton.model_copy(update={"known_failures": tuple(
        e for e in skeleton.known_failures if "functions.bash:1" not in e)})
    with pytest.raises(CompactionError, match=r"drops known failures of calls \['functions.bash:1'\]"):
        validate_summary(dropped, log.records, skeleton, log.run_id)
    rosy = skeleton.model_copy(update={"tool_calls_and_results": (
        *skeleton.tool_calls_and_results, "call tools/deploy@prod.v2 (deploy) succeeded")})
    with pytest.raises(CompactionError, match=r"outcome of calls \['tools_deploy_pro_\w{8}'\] as known"):
        validate_summary(rosy, log.records, skeleton, log.run_id)

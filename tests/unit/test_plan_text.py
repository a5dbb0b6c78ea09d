"""The plan enters lean: what to do now and what it waits on, never the plan's whole history."""

from __future__ import annotations

from contextfold.api import render_request
from contextfold.domain.events import AnyEvent, GoalSet, PlanStep, PlanUpdated, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.fold_content import plan_text


def test_a_short_plan_lists_every_step_ready_first_and_its_dependencies() -> None:
    plan = PlanUpdated(steps=(PlanStep(id="s1", title="reproduce", status="done"),
                              PlanStep(id="s2", title="find the cause", status="done"),
                              PlanStep(id="s3", title="fix", status="ready", depends_on=("s2", "s9")),
                              PlanStep(id="s4", title="release", depends_on=("s3",)),
                              PlanStep(id="s5", title="flaky test", status="failed")),
                       budget="2 hours", stop_conditions=("the test passes",))
    assert plan_text(plan) == "\n".join([
        "[ready] s3: fix (depends on: s2 [done], s9 [?])",
        "[failed] s5: flaky test",
        "[pending] 1 more step (s4), not shown until ready",
        "[done] s1, s2 (2 of 5 steps)",
        "budget: 2 hours",
        "stop when: the test passes"])


def test_only_the_ready_steps_and_what_they_wait_on_are_listed() -> None:
    """Seed 5.1: the plan injects only the current ready task, its dependencies and the global
    success conditions; every pending step was listed with its title. With no step marked ready,
    the pending ones whose dependencies are all finished are the ready ones."""
    steps = (PlanStep(id="s1", title="Design API", status="done"),
             PlanStep(id="s3", title="Implement handler", status="ready", depends_on=("s1",)),
             PlanStep(id="s4", title="Write docs", depends_on=("s3",)),
             PlanStep(id="s6", title="Unrelated cleanup"))
    assert plan_text(PlanUpdated(steps=steps)).splitlines() == [
        "[ready] s3: Implement handler (depends on: s1 [done])",
        "[pending] 2 more steps (s4 to s6), not shown until ready",
        "[done] s1 (1 of 4 steps)"]
    fresh = (PlanStep(id="a", title="Reproduce"), PlanStep(id="b", title="Fix", depends_on=("a",)))
    assert plan_text(PlanUpdated(steps=fresh)).splitlines() == [
        "[pending] a: Reproduce", "[pending] 1 more step (b), not shown until ready"]


def test_a_skipped_step_is_listed_as_skipped_not_as_done() -> None:
    """A skipped step was listed under "[done]", while the dependency line of the same fragment said
    "[skipped]": the model read that the migration ran."""
    plan = PlanUpdated(steps=(PlanStep(id="build", title="build", status="done"),
                              PlanStep(id="migrate", title="migrate the database", status="skipped"),
                              PlanStep(id="deploy", title="deploy", status="ready", depends_on=("migrate",))))
    assert plan_text(plan).splitlines() == [
        "[ready] deploy: deploy (depends on: migrate [skipped])",
        "[done] build (1 of 3 steps)",
        "[skipped] migrate (1 of 3 steps)"]


def test_a_plan_of_thousands_of_steps_still_enters_lean() -> None:
    """An agent working through a list: 4,999 steps done, one ready, 3,000 waiting. The finished ids
    on one line made the required plan fragment ~19,000 tokens, over a 16k window's budget: every
    build of the run failed with RequiredContextExceedsBudgetError."""
    done = [PlanStep(id=f"d{i}", title=f"item {i}", status="done") for i in range(4_999)]
    last = PlanStep(id="now", title="item 4999", status="ready",
                    depends_on=(*(s.id for s in done[-30:]), "p0"))
    waiting = [PlanStep(id=f"p{i}", title=f"item {5_000 + i}") for i in range(3_000)]
    text = plan_text(PlanUpdated(steps=(*done, last, *waiting)))
    assert text.splitlines() == [
        "[ready] now: item 4999 (depends on: p0 [pending], and 30 finished)",
        "[pending] 3000 more steps (p0 to p2999), not shown until ready",
        "[done] 4999 of 8000 steps; the latest 20: " + ", ".join(f"d{i}" for i in range(4_979, 4_999))]
    state = new_state("plan")
    events: list[AnyEvent] = [GoalSet(goal="work through the list"), UserInput("go on"),
                              PlanUpdated(steps=(*done, last, *waiting))]
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("plan", pos, event, ""))
    built = build_context(state, BuildConfig(provider="anthropic", window=16_000), render=render_request)
    plan = next(f for f in built.manifest.fragments if f.kind == "plan")
    assert plan.required and plan.tokens < 400

"""The plan enters lean: what to do now and what it waits on, never the plan's whole history."""

from __future__ import annotations

import json

from contextfold.api import render_request
from contextfold.domain.events import AnyEvent, GoalSet, PlanStep, PlanUpdated, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.compaction import deterministic_summary
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.plan_view import NO_PLAN, current_steps, plan_steps, plan_text, stuck_steps


def test_a_short_plan_lists_every_step_ready_first_and_its_dependencies() -> None:
    plan = PlanUpdated(steps=(PlanStep(id="s1", title="reproduce", status="done"),
                              PlanStep(id="s2", title="find the cause", status="done"),
                              PlanStep(id="s3", title="fix", status="ready", depends_on=("s2", "s9")),
                              PlanStep(id="s4", title="release", depends_on=("s3",)),
                              PlanStep(id="s5", title="flaky test", status="failed")),
                       budget="2 hours", stop_conditions=("the test passes",))
    assert plan_text(plan) == "\n".join([
        "[ready] s3: fix (depends on: s2 [done], s9 [unknown step id])",
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
        "[pending] p0: item 5000 (needed by now)",
        "[pending] 2999 more steps (p1 to p2999), not shown until ready",
        "[done] 4999 of 8000 steps; the latest 20: " + ", ".join(f"d{i}" for i in range(4_979, 4_999))]
    state = new_state("plan")
    events: list[AnyEvent] = [GoalSet(goal="work through the list"), UserInput("go on"),
                              PlanUpdated(steps=(*done, last, *waiting))]
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("plan", pos, event, ""))
    built = build_context(state, BuildConfig(provider="anthropic", window=16_000), render=render_request)
    plan = next(f for f in built.manifest.fragments if f.kind == "plan")
    assert plan.required and plan.tokens < 400


def test_steps_that_can_never_be_ready_are_named_with_the_reason() -> None:
    """A cycle (a <-> b), a self-dependency or a dependency on an id no step has (a typo) leaves no
    current step, and the plan said only "[pending] 2 more steps (a to b), not shown until ready":
    no title, no reason, nothing the model could act on."""
    cycle = PlanUpdated(steps=(PlanStep(id="a", title="build the image", depends_on=("b",)),
                               PlanStep(id="b", title="run integration tests", depends_on=("a",)),
                               PlanStep(id="c", title="publish", depends_on=("b",)),
                               PlanStep(id="d", title="announce", depends_on=("c", "z"))))
    assert current_steps(cycle) == []
    assert plan_text(cycle).splitlines() == [
        "[stuck] a: build the image (never ready: dependency cycle among a, b)",
        "[stuck] b: run integration tests (never ready: dependency cycle among a, b)",
        "[stuck] c: publish (never ready: waits on stuck step b)",
        "[stuck] d: announce (never ready: depends on unknown step id z)"]
    typo = PlanUpdated(steps=(PlanStep(id="setup", title="set up db", status="done"),
                              PlanStep(id="deploy", title="deploy to prod", depends_on=("set-up",)),
                              PlanStep(id="loop", title="wait for itself", depends_on=("loop",)),
                              PlanStep(id="later", title="clean up", depends_on=("setup", "x"))))
    assert plan_text(typo).splitlines() == [
        "[stuck] deploy: deploy to prod (never ready: depends on unknown step id set-up)",
        "[stuck] loop: wait for itself (never ready: depends on itself)",
        "[stuck] later: clean up (never ready: depends on unknown step id x)",
        "[done] setup (1 of 4 steps)"]


def test_a_ready_step_shows_the_pending_steps_it_waits_on() -> None:
    """A step marked ready whose dependency is unfinished showed "depends on: migrate [pending]"
    and hid what migrate is; a pending step that can run but nothing needs stays counted."""
    plan = PlanUpdated(steps=(PlanStep(id="backup", title="back up the database"),
                              PlanStep(id="migrate", title="run DB migration", depends_on=("backup",)),
                              PlanStep(id="deploy", title="deploy", status="ready", depends_on=("migrate",)),
                              PlanStep(id="docs", title="write the release notes")))
    assert plan_text(plan).splitlines() == [
        "[ready] deploy: deploy (depends on: migrate [pending])",
        "[pending] migrate: run DB migration (needed by deploy)",
        "[pending] backup: back up the database (needed by migrate)",
        "[pending] 1 more step (docs), not shown until ready"]


def test_stuck_and_needed_steps_stay_bounded() -> None:
    """A cycle of thousands of steps, a ready step waiting on thousands: each list is bounded."""
    ring = [PlanStep(id=f"r{i}", title=f"ring {i}", depends_on=(f"r{(i + 1) % 3000}",)) for i in range(3000)]
    chain = [PlanStep(id=f"c{i}", title=f"chain {i}", depends_on=(f"c{i + 1}",) if i < 2999 else ())
             for i in range(3000)]
    top = PlanStep(id="top", title="ship", status="in_progress", depends_on=("c0",))
    plan = PlanUpdated(steps=(top, *chain, *ring))
    assert len(stuck_steps(plan)) == 3000
    lines = plan_text(plan).splitlines()
    assert len(lines) == 1 + 20 + 1 + 20 + 1
    assert lines[1] == "[pending] c0: chain 0 (needed by top)"
    assert lines[21] == "... 2980 more pending steps the current ones wait on (c20 to c2999)"
    assert lines[22] == ("[stuck] r0: ring 0 (never ready: dependency cycle among r0, r1, r2, r3, r4 "
                         "and 2995 more)")
    assert lines[-1] == "... 2980 more stuck steps (r20 to r2999)"


def test_a_cleared_plan_says_there_is_no_plan_and_is_counted() -> None:
    """``PlanUpdated(steps=())`` (a runtime clearing its plan) made a required plan fragment of 0
    tokens, rendered as "(empty message)" on Anthropic and as empty content on OpenAI: the model
    was not told that the plan it had worked to is gone."""
    assert plan_text(PlanUpdated(steps=())) == NO_PLAN
    assert plan_text(PlanUpdated(steps=(), budget="1 hour")).splitlines() == [NO_PLAN, "budget: 1 hour"]
    events: list[AnyEvent] = [GoalSet(goal="ship it"),
                              PlanUpdated(steps=(PlanStep(id="a", title="deploy"),)),
                              PlanUpdated(steps=()), UserInput("go")]
    state = new_state("cleared")
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("cleared", pos, event, ""))
    for provider in ("anthropic", "openai-chat", "openai-responses"):
        built = build_context(state, BuildConfig(provider=provider, window=16_000), render=render_request)
        (plan,) = [f for f in built.manifest.fragments if f.kind == "plan"]
        assert plan.id == "e3" and plan.required and plan.tokens > 0
        assert [(x.id, x.reason, x.replaced_by) for x in built.manifest.excluded_items] == [
            ("e2", "superseded", "e3")]
        shown = json.dumps(built.request)
        assert NO_PLAN in shown and "(empty message)" not in shown and '"content": ""' not in shown


def test_a_plan_the_log_holds_with_a_step_id_twice_reads_each_id_as_its_last_entry() -> None:
    """The store refuses such a plan now (``domain.log``); logs written before hold some. The
    current steps walked the list and the stuck ones a map by id: ``a`` was the current step (its
    first entry, ready) and stuck (its last, waiting on a typo), and the plan showed it ready."""
    plan = PlanUpdated(steps=(PlanStep(id="a", title="deploy", status="ready"),
                              PlanStep(id="b", title="test", status="done"),
                              PlanStep(id="a", title="deploy again", depends_on=("x",)),
                              PlanStep(id="c", title="announce", depends_on=("a",))))
    assert [s.title for s in plan_steps(plan)] == ["deploy again", "test", "announce"]
    assert current_steps(plan) == []
    assert stuck_steps(plan) == {"a": "depends on unknown step id x", "c": "waits on stuck step a"}
    assert plan_text(plan).splitlines() == [
        "[stuck] a: deploy again (never ready: depends on unknown step id x)",
        "[stuck] c: announce (never ready: waits on stuck step a)",
        "[done] b (1 of 3 steps)",
        "(step id a listed more than once: each read as its last entry)"]
    # and the other way round: the ready entry last, the step is current and not stuck
    ready_last = PlanUpdated(steps=(plan.steps[2], plan.steps[0]))
    assert [s.title for s in current_steps(ready_last)] == ["deploy"] and stuck_steps(ready_last) == {}
    state = new_state("old")  # folded and summarised as the plan fragment reads it
    events: list[AnyEvent] = [GoalSet(goal="ship"), plan, UserInput("go")]
    log = [RecordedEvent("old", pos, event, f"{pos:064x}") for pos, event in enumerate(events, start=1)]
    for rec in log:
        fold_event(state, rec)
    built = build_context(state, BuildConfig(provider="anthropic", window=16_000), render=render_request)
    assert "[stuck] a: deploy again" in json.dumps(built.request)
    summary = deterministic_summary(log, state)
    assert summary.completed_steps == ("b: test",)
    assert summary.pending_steps == ("[pending] a: deploy again", "[pending] c: announce")
    assert "plan step a" not in summary.next_action  # it was the ready entry

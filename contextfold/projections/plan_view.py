"""The plan fragment's text: the current ready step, what it waits on, and what can never run.

Why a module of its own: the seed (5.1) wants the plan injected lean: only the current ready
task, its necessary dependencies and the global success conditions, never the plan's history.
Deciding what "current", "necessary" and "stuck" mean is a small graph problem (dependencies
that are unfinished, unknown or circular), separate from how the fold encodes fragments
(:mod:`contextfold.projections.fold_content` re-exports :func:`plan_text` and
:func:`current_steps`).

Pure: the text is a function of the :class:`~contextfold.domain.events.PlanUpdated` alone, and
every list in it is bounded by :data:`_LISTED` (a plan of thousands of steps stays a few hundred
tokens).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from contextfold.domain.events import PlanStep, PlanUpdated
from contextfold.domain.log import repeated_step_ids

__all__ = ["NO_PLAN", "current_steps", "plan_steps", "plan_text", "stuck_steps"]

_LISTED = 20
"""Steps of one kind (ready, failed or blocked, pending, finished), or one step's dependencies,
listed one by one; past it the rest are counted. A plan of thousands of steps (an agent working
through a list) made a required fragment of ~19,000 tokens, every finished id on one line: the run
could no longer be built under a 16k window."""

_REASON_IDS = 5
"""Ids named in one stuck step's reason (the members of its cycle, its unknown dependencies);
past it the rest are counted."""

_FINISHED = ("done", "skipped")

NO_PLAN = "No current plan: the plan has no steps."
"""The text of a plan without steps (a runtime clearing its plan). The fragment was empty: a
required plan fragment of 0 tokens, rendered as "(empty message)" on Anthropic and as empty
content on OpenAI, and the model was not told that the plan it worked to is gone. A counted line
rather than no fragment: the manifest keeps showing which event set the plan, and the model,
which may remember the old plan from its own replies, reads that it no longer holds."""

_UNKNOWN = "unknown step id"
"""A dependency on an id no step has, as the current step's dependencies show it: it was "[?]",
which did not tell the model that the plan names a step it does not have (a typo)."""


def plan_steps(event: PlanUpdated) -> tuple[PlanStep, ...]:
    """The plan's steps, one per id: a step id listed twice reads as its last entry, in the place
    of its first (as a runtime that appends a step's new state to its list means it).

    Why: the log accepted such plans until the write side refused them (``domain.log``), and each
    view read them its own way: the current steps walked the list, the stuck ones a map by id, so
    one id was shown as the current step while its other entry was stuck, or counted both done
    and pending. Every view of a plan (this module's, the compaction summary's) reads these."""
    steps = event.steps
    if len({step.id for step in steps}) == len(steps):
        return steps
    return tuple({step.id: step for step in steps}.values())


def _dependencies(step: PlanStep, status: Mapping[str, str]) -> str:
    """``step``'s dependencies with their status; past :data:`_LISTED`, the unfinished ones (what
    the step waits on) and a count of the finished."""
    if len(step.depends_on) <= _LISTED:
        return ", ".join(f"{d} [{status.get(d, _UNKNOWN)}]" for d in step.depends_on)
    waiting = [d for d in step.depends_on if status.get(d) not in _FINISHED]
    shown = ", ".join(f"{d} [{status.get(d, _UNKNOWN)}]" for d in waiting[:_LISTED])
    more = f", {len(waiting) - _LISTED} more not finished" if len(waiting) > _LISTED else ""
    finished = len(step.depends_on) - len(waiting)
    return f"{shown}{more}{', and ' if shown else ''}{finished} finished"


def current_steps(event: PlanUpdated) -> list[PlanStep]:
    """The plan's current steps: those marked ready or in progress; with none marked, the pending
    steps whose dependencies are all finished. The plan fragment shows them, and tools are ranked
    against them (an unmarked current step exposed no tool while the plan showed it)."""
    steps = plan_steps(event)
    current = [step for step in steps if step.status in ("ready", "in_progress")]
    if current:
        return current
    status = {step.id: step.status for step in steps}
    return [step for step in steps if step.status == "pending"
            and all(status.get(d) in _FINISHED for d in step.depends_on)]


def _named(ids: Sequence[str]) -> str:
    more = f" and {len(ids) - _REASON_IDS} more" if len(ids) > _REASON_IDS else ""
    return ", ".join(ids[:_REASON_IDS]) + more


def _cycles(stuck: Collection[str], deps: Mapping[str, tuple[str, ...]],
            order: Mapping[str, int]) -> dict[str, list[str]]:
    """Each stuck step on a dependency cycle -> the members of its cycle (its strongly connected
    component of two or more steps, in plan order). Iterative Tarjan: a chain of thousands of
    steps must not hit the recursion limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: dict[str, list[str]] = {}
    for root in sorted(stuck, key=order.__getitem__):
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            edges = [d for d in deps[node] if d in stuck]
            if i < len(edges):
                work.append((node, i + 1))
                nxt = edges[i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    members = sorted(component, key=order.__getitem__)
                    out.update(dict.fromkeys(members, members))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return out


def stuck_steps(event: PlanUpdated) -> dict[str, str]:
    """Pending steps that can never become ready -> why, in plan order: a step that depends on
    itself, on an id no step has (a typo), on a cycle of steps, or on such a stuck step.

    Why: with a cycle (``a`` <-> ``b``) or a typo in a dependency there is no current step, and
    the plan said only "[pending] 2 more steps (a to b), not shown until ready": no title, no
    reason, nothing the model could act on. A failed or blocked step is not stuck (it can be
    retried); it is listed on its own."""
    steps = {step.id: step for step in plan_steps(event)}
    order = {sid: i for i, sid in enumerate(steps)}
    deps = {sid: tuple(dict.fromkeys(step.depends_on)) for sid, step in steps.items()}
    unfinished = [sid for sid, step in steps.items() if step.status not in _FINISHED]
    waiting = {sid: sum(1 for d in deps[sid] if d not in steps or steps[d].status not in _FINISHED)
               for sid in unfinished}
    dependents: dict[str, list[str]] = {}
    for sid in unfinished:
        for d in deps[sid]:
            if d in steps and steps[d].status not in _FINISHED:
                dependents.setdefault(d, []).append(sid)
    # a step the runtime marked ready, in progress, failed or blocked is taken to be able to
    # finish (the runtime knows why; failed and blocked ones are listed on their own)
    ready = [sid for sid in unfinished if waiting[sid] == 0 or steps[sid].status != "pending"]
    can_run = set(ready)
    while ready:  # Kahn: every step whose dependencies can all finish can itself finish
        for sid in dependents.get(ready.pop(), ()):
            waiting[sid] -= 1
            if waiting[sid] == 0 and sid not in can_run:
                can_run.add(sid)
                ready.append(sid)
    stuck = {sid for sid in unfinished if sid not in can_run}
    cycles = _cycles(stuck, deps, order)
    reasons: dict[str, str] = {}
    for sid in sorted(stuck, key=order.__getitem__):
        why = []
        if sid in deps[sid]:
            why.append("depends on itself")
        unknown = [d for d in deps[sid] if d not in steps]
        if unknown:
            why.append(f"depends on unknown step id{'s' if len(unknown) > 1 else ''} {_named(unknown)}")
        if sid in cycles:
            why.append(f"dependency cycle among {_named(cycles[sid])}")
        if not why:
            blocked_by = [d for d in deps[sid] if d in stuck and d != sid]
            why.append(f"waits on stuck step{'s' if len(blocked_by) > 1 else ''} {_named(blocked_by)}")
        reasons[sid] = "; ".join(why)
    return reasons


def _needed(event: PlanUpdated, current: Sequence[PlanStep], skip: Collection[str]
            ) -> list[tuple[PlanStep, str]]:
    """The pending steps the current ones wait on, directly or through one another, each with the
    step that needs it: a step marked ready whose dependency is unfinished showed "depends on:
    migrate [pending]" and hid what ``migrate`` is."""
    steps = {step.id: step for step in plan_steps(event)}
    seen = {step.id for step in current} | set(skip)
    out: list[tuple[PlanStep, str]] = []
    queue = list(current)
    for step in queue:  # breadth first: the direct dependencies before theirs
        for d in step.depends_on:
            dep = steps.get(d)
            if dep is None or d in seen or dep.status != "pending":
                continue
            seen.add(d)
            out.append((dep, step.id))
            queue.append(dep)
    return out


def plan_text(event: PlanUpdated) -> str:
    """The plan, lean: what to do now and what it waits on, not the plan's whole history.

    Ready and in-progress steps come first with their dependencies (and those
    dependencies' status; with none marked ready, the pending steps whose dependencies are all
    finished), then the pending steps they wait on (with their titles: what the current step
    needs), then the failed/blocked ones (they need attention), then the steps that can never
    become ready and why (a cycle, an unknown or self dependency: :func:`stuck_steps`); the other
    pending steps are counted, not listed (the seed: only the ready task, its dependencies and
    the global success conditions); finished steps collapse into one line of ids, the skipped
    into another. Budget and stop conditions close it. The global success conditions
    live in the goal's success contract fragment. Each kind lists at most
    :data:`_LISTED` steps and counts the rest (the finished: the latest ones).
    A plan without steps says so (:data:`NO_PLAN`); one that lists a step id twice is read as
    :func:`plan_steps` reads it, and says so.
    """
    steps_once = plan_steps(event)
    status = {step.id: step.status for step in steps_once}
    lines: list[str] = [] if steps_once else [NO_PLAN]
    pending = [step for step in steps_once if step.status == "pending"]
    current = current_steps(event)
    stuck = stuck_steps(event)
    shown = {step.id for step in current}
    stuck_shown = [step for step in pending if step.id in stuck and step.id not in shown]
    needed = _needed(event, current, {step.id for step in stuck_shown})
    for steps, kind in ((current, "ready or in progress"),
                        ([step for step in steps_once if step.status in ("failed", "blocked")],
                         "failed or blocked")):
        for step in steps[:_LISTED]:
            deps = _dependencies(step, status)
            after = f" (depends on: {deps})" if deps else ""
            lines.append(f"[{step.status}] {step.id}: {step.title}{after}")
        if len(steps) > _LISTED:
            lines.append(f"... {len(steps) - _LISTED} more {kind} steps "
                         f"({steps[_LISTED].id} to {steps[-1].id})")
        if steps is current:  # what the current steps wait on, right after them
            lines.extend(f"[pending] {step.id}: {step.title} (needed by {by})"
                         for step, by in needed[:_LISTED])
            if len(needed) > _LISTED:
                lines.append(f"... {len(needed) - _LISTED} more pending steps the current ones "
                             f"wait on ({needed[_LISTED][0].id} to {needed[-1][0].id})")
    lines.extend(f"[stuck] {step.id}: {step.title} (never ready: {stuck[step.id]})"
                 for step in stuck_shown[:_LISTED])
    if len(stuck_shown) > _LISTED:
        lines.append(f"... {len(stuck_shown) - _LISTED} more stuck steps "
                     f"({stuck_shown[_LISTED].id} to {stuck_shown[-1].id})")
    shown.update(step.id for step, _ in needed)
    shown.update(step.id for step in stuck_shown)
    waiting = [step for step in pending if step.id not in shown]
    if waiting:  # the seed: only the ready task, its dependencies and the success conditions
        lines.append(f"[pending] {len(waiting)} more step{'s' if len(waiting) != 1 else ''} "
                     f"({waiting[0].id}{f' to {waiting[-1].id}' if len(waiting) > 1 else ''}), "
                     "not shown until ready")
    for finished_as in _FINISHED:  # a skipped step did not run: not listed as done
        finished = [s.id for s in steps_once if s.status == finished_as]
        if len(finished) > _LISTED:
            lines.append(f"[{finished_as}] {len(finished)} of {len(steps_once)} steps; the latest "
                         f"{_LISTED}: {', '.join(finished[-_LISTED:])}")
        elif finished:
            lines.append(f"[{finished_as}] {', '.join(finished)} "
                         f"({len(finished)} of {len(steps_once)} steps)")
    if len(steps_once) < len(event.steps):  # an old log's plan: the model may remember the other entry
        repeated = repeated_step_ids(event)
        lines.append(f"(step id{'s' if len(repeated) > 1 else ''} {_named(repeated)} listed more than "
                     "once: each read as its last entry)")
    if event.budget:
        lines.append(f"budget: {event.budget}")
    lines.extend(f"stop when: {c}" for c in event.stop_conditions)
    return "\n".join(lines)

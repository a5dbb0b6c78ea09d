"""Property tests: random valid runs keep the projected history protocol-complete.

A simulated agent runtime appends random events (parallel calls, results in
any order, cancellations, lost results, late results, call ids re-used across
turns, hand-offs, legal compactions). Before each model response it does what
the API layer does: append ``recovery_events(state, in_flight="cancel")``.
At every turn the projected history must satisfy the pairing rules; folding
from zero must equal the incremental fold; replay(N) must be deterministic and
equal the live snapshot.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.domain.errors import CompactionError
from contextfold.domain.events import (
    AnyEvent,
    CompactionSummary,
    FileRead,
    HandOff,
    HistoryCompacted,
    ModelResponse,
    PlanStep,
    PlanUpdated,
    ToolCall,
    ToolResult,
    ToolResultLost,
    UserInput,
    canonical_json,
)
from contextfold.domain.fragments import ToolResultBlock
from contextfold.domain.log import GENESIS_HASH, RecordedEvent, chain_hash
from contextfold.projections.fold import fold, fold_event, new_state
from contextfold.projections.past_states import state_at_turn
from contextfold.projections.repair import check_compaction_cover, recovery_events
from contextfold.projections.state import RunState, TimelineItem, TimelineMark, ToolGroup

RUN = "prop-run"
CALL_IDS = ("c0", "c1", "c2", "c3")  # a small pool forces re-use across turns


@dataclass
class Sim:
    state: RunState = field(default_factory=lambda: new_state(RUN))
    records: list[RecordedEvent] = field(default_factory=list)
    turn_snapshots: list[RunState] = field(default_factory=list)
    last_timeline: tuple[TimelineItem, ...] = ()
    last_mark: TimelineMark | None = None
    older_timeline: tuple[TimelineItem, ...] | None = None

    def append(self, event: AnyEvent) -> None:
        if isinstance(event, ModelResponse):
            self.turn_snapshots.append(self.state.snapshot())
        prev = self.records[-1].hash if self.records else GENESIS_HASH
        pos = len(self.records) + 1
        rec = RecordedEvent(RUN, pos, event, chain_hash(RUN, pos, prev, canonical_json(event)))
        self.records.append(rec)
        fold_event(self.state, rec)
        if pos % 2 == 0:  # a build's read of the live list between snapshots brings it up to date
            self.state.live_timeline()
        if pos % 3 == 0:  # now and then, so the timeline catches up over one step or several
            self.check_timeline()

    def check_timeline(self) -> None:
        """The incrementally kept timeline holds exactly the items a fresh index lists, and
        the changes it reports since the last one it made are exactly the replaced items."""
        before = self.last_timeline
        if self.older_timeline is not None:  # what changed between the last two snapshots, asked
            older = self.older_timeline       # again after later steps brought the list further
            changes = self.state.timeline_changes(older, before)
            if changes is not None:
                assert changes == [i for i in range(min(len(older), len(before)))
                                   if older[i] is not before[i]]
        after = self.state.timeline()
        fresh = self.state.snapshot().timeline()  # a snapshot starts without memo: a new index
        assert len(after) == len(fresh) and all(map(operator.is_, after, fresh))
        changes = self.state.timeline_changes(before, after)
        if changes is not None:
            assert sorted(changes) == [i for i in range(min(len(before), len(after)))
                                       if before[i] is not after[i]]
        # The builder's view: the live list, and what was replaced since its last mark.
        live, mark = self.state.live_timeline()
        assert len(live) == len(after) and all(map(operator.is_, live, after))
        if self.last_mark is not None:
            since = self.state.timeline_changes_since(self.last_mark)
            if since is not None:
                replaced = [i for i in range(min(len(before), len(after))) if before[i] is not after[i]]
                assert [i for i in since if i < len(before)] == replaced
        self.older_timeline, self.last_timeline, self.last_mark = before, after, mark

    def repair(self) -> None:
        events = recovery_events(self.state, in_flight="cancel")
        for e in events:
            self.append(e)
        assert recovery_events(self.state, in_flight="cancel") == []


def check_pairing(state: RunState, *, complete: bool) -> None:
    """The projected history as a renderer lays it out obeys the pairing rules."""
    frags = {f.id: f for f in state.fragments()}
    ids = state.current_ids()
    answer_owner: dict[str, str] = {}
    for item in state.timeline():
        if not isinstance(item, ToolGroup):
            continue
        call_ids = [c.call_id for c in item.calls]
        assert len(call_ids) == len(set(call_ids))
        for slot in item.calls:
            if slot.answer_id is None:
                assert not complete, f"call {slot.call_id} unanswered at a turn"
                continue
            assert slot.answer_id not in answer_owner
            answer_owner[slot.answer_id] = item.group_id
            block = frags[slot.answer_id].content[0]
            assert isinstance(block, ToolResultBlock) and block.call_id == slot.call_id
            assert block.status == slot.status
        # the group's answers come right after its call fragment, in call order
        start = ids.index(item.fragment_id)
        answers = [c.answer_id for c in item.calls if c.answer_id]
        assert list(ids[start + 1:start + 1 + len(answers)]) == answers
    # every tool_result fragment answers exactly one call of a visible group
    results = {fid for fid, f in frags.items() if f.kind == "tool_result"}
    assert results == set(answer_owner)
    if complete:
        assert state.open_calls() == {}


@st.composite
def runs(draw: st.DrawFn) -> Sim:
    sim = Sim()
    sim.append(UserInput("start"))
    steps = draw(st.integers(min_value=1, max_value=30))
    for step in range(steps):
        state = sim.state
        open_ids = list(state.pairing.open)
        late_ok = [c for c in state.pairing.recovered if c not in state.pairing.late]
        action = draw(st.sampled_from(
            ["respond", "respond", "result", "result", "result", "lost", "late", "user",
             "hand_off", "compact", "plan", "file"]))
        if action == "respond":
            sim.repair()
            free = [c for c in CALL_IDS if c not in sim.state.pairing.open]
            n = draw(st.integers(min_value=0, max_value=min(3, len(free))))
            chosen = draw(st.permutations(free))[:n]
            sim.append(ModelResponse(text=f"turn {step}", tool_calls=tuple(
                ToolCall(call_id=c, name=f"tool_{c}", arguments=f'{{"i": {step}}}')
                for c in chosen)))
        elif action == "result" and open_ids:
            cid = draw(st.sampled_from(open_ids))
            sim.append(ToolResult(call_id=cid, content=f"out {step}",
                                  is_error=draw(st.booleans()),
                                  origin=draw(st.sampled_from(["workspace", "external"]))))
        elif action == "lost" and open_ids:
            cid = draw(st.sampled_from(open_ids))
            sim.append(ToolResultLost(call_id=cid, reason="timeout",
                                      call_position=state.pairing.open[cid]))
        elif action == "late" and late_ok:
            sim.append(ToolResult(call_id=draw(st.sampled_from(late_ok)), content="late"))
        elif action == "user":
            sim.append(UserInput(f"user {step}", required=draw(st.booleans())))
        elif action == "hand_off":
            sim.append(HandOff(from_agent="a", to_agent="b",
                               note=draw(st.sampled_from(["", "carry on"]))))
        elif action == "compact" and state.version >= 2:
            lo = draw(st.integers(min_value=1, max_value=state.version))
            hi = draw(st.integers(min_value=lo, max_value=state.version))
            try:
                check_compaction_cover(state, lo, hi)
            except CompactionError:
                continue
            sim.append(HistoryCompacted(summary=CompactionSummary(goal="g"),
                                        covers_from=lo, covers_to=hi))
        elif action == "plan":
            sim.append(PlanUpdated(steps=(PlanStep(id="s", title=f"step {step}"),)))
        elif action == "file":
            sim.append(FileRead(path=draw(st.sampled_from(["a.py", "b.py"])),
                                content=f"v{step}", revision=f"r{step}"))
        check_pairing(sim.state, complete=False)
    return sim


SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(runs())
def test_pairing_holds_at_every_turn(sim: Sim) -> None:
    for snap in sim.turn_snapshots:
        check_pairing(snap, complete=True)


@SETTINGS
@given(runs())
def test_fold_from_zero_equals_incremental(sim: Sim) -> None:
    assert fold(sim.records).canonical() == sim.state.canonical()
    # catching up from any midpoint gives the same state
    mid = len(sim.records) // 2
    resumed = fold(sim.records[:mid]) if mid else new_state(RUN)
    assert fold(sim.records, resumed).fingerprint() == sim.state.fingerprint()


@SETTINGS
@given(runs())
def test_replay_of_every_turn_is_deterministic_and_equals_live(sim: Sim) -> None:
    for n, snap in enumerate(sim.turn_snapshots, start=1):
        replay = state_at_turn(sim.records, n)
        assert replay.canonical() == snap.canonical()
        assert state_at_turn(sim.records, n).fingerprint() == replay.fingerprint()


@SETTINGS
@given(runs())
def test_late_results_never_answer_twice(sim: Sim) -> None:
    state = sim.state
    answered: dict[tuple[int, str], int] = {}
    for item in state.items.values():
        if isinstance(item, ToolGroup):
            for slot in item.calls:
                if slot.answer_id:
                    answered[(item.position, slot.call_id)] = (
                        answered.get((item.position, slot.call_id), 0) + 1)
    assert all(v == 1 for v in answered.values())
    notes = [f for f in state.fragments() if f.kind == "history"
             and f.content and getattr(f.content[0], "text", "").startswith("late result")]
    assert all(f.trust in ("workspace", "external") for f in notes)


@SETTINGS
@given(runs(), st.integers(min_value=200, max_value=3_000))
def test_a_budget_keeps_the_order_within_each_layer(sim: Sim, window: int) -> None:
    """The selection promise "order within a layer preserved": what a smaller budget keeps of a
    layer is shown in the order the whole layer is shown in (the order of the log), whatever was
    cut or left out between."""
    from hypothesis import assume

    from contextfold.api import render_request
    from contextfold.domain.errors import RequiredContextExceedsBudgetError
    from contextfold.domain.manifest import BuildConfig
    from contextfold.projections.builder import build_context

    assume(sim.turn_snapshots)
    state = sim.turn_snapshots[-1]
    whole = build_context(state, BuildConfig(window=1_000_000, reserve=0), render=render_request).manifest
    try:
        part = build_context(state, BuildConfig(window=window, reserve=0), render=render_request).manifest
    except RequiredContextExceedsBudgetError:
        assume(False)
        return
    for layer in {f.layer for f in part.fragments}:
        kept = [f.id for f in part.fragments if f.layer == layer]
        assert [f.id for f in whole.fragments if f.layer == layer and f.id in kept] == kept, layer

"""The audit answers how cost, repeated calls and failures change around a compaction (the seed's
section 9): the turns before and after each compaction side by side."""

from __future__ import annotations

import json
from pathlib import Path

from contextfold.api import Run, open_store
from contextfold.audit.data import audit_run
from contextfold.audit.effects import describe
from contextfold.domain.events import (
    HistoryCompacted,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    UserInput,
)

NOISE = "\n".join(f"{i:04d} INFO compiling module_{i}.rs" for i in range(80))


def _turn(run: Run, call_id: str, name: str, arguments: str, *, exit_code: int = 0) -> None:
    """A build of the next request, then the model's call and its result."""
    run.build(window=64_000, reserve=1_000)
    run.append(ModelResponse(tool_calls=(ToolCall(call_id=call_id, name=name, arguments=arguments),)),
               ToolResult(call_id=call_id, content=NOISE, exit_code=exit_code))


def test_turns_before_and_after_a_compaction_side_by_side(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r")
        run.append(PolicySet(text="Never force-push."), UserInput("Make the build pass."))
        _turn(run, "c1", "cargo", '{"cmd": "build", "jobs": 2}')
        _turn(run, "c2", "cargo", '{"cmd": "test"}', exit_code=101)
        _turn(run, "c3", "cat", '{"path": "Cargo.toml"}')
        run.compact("mask", keep_recent=2)  # a ladder: two compactions, no turn built between
        run.compact("summary", keep_recent=1)  # (a summary that saves nothing is not appended)
        # after it the model runs the build again: the same call, its keys in another order
        _turn(run, "c4", "cargo", '{ "jobs": 2, "cmd": "build" }')
        _turn(run, "c5", "cargo", '{"cmd": "test"}', exit_code=101)
        _turn(run, "c6", "cargo", '{"cmd": "clippy"}')
        audit = audit_run(run)
        compactions = [r.position for r in run.events() if isinstance(r.event, HistoryCompacted)]
    assert len(compactions) == 2
    [effect] = audit.compaction_effects  # logged together: one change for the turns around it
    assert effect.positions == tuple(compactions) and effect.strategies == ("mask", "summary")
    before, after = effect.before, effect.after
    assert before.turns == (1, 2, 3) and after.turns == (4, 5, 6)
    assert (before.calls, before.repeated_calls, before.results, before.failed_results) == (3, 0, 3, 1)
    assert (after.calls, after.repeated_calls, after.results, after.failed_results) == (3, 2, 3, 1)
    by_turn = {t.turn: t.manifest.selected_tokens for t in audit.turns}
    assert before.mean_selected_tokens == round(sum(by_turn[t] for t in (1, 2, 3)) / 3, 1)
    assert after.mean_selected_tokens == round(sum(by_turn[t] for t in (4, 5, 6)) / 3, 1)
    assert after.mean_selected_tokens is not None and before.mean_selected_tokens is not None
    line = describe(effect)
    assert line.startswith(f"at {compactions[0]}, {compactions[1]} (mask, summary): turns 1-3 -> turns 4-6:")
    assert "repeated calls 0 of 3 -> 2 of 3; failed results 1 of 3 -> 1 of 3" in line


def test_a_compaction_with_no_turn_after_it_yet(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r")
        run.append(UserInput("go"))
        for i in range(3):
            _turn(run, f"c{i}", "cargo", "{bad")  # arguments that are not JSON compare verbatim
        run.compact("mask", keep_recent=1)
        effect = audit_run(run, rebuild_missing=False).compaction_effects[0]
    assert effect.before.turns == (1, 2, 3) and effect.before.repeated_calls == 2
    assert effect.after.turns == () and effect.after.mean_selected_tokens is None
    assert "turns 1-3 -> no turn: tokens per request" in describe(effect)
    assert json.loads(effect.model_dump_json())["after"]["calls"] == 0


def test_no_compaction_no_effects(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r")
        run.append(UserInput("go"))
        _turn(run, "c1", "ls", "{}")
        assert audit_run(run).compaction_effects == ()


def test_a_calls_identity_is_its_arguments_as_the_renderers_take_them() -> None:
    """Arguments 3,000 levels deep ended the audit with a RecursionError; 1e400 and 1e401, both
    Infinity to Python's parser, were counted as the same call repeated."""
    from contextfold.audit.effects import _call_key

    deep = "[" * 3_000 + "]" * 3_000
    assert _call_key("t", deep) == ("t", deep)
    assert _call_key("t", '{"a": 1e400}') != _call_key("t", '{"a": 1e401}')
    assert _call_key("t", '{"b": 1, "a": 2}') == _call_key("t", '{"a":2,"b":1}')


def test_a_turn_built_again_after_a_compaction_is_on_both_sides(tmp_path: Path) -> None:
    """Built, compacted because it did not fit, built again, answered: the audit read each turn's
    first record only, so the effect said "-> no turn" (and, with later turns, left out the
    request the compaction changed). The rebuild is the request after it; the turn's calls are
    counted once, with the request its response answered."""
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r")
        run.append(PolicySet(text="Never force-push."), UserInput("Make the build pass."))
        _turn(run, "c1", "cargo", '{"cmd": "build"}', exit_code=101)
        _turn(run, "c2", "cargo", '{"cmd": "test"}', exit_code=101)
        first = run.build(window=64_000, reserve=1_000)  # turn 3
        run.compact("mask", keep_recent=1)
        again = run.build(window=64_000, reserve=1_000)  # turn 3 again, from the compacted log
        call = ToolCall(call_id="c3", name="cargo", arguments='{"cmd": "build"}')
        run.append(ModelResponse(tool_calls=(call,)), ToolResult(call_id="c3", content=NOISE, exit_code=101))
        audit = audit_run(run)
    assert first.manifest.turn == again.manifest.turn == 3
    assert again.manifest.selected_tokens < first.manifest.selected_tokens
    [effect] = audit.compaction_effects
    before, after = effect.before, effect.after
    assert before.turns == (1, 2, 3) and after.turns == (3,)
    by_turn = {t.turn: t.manifest.selected_tokens for t in audit.turns}
    assert by_turn[3] == first.manifest.selected_tokens  # the audit's turn 3 is still its first record
    assert before.mean_selected_tokens == round((by_turn[1] + by_turn[2] + by_turn[3]) / 3, 1)
    assert after.mean_selected_tokens == again.manifest.selected_tokens
    assert (before.calls, before.results, before.failed_results) == (2, 2, 2)  # turn 3's call: after
    assert (after.calls, after.repeated_calls, after.results, after.failed_results) == (1, 1, 1, 1)
    assert describe(effect).startswith(f"at {effect.positions[0]} (mask): turns 1-3 -> turn 3: ")


def test_compactions_with_a_rebuild_between_them_are_two_changes() -> None:
    """Two compactions are one change only when no request was built between them: a rebuild of
    the same turn between them (same turns on each side) is a request of its own."""
    from contextfold.audit.effects import Build, compaction_effects
    from contextfold.domain.events import CompactionSummary
    from contextfold.domain.log import RecordedEvent

    def at(position: int, event: object) -> RecordedEvent:
        return RecordedEvent("r", position, event, "0" * 64)  # type: ignore[arg-type]

    mask = HistoryCompacted(summary=CompactionSummary(), covers_from=1, covers_to=1, strategy="mask")
    events = [at(1, UserInput("go")), at(2, mask), at(3, mask.model_copy(update={"strategy": "summary"})),
              at(4, mask)]
    # turn 1 built at each step (the last: a replay's record of the first build, the same request)
    builds = [Build(1, 1, 900), Build(1, 3, 500), Build(1, 4, 300), Build(1, 1, 900)]
    first, second = compaction_effects(events, builds)
    assert (first.positions, first.strategies) == ((2, 3), ("mask", "summary"))  # nothing built between
    assert first.before.turns == first.after.turns == second.before.turns == second.after.turns == (1,)
    assert (first.before.mean_selected_tokens, first.after.mean_selected_tokens) == (900, 500)
    assert second.positions == (4,)  # not merged into the first: the same turns, another request
    assert (second.before.mean_selected_tokens, second.after.mean_selected_tokens) == (500, 300)

"""``TimelineUnits.touched_since``: the units derived afresh after a generation, from its log."""

from __future__ import annotations

from contextfold.projections.timeline_units import _LOG_LENGTH, TimelineUnits


def _logged(generations: int) -> TimelineUnits:
    """Rows whose log holds ``generations`` updates, each touching its own unit and a shared one
    (past ``_LOG_LENGTH`` the oldest have left the log)."""
    tu = TimelineUnits()
    for gen in range(1, generations + 1):
        tu.generation = gen
        tu.log.append((gen, frozenset({f"u{gen}", "shared"} if gen % 3 else {f"u{gen}"})))
    return tu


def _by_definition(tu: TimelineUnits, generation: int) -> set[str] | None:
    if generation == tu.generation:
        return set()
    if not tu.log or tu.log[0][0] > generation + 1:
        return None
    return {uid for gen, ids in tu.log if gen > generation for uid in ids}


def test_touched_since_is_every_later_update_and_none_past_the_log() -> None:
    """Every generation from before the log's reach to the newest, on a log that is short,
    full and wrapped: the ids of the updates after it (the newest back to it, not the newest
    alone), or None once the log no longer reaches back to it."""
    for generations in (0, 1, 2, 5, _LOG_LENGTH, _LOG_LENGTH + 1, 3 * _LOG_LENGTH + 7):
        tu = _logged(generations)
        for generation in range(generations + 1):
            assert tu.touched_since(generation) == _by_definition(tu, generation), (generations, generation)
    tu = _logged(_LOG_LENGTH + 10)
    newest_three = {f"u{g}" for g in range(tu.generation - 2, tu.generation + 1)}
    assert tu.touched_since(tu.generation - 3) == newest_three | {"shared"}
    assert tu.touched_since(tu.generation - _LOG_LENGTH - 1) is None  # left the log
    assert tu.touched_since(tu.generation - _LOG_LENGTH) is not None  # its next update is the oldest kept


def test_touched_since_gives_a_set_the_caller_may_edit() -> None:
    """A caller adds to the set it gets (``exclusions.dropped_lines``): the log's own sets stay."""
    tu = _logged(4)
    got = tu.touched_since(3)
    assert got == {"u4", "shared"}
    assert got is not None
    got.add("other")
    assert tu.touched_since(3) == {"u4", "shared"}
    assert tu.log[-1][1] == frozenset({"u4", "shared"})

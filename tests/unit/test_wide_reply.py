"""A reply with many parallel calls: folded and built in work linear in its calls, and the group's
versions (one per answer) stay the values they were (a performance hunt found 8,000 calls
costing 4.5 s of CPU to fold and 3.3 s to build: each answer scanned its group's slots).

No timings: the reads of the slots' call ids and answer positions, and the slots handed to new
groups, are counted.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.api import render_request
from contextfold.domain.events import AnyEvent, ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold
from contextfold.projections.state import CallSlot, ToolGroup
from tests.unit.test_builder import recorded

CALLS = 1_000


def _wide_reply(n: int) -> list[AnyEvent]:
    events: list[AnyEvent] = [
        UserInput(f"check all {n} shards"),
        ModelResponse(tool_calls=tuple(ToolCall(call_id=f"call_{i}", name="check_shard",
                                                arguments=f'{{"shard": {i}}}') for i in range(n)))]
    events += [ToolResult(call_id=f"call_{i}", content=f"shard {i} of {n}: healthy",
                          is_error=i % 97 == 0, exit_code=1 if i % 97 == 0 else 0) for i in range(n)]
    return events


class _Counts:
    """``reads``: reads of a slot's call id or answer position; ``slots_made``: slots handed to
    new groups (each answer made a new group of every slot before)."""

    def __init__(self) -> None:
        self.reads = self.slots_made = 0


class _CountedReads:
    """A slot field that counts the reads of it (a data descriptor in front of the slot's own)."""

    def __init__(self, field: Any, counts: _Counts) -> None:
        self.field, self.counts = field, counts

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return self
        self.counts.reads += 1
        return self.field.__get__(obj, owner)

    def __set__(self, obj: object, value: object) -> None:
        self.field.__set__(obj, value)


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> _Counts:
    out = _Counts()
    for name in ("call_id", "answer_position"):
        monkeypatch.setattr(CallSlot, name, _CountedReads(CallSlot.__dict__[name], out))
    init = ToolGroup.__init__

    def counted_init(self: ToolGroup, position: int, fragment_id: str, calls: tuple[CallSlot, ...],
                     *rest: Any) -> None:
        out.slots_made += len(calls)
        init(self, position, fragment_id, calls, *rest)

    monkeypatch.setattr(ToolGroup, "__init__", counted_init)
    return out


def test_a_wide_reply_is_folded_reading_each_slot_a_bounded_number_of_times(counts: _Counts) -> None:
    """Each answer found its slot by scanning the group and made a new group of every slot:
    n * n / 2 reads and n * n slots (500,000 and 1,000,000 here)."""
    state = fold(recorded(_wide_reply(CALLS)))
    assert counts.reads <= 10 * CALLS
    assert counts.slots_made <= 2 * CALLS
    (group,) = state.groups()
    assert [c.status for c in group.calls] == ["error" if i % 97 == 0 else "ok" for i in range(CALLS)]
    assert [c.answer_position for c in group.calls] == list(range(3, CALLS + 3))


def test_a_wide_reply_is_built_reading_each_slot_a_bounded_number_of_times(counts: _Counts) -> None:
    """The builder found each answer's slot by scanning its group twice (its call id's tokens,
    the latest error): n * n reads per build (2.5 million for these two)."""
    state = fold(recorded(_wide_reply(CALLS)))
    counts.reads = 0
    for provider in ("openai-chat", "anthropic"):
        built = build_context(state, BuildConfig(provider=provider, window=1_000_000, reserve=8_000),
                              render=render_request)
        assert len(built.manifest.fragments) == CALLS + 2
    assert counts.reads <= 10 * CALLS
    assert state.latest_error_ids() == frozenset()  # the newest group holds it: required whole


def _group(state: Any) -> ToolGroup:
    group = state.items[2]
    assert isinstance(group, ToolGroup)
    return group


def test_a_group_version_keeps_its_slots_while_later_answers_come() -> None:
    records = recorded(_wide_reply(4))
    state = fold(records[:3])
    held, snap = _group(state), state.snapshot()
    fold(records, state)
    assert [c.status for c in held.calls] == ["error", "open", "open", "open"]
    assert held.slot("call_1") == CallSlot("call_1", "check_shard")
    assert held.answered_at(3) == held.calls[0] and held.answered_at(4) is None
    assert _group(snap) is held and snap.fingerprint() == fold(records[:3]).fingerprint()
    assert [c.status for c in _group(state).calls] == ["error", "ok", "ok", "ok"]
    assert _group(state).answered_at(5) == _group(state).calls[2]
    assert _group(state).slot("call_9") is None


def test_a_snapshot_folded_on_apart_from_its_state_keeps_its_own_answers() -> None:
    """A snapshot answers its calls apart from the state it was taken of (a past version of the
    group answered again): neither sees the other's answers."""
    ours, theirs = _wide_reply(4), _wide_reply(4)
    theirs[3:] = [ToolResult(call_id=f"call_{i}", content=f"other {i}") for i in (3, 2, 1)]
    state = fold(recorded(ours[:3]))
    snap = state.snapshot()
    fold(recorded(ours), state)
    fold(recorded(theirs), snap)
    assert state.fingerprint() == fold(recorded(ours)).fingerprint()
    assert snap.fingerprint() == fold(recorded(theirs)).fingerprint()
    assert [c.answer_position for c in _group(snap).calls] == [3, 6, 5, 4]
    assert _group(snap).answered_at(4) == _group(snap).calls[3]
    assert _group(state) == _group(fold(recorded(ours)))
    assert _group(state) != _group(snap)


def test_a_group_version_is_the_value_a_group_of_its_slots_is() -> None:
    state = fold(recorded(_wide_reply(3)))
    group = _group(state)
    made = ToolGroup(2, "e2", group.calls)
    assert group == made and hash(group) == hash(made) and repr(group) == repr(made)
    assert made.answered(made.calls[0]) == made
    with pytest.raises(AttributeError):
        group.__setattr__("position", 3)

"""A request body is joined and hashed again unless it is the last one's members again
(``request_json.canonical_body``); whichever way, its bytes are ``canonical_bytes``'s."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.api import render_request
from contextfold.domain.events import UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event
from contextfold.projections.request_json import bytes_hash, canonical_body, canonical_bytes, remember
from tests.unit.test_kept_rows import _state_of


def _check(request: dict[str, Any], last: tuple[Any, ...] | None) -> tuple[bytes, tuple[Any, ...] | None]:
    body, digest, memo = canonical_body(request, last)
    assert body == canonical_bytes(request) and digest == bytes_hash(body)
    return body, memo


def test_the_same_members_give_the_same_body_and_anything_else_a_new_one() -> None:
    a, b, c = (remember({"role": "user", "content": f"m{i}"}) for i in range(3))
    request: dict[str, Any] = {"model": "m", "messages": [a, b], "max_tokens": 10, "stream": False}
    body, memo = _check(request, None)
    assert memo is not None
    # a new dict and new lists holding the same remembered dicts: the same bytes object
    again, memo2 = _check({"stream": False, "max_tokens": 10, "messages": [a, b], "model": "m"}, memo)
    assert again is body and memo2 is memo
    for other in ({**request, "messages": [a, b, c]}, {**request, "messages": [b, a]},
                  {**request, "messages": [a, remember({"role": "user", "content": "m1"})]},
                  {**request, "max_tokens": 11}, {**request, "stream": 0}, {**request, "model": "n"},
                  {**request, "extra": 1}, {k: v for k, v in request.items() if k != "stream"},
                  {**request, "messages": "text"}):
        changed, _ = _check(other, memo)
        assert changed is not body, other
    # members that are not plain scalars or lists of remembered dicts: never taken again
    # (-0.0 == 0.0, yet they are written apart)
    for member in ({"a": 1}, [{"role": "user"}], [a, {"role": "user"}], 0.5, -0.0):
        assert _check({**request, "x": member}, None)[1] is None


def test_a_rebuild_with_nothing_new_hands_out_the_same_body() -> None:
    """Nothing new: the openai body is the last one's bytes object (not joined nor hashed
    again); a new event gives a new body, equal to a fresh state's."""
    state, events = _state_of(cut=True)
    config = BuildConfig(provider="openai-chat", window=1_200, reserve=200)
    first = build_context(state, config, render=render_request)
    assert first.manifest.truncations  # the cut unit's messages are kept too (layout)
    again = build_context(state, config, render=render_request)
    assert again.body_bytes is first.body_bytes
    assert again.manifest.request_hash == first.manifest.request_hash == bytes_hash(first.body_bytes)
    neutral = build_context(state, BuildConfig(provider="neutral", window=1_200, reserve=200))
    assert neutral.body_bytes != first.body_bytes
    assert build_context(state, config, render=render_request).body_bytes is first.body_bytes
    fold_event(state, RecordedEvent("run", len(events) + 1, UserInput("one more step"), ""))
    moved = build_context(state, config, render=render_request)
    assert moved.body_bytes != first.body_bytes
    assert moved.body_bytes == build_context(state.snapshot(), config, render=render_request).body_bytes


_POOL = [remember({"role": "user", "content": f"message {i} " + "é" * (i % 3), "n": i}) for i in range(12)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "messages": st.lists(st.one_of(st.sampled_from(_POOL), st.builds(
        lambda i: {"role": "tool", "content": str(i)}, st.integers(0, 3))), max_size=14),
    "tools": st.lists(st.sampled_from(_POOL[:4]), max_size=3),
    "model": st.sampled_from(["m", "n"])}), min_size=1, max_size=6))
def test_bodies_taken_again_or_made_equal_canonical_bytes(requests: list[dict[str, Any]]) -> None:
    """Whatever the sequence of bodies (items kept, moved, repeated, dropped, new, or dicts that
    are not remembered, never taken as the same), each is ``canonical_bytes``'s."""
    memo: tuple[Any, ...] | None = None
    for request in requests:
        _, memo = _check(request, memo)

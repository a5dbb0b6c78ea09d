"""The last build's kept rows, patched by the units that entered, left or changed, are exactly
what gathering and sorting every kept unit's rows gives (``kept_rows``, ``finish_build``)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.api import render_request
from contextfold.domain.events import AnyEvent, ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig
from contextfold.projections import finish_build, kept_rows
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.projections.kept_rows import KeptRows, Row, RowsEntry
from contextfold.projections.state import RunState
from tests.unit.test_build_cache import CONFIGS, _events, _outcome


def _state_of(cut: bool) -> tuple[RunState, list[AnyEvent]]:
    """A run of tool steps folded: with ``cut``, results long enough that a 1,000-token budget
    cuts one; else short ones."""
    events: list[AnyEvent] = [PolicySet(text="Be careful.")]
    for r in range(8 if cut else 20):
        output = ("\n".join(f"row {r}.{i} ok" for i in range(90)) if cut
                  else f"run {r}\n" + "line\n" * 20)
        events += [UserInput(f"step {r}: check the queue"),
                   ModelResponse(text="", tool_calls=(ToolCall(call_id=f"c{r}", name="run"),)),
                   ToolResult(call_id=f"c{r}", content=output), ModelResponse(text=f"done {r}")]
    state = new_state("run")
    for pos, event in enumerate(events, start=1):
        fold_event(state, RecordedEvent("run", pos, event, ""))
    return state, events


def _entry(uid: int, fids: list[int], layer_of: dict[int, int], version: int) -> RowsEntry:
    """A unit's entry: one row per fragment id, with fresh objects standing for its view and line."""
    rows: list[Row] = [(layer_of[f], f * 3 % 1000, f"f{f:04d}", cast(Any, ("view", f, version)),
                        cast(Any, ("line", f, version)), f * 7 % 50, f % 3) for f in fids]
    return (cast(Any, ("unit", uid, version)), rows)


def _state(k: KeptRows) -> tuple[object, ...]:
    return (k.rows, k.lines, k.views, k.row_of, {n: v for n, v in k.tokens.items() if v},
            {n: v for n, v in k.overhead.items() if v}, k.fragments(), k.view_tuple(), k.entries)


# Each step: the units kept (each unit owns fragments uid*4 .. uid*4+size) and which are re-made.
_STEP = st.lists(st.tuples(st.integers(0, 60), st.integers(1, 4), st.booleans()), max_size=40)


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=8), layers=st.lists(st.integers(1, 8), min_size=244,
                                                                      max_size=244),
       in_place=st.sampled_from([0, 4, 32, 10_000]))
def test_patched_rows_equal_gathered_and_sorted_ones(steps: list[list[tuple[int, int, bool]]],
                                                     layers: list[int], in_place: int) -> None:
    """Whatever the sequence of builds (units entering, leaving, re-made with the same fragments
    or other ones), patching the last rows gives the gathered and sorted rows, the same lines,
    views, per-fragment rows and layer sums; in place or by slices."""
    old_in_place = kept_rows._IN_PLACE
    kept_rows._IN_PLACE = in_place  # (hypothesis runs many examples per test: no monkeypatch fixture)
    try:
        layer_of = dict(enumerate(layers))
        current: dict[str, RowsEntry] = {}
        patched: KeptRows | None = None
        for version, step in enumerate(steps):
            wanted: dict[str, RowsEntry] = {}
            for uid, size, remake in step:
                key = f"u{uid}"
                old = current.get(key)
                if old is not None and not remake:
                    wanted[key] = old
                else:
                    wanted[key] = _entry(uid, list(range(uid * 4, uid * 4 + size)), layer_of, version)
            if patched is None:
                patched = KeptRows(dict(wanted))
            else:
                gone = [u for u in patched.entries if u not in wanted]
                changed = {u: e for u, e in wanted.items() if patched.entries.get(u) is not e}
                patched.patch(gone, changed)
            current = wanted
            assert _state(patched) == _state(KeptRows(dict(wanted)))
    finally:
        kept_rows._IN_PLACE = old_in_place


@pytest.mark.parametrize("in_place", [0, 32], ids=["slices", "in-place"])
def test_builds_that_always_patch_the_last_rows_equal_fresh_builds(in_place: int,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Forced to patch whatever the size of the change, builds of several configs interleaved on
    one state (each patching what another left) still equal builds on a fresh snapshot."""
    monkeypatch.setattr(finish_build, "_PATCH_LIMIT", 10**9)
    monkeypatch.setattr(kept_rows, "_IN_PLACE", in_place)
    state = new_state("rows")
    for pos, event in enumerate(_events(), start=1):
        fold_event(state, RecordedEvent("rows", pos, event, ""))
        for config in CONFIGS:
            assert _outcome(state, config) == _outcome(state.snapshot(), config), (pos, config)


def test_a_build_with_nothing_new_hands_out_the_same_lines_and_views() -> None:
    """Nothing cut and nothing new: a rebuild patches nothing, so its manifest holds the very
    same fragments tuple (and the result the same views) as the build before it; a new event
    patches them, and the result equals a build from scratch."""
    config = BuildConfig(provider="openai-chat", window=64_000, reserve=1_000)
    state, events = _state_of(cut=False)
    first = build_context(state, config, render=render_request)
    assert not first.manifest.truncations and len(first.manifest.fragments) > 60
    again = build_context(state, config, render=render_request)
    assert again.manifest.fragments is first.manifest.fragments
    assert again.views is first.views
    fold_event(state, RecordedEvent("run", len(events) + 1, UserInput("one more step"), ""))
    moved = build_context(state, config, render=render_request)
    assert moved.manifest.fragments is not first.manifest.fragments
    assert moved.manifest == build_context(state.snapshot(), config, render=render_request).manifest


def test_the_unit_cut_alike_is_not_remade() -> None:
    """The unit cut at the budget's edge, cut the same way again (a rebuild, another provider at
    the same budget), keeps its lines and views: nothing is patched, and the manifest holds the
    same fragments tuple. Cut otherwise after a new event, its lines are made anew and equal a
    fresh state's."""
    state, events = _state_of(cut=True)
    config = BuildConfig(provider="openai-chat", window=1_200, reserve=200)
    first = build_context(state, config, render=render_request)
    assert first.manifest.truncations
    neutral = build_context(state, BuildConfig(provider="neutral", window=1_200, reserve=200))
    again = build_context(state, config, render=render_request)
    assert neutral.manifest.truncations == first.manifest.truncations
    assert again.manifest.fragments is first.manifest.fragments and again.views is first.views
    assert neutral.manifest.fragments is first.manifest.fragments
    fold_event(state, RecordedEvent("run", len(events) + 1, UserInput("one more step, please"), ""))
    moved = build_context(state, config, render=render_request)
    assert moved.manifest.truncations != first.manifest.truncations
    assert moved.manifest == build_context(state.snapshot(), config, render=render_request).manifest

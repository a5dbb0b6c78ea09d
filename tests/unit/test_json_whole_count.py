"""A JSON cut counts the compact form of its text once, and not at all when the text is compact.

Why: before a JSON cut searches its size knob, it checks whether the whole value written compact
fits (a pretty-printed document may fit once its whitespace is gone). That check rendered and
counted the whole document, on every cut: a tool result at the budget's edge is cut again at
every build, and a 1-3 MB document nested a few hundred levels cost ~0.2-0.6 s of CPU a build
for it. Now the count is kept with the text's parse, and a text that is its compact form (most
APIs' JSON) has the text's own count, nothing rendered.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.projections import truncate as truncate_module
from contextfold.projections.json_pieces import JsonPieces
from contextfold.projections.json_shrink import ShrinkStats, size_knob_max
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import truncate

COUNTER = get_counter("cl100k_base")


def nested(levels: int, members: int) -> Any:
    """An AST-like value: each level has scalar members and one child."""
    value: Any = None
    for i in reversed(range(levels)):
        value = {"type": f"Node{i % 7}", "line": i, **{f"m{j}": f"v{i}_{j}" for j in range(members)},
                 "body": value}
    return value


def _cut(text: str, budget: int) -> Any:
    return truncate(text, budget, kind="json", count=COUNTER.count, line_splitting=COUNTER.line_splitting)


def _whole_renders(monkeypatch: pytest.MonkeyPatch, value: Any) -> list[int]:
    """The knobs :class:`JsonPieces` lays renders out at that keep ``value`` whole (to be shown,
    or to be counted: a count may stop at a bound over the grant, and is then one still)."""
    top = size_knob_max(value)
    seen: list[int] = []
    atoms, within = JsonPieces.atoms, JsonPieces.tokens_within

    def counted(self: JsonPieces, knob: int, stats: ShrinkStats) -> Any:
        if knob >= top:
            seen.append(knob)
        return atoms(self, knob, stats)

    def counted_within(self: JsonPieces, knob: int, limit: int) -> int:
        if knob >= top:
            seen.append(knob)
        return within(self, knob, limit)

    monkeypatch.setattr(JsonPieces, "atoms", counted)
    monkeypatch.setattr(JsonPieces, "tokens_within", counted_within)
    return seen


def test_a_text_cut_again_is_not_rendered_whole_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # laid out in pieces up to PARSE_DEPTH // 2 levels (past it, the compact form is counted whole
    # once per text: test_json_cut_order)
    value = nested(180, 12)
    text = json.dumps(value, indent=1)  # not compact: its compact form is counted, once
    truncate_module._PROBES.clear()
    renders = _whole_renders(monkeypatch, value)
    cuts = [_cut(text, budget) for budget in (3_000, 3_200, 3_000)]
    assert all(c.truncated and c.tokens <= b for c, b in zip(cuts, (3_000, 3_200, 3_000), strict=True))
    assert len(renders) == 1  # was one per cut


def test_a_compact_text_is_counted_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    value = nested(300, 12)
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    truncate_module._PROBES.clear()
    renders = _whole_renders(monkeypatch, value)
    cut = _cut(text, 3_000)
    assert cut.truncated and cut.strategy == "json" and cut.tokens <= 3_000
    assert renders == []  # was one render of the whole document


def _fresh(text: str, budget: int, count: Callable[[str], int]) -> Any:
    return truncate(text, budget, kind="json", count=count, line_splitting=COUNTER.line_splitting)


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=5), inner, max_size=12),
    max_leaves=200)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_values, budgets=st.lists(st.integers(0, 1500), min_size=1, max_size=4),
       compact=st.booleans(), pieces=st.booleans())
def test_cuts_are_those_made_counting_the_compact_form_whole(value: Any, budgets: list[int], compact: bool,
                                                             pieces: bool) -> None:
    """Each cut, in a row as a run's window slides, equals the cut made fresh with the compact
    form rendered and counted (the check as it was: no text taken as its compact form)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":") if compact else None)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(truncate_module, "_JSON_PIECES_FROM", 0 if pieces else 1 << 40)
        truncate_module._PROBES.clear()
        in_a_row = [_fresh(text, b, COUNTER.count) for b in budgets]
        m.setattr(truncate_module, "_written_compact", lambda *args: False)  # the check as it was
        for budget, got in zip(budgets, in_a_row, strict=True):
            truncate_module._PROBES.clear()
            assert got == _fresh(text, budget, COUNTER.count)
    truncate_module._PROBES.clear()

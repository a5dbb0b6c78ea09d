"""A JSON cut's probe that is far over the grant stops being laid out and counted once it is over.

Why: the knob keeps ``ceil(knob / 16)`` members per object, so an object of thousands of keys with
its child in the middle jumps, one knob step further, from keeping a head of its keys to keeping
the child and every level below it: the whole document, some MB. The search's probes near that
step each laid out and counted such a render (~0.3 s each, seven of them for a 2 MB document
cut to 8,000 tokens: 2.3 s of CPU), though each only had to say "over the grant". Now a probe
stops where its running count passes twice the grant (the count is a sum of chunks, so the
running sum is a lower bound), and records that bound, not a count, in the text's memo: a later,
larger grant measures again where the bound does not decide it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from contextfold.projections import truncate as truncate_module
from contextfold.projections.json_pieces import JsonPieces
from contextfold.projections.json_shrink import ShrinkStats, size_knob_max
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import truncate

COUNTER = get_counter("cl100k_base")


def wide_and_deep(width: int, depth: int) -> Any:
    """Each level an object of ``width`` keys, its child between the middle two; no two levels'
    values alike (a chunk counted for one level is not one of another's)."""
    node: Any = {f"k{i}": f"value {i}" for i in range(width)}
    for level in range(depth):
        members: list[tuple[str, Any]] = [(f"k{i}", f"L{level}v{i}") for i in range(width)]
        members.insert(width // 2, ("child", node))
        node = dict(members)
    return node


def _cut(text: str, budget: int, count: Callable[[str], int] = COUNTER.count) -> Any:
    return truncate(text, budget, kind="json", count=count, line_splitting=COUNTER.line_splitting)


def test_probes_over_the_grant_count_a_few_grants_of_text_not_the_document() -> None:
    text = json.dumps(wide_and_deep(600, 60))  # ~0.5 MB, not compact: its compact form is measured too
    COUNTER.count(text)  # the original's count: the fold knows it before any cut
    counted: list[int] = []

    def count(chunk: str) -> int:
        if chunk != text:
            counted.append(len(chunk))
        return COUNTER.count(chunk)

    truncate_module._PROBES.clear()
    cut = _cut(text, 2_000, count)
    assert cut.strategy == "json" and 1_500 < cut.tokens <= 2_000
    json.loads(cut.text)
    assert sum(counted) < len(text) / 10  # was every chunk of the document (~85% of it)
    truncate_module._PROBES.clear()


@pytest.mark.parametrize("budgets", [(2_000, 3_500, 2_000, 1_000, 9_000), (9_000, 2_000, 50_000, 6_100)])
def test_cuts_in_a_row_are_the_cuts_made_fresh(budgets: tuple[int, ...]) -> None:
    """A bound in the memo decides only grants under it: each cut of a row (a window sliding both
    ways) is the cut made fresh, and the cut made with no probe bounded (renders counted whole)."""
    text = json.dumps(wide_and_deep(300, 40))
    truncate_module._PROBES.clear()
    in_a_row = [_cut(text, b) for b in budgets]
    for budget, got in zip(budgets, in_a_row, strict=True):
        truncate_module._PROBES.clear()
        assert got == _cut(text, budget)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(truncate_module, "_JSON_PIECES_FROM", 1 << 40)  # dumped and counted whole
            truncate_module._PROBES.clear()
            assert got == _cut(text, budget)
    truncate_module._PROBES.clear()


def test_a_bounded_count_is_the_count_or_a_bound_over_the_limit() -> None:
    value = wide_and_deep(200, 10)
    pieces = JsonPieces(value, COUNTER.count, lambda t: t)
    for knob in (0, 40, 1_600, 3_200, 3_216, size_knob_max(value)):
        whole = pieces.tokens(pieces.atoms(knob, ShrinkStats()))
        for limit in (0, 100, whole - 1, whole, whole + 1, 10 * whole):
            got = pieces.tokens_within(knob, limit)
            assert got == whole if whole <= limit else (got == whole or limit < -got <= whole)

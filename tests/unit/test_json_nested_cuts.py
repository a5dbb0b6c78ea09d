"""A JSON document nested deep keeps most of a grant just under its size (or its compact form
whole), and what a cut keeps grows with the grant; every cut parses as JSON.

Why: the size knob (``json_shrink``) applies to every level at once. A narrow document nested a
few hundred levels (a linked list, a tree's spine, an AST) holds its content in a chain of
containers one knob step empties together: a 450-level list of 5,180 tokens kept 13 tokens at
a grant of 2,590, while one of 600 levels, past the parser and so cut as a head as written
(``json_deep``), kept 3,446 of 3,452. A document nested past ``SHRINK_DEPTH`` levels is cut as a
head as written now, whatever its depth.
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections.json_shrink import SHRINK_DEPTH, nested_past
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import Truncation, truncate

COUNTER = get_counter("cl100k_base")


def _chain(depth: int, shape: str, pretty: bool) -> str:
    """A narrow document ``depth`` levels deep: each level a few members (items) and the next."""
    value: Any = {"leaf": "end of the chain"}
    for i in range(depth):
        if shape == "object":
            value = {"name": f"node {i}", "size": i * 7, "child": value}
        elif shape == "array":
            value = [i, f"item {i}", value]
        else:
            value = {f"k{i}": [value, None]}
    return json.dumps(value, indent=1 if pretty else None)


def _cuts(text: str, grants: list[int]) -> list[tuple[int, Truncation]]:
    out = []
    for grant in sorted(grants):
        cut = truncate(text, grant, kind="json", count=COUNTER.count, line_splitting=COUNTER.line_splitting)
        if cut.over_budget:  # a grant under the smallest JSON marker: the bare marker, as for any text
            continue
        json.loads(cut.text)  # every cut is JSON
        assert cut.tokens <= grant
        out.append((grant, cut))
    return out


@settings(max_examples=40, deadline=None)
@given(depth=st.integers(1, 480), shape=st.sampled_from(["object", "array", "mixed"]), pretty=st.booleans(),
       shares=st.lists(st.floats(0.05, 1.0), min_size=2, max_size=6, unique=True))
def test_a_larger_grant_keeps_no_fewer_tokens_and_every_cut_parses(depth: int, shape: str, pretty: bool,
                                                                   shares: list[float]) -> None:
    text = _chain(depth, shape, pretty)
    size = COUNTER.count(text)
    cuts = _cuts(text, sorted({max(1, int(size * s)) for s in shares}))
    for (small, a), (large, b) in pairwise(cuts):
        assert a.tokens <= b.tokens, f"grant {large} kept {b.tokens} tokens, grant {small} {a.tokens}"


@settings(max_examples=25, deadline=None)
@given(depth=st.integers(SHRINK_DEPTH, 480), shape=st.sampled_from(["object", "array", "mixed"]),
       pretty=st.booleans(), share=st.floats(0.3, 0.97))
def test_a_document_nested_deep_keeps_most_of_its_grant(depth: int, shape: str, pretty: bool,
                                                        share: float) -> None:
    text = _chain(depth, shape, pretty)
    grant = int(COUNTER.count(text) * share)
    (_, cut), = _cuts(text, [grant])
    assert cut.strategy == "none" or cut.tokens >= 0.9 * grant, (depth, grant, cut.tokens, cut.strategy)


def test_the_depth_is_told_without_recursion_and_past_the_limit_only() -> None:
    deep: Any = []
    for _ in range(5_000):
        deep = [deep]
    assert nested_past(deep, SHRINK_DEPTH) and nested_past({"a": [[1]]}, 2)
    assert not nested_past({"a": [[1]]}, 3) and not nested_past("x" * 100, 0)

"""The memos kept per tool spec object are bounded by the bytes their specs hold (``spec_memo``).

Why: they hold the spec itself, and each run a process serves brings its own spec objects: at
20,000 entries, specs with long descriptions and schemas (MCP servers' tools run to hundreds of
KB) were gigabytes held after their runs were gone.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from contextfold.domain.events import ToolSpec
from contextfold.projections import tool_descriptions, tool_exposure, tool_strict, tool_terms
from contextfold.projections.memo_budget import SHARES, deep_size, set_memo_ceiling
from contextfold.projections.tool_descriptions import cut_descriptions
from contextfold.projections.tool_exposure import canonical_tool_json
from contextfold.projections.tool_strict import loosened_tools
from contextfold.projections.tool_terms import tool_document


@pytest.fixture
def small_ceiling() -> Iterator[int]:
    yield set_memo_ceiling(2)
    set_memo_ceiling(None)


def _spec(n: int) -> ToolSpec:
    props = {f"field_{n}_{k}": {"type": "string", "description": f"the {k}th field of form {n} " * 8}
             for k in range(12)}
    return ToolSpec(name=f"fill_form_{n}", description=f"Fill in form {n} with the user's answers. " * 60,
                    parameters={"type": "object", "properties": props, "additionalProperties": True})


MEMOS = (tool_exposure._SPEC_MEMO, tool_terms._DOC_MEMO, tool_strict._LOOSENED, tool_descriptions._CUTS)


def test_the_spec_memos_hold_at_most_their_share_of_the_ceiling(small_ceiling: int) -> None:
    for memo in MEMOS:
        memo.clear()
    for n in range(300):  # ~300 runs' own spec objects, ~10 KB each
        spec = _spec(n)
        assert canonical_tool_json(spec).startswith("{")
        assert tool_document(spec)[f"{n}"] >= 1
        loosened_tools("openai-chat", {spec.name: spec})
        cut_descriptions("openai-chat", {spec.name: spec})
        del spec
    gc.collect()
    bound = int(small_ceiling * SHARES["tool_specs"])
    held = [deep_size(memo) for memo in MEMOS]
    assert sum(held) <= bound, f"{held} bytes held for a share of {bound}"
    assert tool_exposure._SPEC_MEMO  # still memoised: the newest specs are kept

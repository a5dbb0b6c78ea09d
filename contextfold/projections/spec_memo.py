"""The byte account of a memo kept per tool spec object (its canonical JSON, BM25 document, strict
and cut copies).

Why: those memos hold the spec itself (a hit by id must be that very object), and a runtime
serving many runs makes new spec objects for each run: bounded by entries alone (20,000), specs
with long descriptions or deep schemas (a few hundred KB each is seen in MCP servers' tools) held
gigabytes after their runs were gone. Each memo now also starts over past its part of the
``tool_specs`` share of the memo ceiling (:mod:`contextfold.projections.memo_budget`), counting what a spec
holds when it is first kept (a walk of its schema: once per spec object and memo, on a miss).
"""

from __future__ import annotations

import sys
from typing import Any

from contextfold.domain.events import ToolSpec
from contextfold.projections.memo_budget import memo_share

__all__ = ["SpecAccount", "spec_bytes"]

_MEMOS = 4
"""The memos sharing ``tool_specs``: tool_exposure, tool_terms, tool_strict, tool_descriptions."""
_ENTRY_BYTES = 400
"""A spec object and its memo entry besides its texts and schema (the model, the key, the tuple)."""


def spec_bytes(spec: ToolSpec) -> int:
    """What ``spec`` holds, estimated: its texts and its schema's (``sys.getsizeof`` of each
    container, key and value)."""
    total = _ENTRY_BYTES + sys.getsizeof(spec.name) + sys.getsizeof(spec.description)
    stack: list[Any] = [spec.parameters]
    while stack:
        o = stack.pop()
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple):
            stack.extend(o)
    return total


class SpecAccount:
    """The bytes one memo keyed by spec objects holds, and its bound (followed as the ceiling
    changes). ``admit`` is called on a miss, before the new entry goes in."""

    def __init__(self, memo: dict[Any, Any], max_entries: int) -> None:
        self.memo = memo
        self.max_entries = max_entries
        self.held = 0
        self.bound = memo_share("tool_specs", self._bound) // _MEMOS

    def _bound(self, limit: int) -> None:
        self.bound = limit // _MEMOS
        if self.held > self.bound:
            self.memo.clear()
            self.held = 0

    def admit(self, spec: ToolSpec, extra: int = 0) -> None:
        """Make room for an entry holding ``spec`` (and ``extra`` bytes of its own): the memo
        starts over past its entries or bytes."""
        if len(self.memo) >= self.max_entries or self.held >= self.bound:
            self.memo.clear()
            self.held = 0
        self.held += spec_bytes(spec) + extra

"""What a fragment's framing costs in tokens, apart from its content.

Why a module of its own: the fold counts it once per fragment, with the counter that has just
counted the fragment's content (its tables warm), and a build reads it from the entry; a build
that meets a fragment without one (a view made elsewhere) counts it the same way. Counted the
first time a build saw the fragment, it was the dearest of a new tool result's facts (~57 us in
the agent loop for the wrapper of a source ref with a random call id, ~10 us warm).

Every fragment pays ``MESSAGE_OVERHEAD`` tokens of message framing; a data fragment
(instruction, evidence, memory, tool result, or any text not authored by the runtime or the
user) also pays its ``<data ...>`` wrapper, as ``render.data_blocks`` writes it.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["DATA_KINDS", "MESSAGE_OVERHEAD", "framing_tokens"]

MESSAGE_OVERHEAD = 4
DATA_KINDS = frozenset({"instruction", "evidence", "memory", "tool_result"})


def framing_tokens(kind: str, trust: str, source_ref: str, count: Callable[[str], int]) -> int:
    """The framing tokens of a fragment of ``kind`` and ``trust`` from ``source_ref``."""
    if kind not in DATA_KINDS and trust in ("runtime", "user"):
        return MESSAGE_OVERHEAD
    return MESSAGE_OVERHEAD + count(f'<data source="{source_ref}" trust="{trust}" kind="{kind}">\n\n</data>')

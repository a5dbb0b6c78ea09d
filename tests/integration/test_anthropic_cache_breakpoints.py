"""Anthropic's prompt cache over an agent loop's turns: the history is cached from turn to turn.

Anthropic caches a request's prefix only at a ``cache_control`` breakpoint, and reads a cache
at a breakpoint or up to 20 blocks before one. The renderer marked the stable prefix alone (the
last tool, the last system block, the instruction message), so a run's history - kept
byte-identical between turns for prompt caching - was never cached and was billed in full every
turn. These tests build a run turn by turn, as an agent loop does, and check what the cache
would see: each request marks its conversation's end, that block comes back unchanged (and
unmarked) in the next request within the lookback of the next mark, and no request carries
more than the API's four marks (a mark on a block reused by a later build would pile up).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from contextfold.api import open_store
from contextfold.domain.events import (
    InstructionSet,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)

LOOKBACK = 20
"""Blocks before a breakpoint at which Anthropic also looks for a cached prefix (its docs)."""


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The body's cacheable blocks in the order Anthropic caches them: tools, system, messages."""
    out = [*body.get("tools", []), *body.get("system", [])]
    for message in body["messages"]:
        out.extend({"role": message["role"], **block} for block in message["content"])
    return out


def _unmarked(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _marks(blocks: list[dict[str, Any]]) -> list[int]:
    return [i for i, b in enumerate(blocks) if "cache_control" in b]


def test_each_turn_reads_the_history_the_turn_before_cached(sqlite_url: str) -> None:
    with open_store(sqlite_url) as store:
        run = store.run("loop")
        run.append(PolicySet(text="You are a coding agent. Never modify tests."),
                   InstructionSet(text="Run `make check` before committing.", source_ref="file://AGENTS.md"),
                   ToolsRegistered(tools=(ToolSpec(name="bash", description="Run a shell command"),
                                          ToolSpec(name="read_file", description="Read a file"))),
                   UserInput("Fix the failing test in module m3"))
        bodies = []
        for turn in range(8):
            bodies.append(run.build(provider="anthropic", model="claude-sonnet-4-5", window=200_000).request)
            calls = [ToolCall(call_id=f"c{turn}-{k}", name="bash",
                              arguments=json.dumps({"cmd": f"pytest -k t{turn}_{k}"}))
                     for k in range(1 + turn % 3)]
            run.append(ModelResponse(text=f"Step {turn}.", tool_calls=calls),
                       *(ToolResult(call_id=c.call_id, content=f"{c.call_id}: 1 failed\n" * 40, is_error=True,
                                    exit_code=1) for c in calls))
            if turn % 3 == 2:
                run.append(UserInput(f"Also look at module m{turn}"))
    for before, after in itertools.pairwise(bodies):
        a, b = _blocks(before), _blocks(after)
        assert len(_marks(a)) <= 4 and len(_marks(b)) <= 4
        end = _marks(a)[-1]
        assert end == len(a) - 1, "the conversation's last block carries the last mark"
        # the turn's request opens with the whole of the last one: its marked end comes back
        # unchanged and unmarked (the mark is the render's own, never left on a reused block)
        assert [_unmarked(x) for x in a] == [_unmarked(x) for x in b[:len(a)]]
        assert "cache_control" not in b[end] or end in _marks(a)[:-1]
        # ... and within the lookback of the next request's last mark: a cache read
        assert 0 <= _marks(b)[-1] - end <= LOOKBACK


def test_a_request_that_is_its_stable_prefix_has_one_mark_on_it(sqlite_url: str) -> None:
    with open_store(sqlite_url) as store:
        run = store.run("first")
        run.append(PolicySet(text="Be brief."), UserInput("Hello"))
        body = run.build(provider="anthropic", window=200_000).request
    marked = [b for b in _blocks(body) if "cache_control" in b]
    assert [b.get("text") for b in marked] == ["Be brief.", "Hello"]

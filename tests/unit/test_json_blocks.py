"""Several JSON documents a line apart (a tool result's MCP text blocks): each cut as JSON."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import contextfold
from contextfold import ModelResponse, TextBlock, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import TruncationRecord
from contextfold.projections.json_blocks import BLOCK_DEPTH, value_spans
from contextfold.projections.truncate import truncate
from tests.counters import cl100k

_DECODER = json.JSONDecoder()


def documents(text: str) -> list[Any]:
    """The JSON documents of ``text``, a line apart; a ValueError when one does not parse."""
    out: list[Any] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos == len(text):
            return out
        value, pos = _DECODER.raw_decode(text, pos)
        out.append(value)


def records(tag: str, n: int) -> dict[str, Any]:
    return {"rows": [{"i": i, "name": tag * 20} for i in range(n)]}


def test_two_json_blocks_are_each_cut_as_json() -> None:
    """The head of the first document and the tail of the second, neither parsing, was the cut."""
    text = "\n".join([json.dumps(records("a", 600)), json.dumps(records("b", 600))])
    result = truncate(text, 2_000, kind="json", count=cl100k)
    assert result.strategy == "json" and result.unit == "block" and result.truncated
    assert result.tokens == cl100k(result.text) <= 2_000
    first, second = documents(result.text)
    assert first["rows"][0] == {"i": 0, "name": "a" * 20} and second["rows"][-1]["name"] == "b" * 20
    assert result.text.count("\n") == 1  # joined as the blocks were: a line apart
    assert result.omitted > 0 and [(r.start, r.end) for r in result.kept] == [(1, 2)]


def test_a_short_block_stays_whole_beside_a_long_one() -> None:
    short = json.dumps({"status": "ok", "took_ms": 12})
    text = "\n\n".join([short, json.dumps(records("b", 2_000), indent=2)])
    result = truncate(text, 1_500, kind="json", count=cl100k)
    assert result.strategy == "json" and result.text.startswith(short + "\n\n")
    assert documents(result.text)[1]["rows"][0]["i"] == 0


def test_json_lines_kept_whole_by_lines_are_cut_as_before() -> None:
    """A JSON Lines text whose line windows keep whole records: not cut by documents."""
    text = "\n".join(json.dumps({"i": i, "msg": "event"}) for i in range(2_000))
    result = truncate(text, 500, kind="json", count=cl100k)
    assert result.strategy == "lines"
    assert truncate(text, 500, kind="text", count=cl100k).text == result.text


def cut_first_result(result: ToolResult, window: int) -> tuple[TruncationRecord, str]:
    """Build (openai-chat, ``window``) a run whose first call's ``result`` (event 3, call c1) is
    followed by a second call and an input: its truncation record and the text its data block
    shows."""
    store = contextfold.open_store(f"sqlite:///{os.path.join(tempfile.mkdtemp(), 'r.db')}")
    run = store.run("cut")
    run.append(UserInput("look"),
               ModelResponse(tool_calls=[ToolCall(call_id="c1", name="first", arguments="{}")]), result,
               ModelResponse(tool_calls=[ToolCall(call_id="c2", name="ls", arguments="{}")]),
               ToolResult(call_id="c2", content="ok"), UserInput("summarise"))
    built = run.preview("openai-chat", window=window)
    store.close()
    cut = next(t for t in built.manifest.truncations if t.id == "e3")
    msg = next(m["content"] for m in built.request["messages"] if m.get("tool_call_id") == "c1")
    block = re.search(r"<data [^>]*>\n(.*)\n</data>", msg, re.S)
    assert block is not None
    return cut, block.group(1)


def test_an_mcp_result_of_two_json_blocks_is_shown_as_two_documents() -> None:
    blocks = tuple(TextBlock(text=json.dumps(records(tag, 3_000))) for tag in "ab")
    cut, shown = cut_first_result(ToolResult(call_id="c1", content="", blocks=blocks), 6_000)
    assert cut.strategy == "json" and cut.kept == "blocks 1-2"
    first, second = documents(shown)
    assert first["rows"][0]["name"] == "a" * 20 and second["rows"][0]["name"] == "b" * 20


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=12) | st.dictionaries(st.text(max_size=8), inner, max_size=8),
    max_leaves=60,
)


@given(values=st.lists(_values.filter(lambda v: isinstance(v, list | dict)), min_size=2, max_size=4),
       indent=st.sampled_from([None, 1]), joiner=st.sampled_from(["\n", "\n\n", " \n"]),
       budget=st.integers(0, 400))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_blocks_cut_stay_documents_within_budget(values: list[Any], indent: int | None, joiner: str,
                                                 budget: int) -> None:
    text = joiner.join(json.dumps(v, indent=indent, ensure_ascii=False) for v in values)
    result = truncate(text, budget, kind="json", count=cl100k)
    assert result.tokens == cl100k(result.text)
    assert result.over_budget or result.tokens <= budget
    if result.unit == "block":
        assert len(documents(result.text)) == len(values)


def _from_frames_deeper(frames: int, call: Callable[[], Any]) -> Any:
    """``call()`` made ``frames`` Python frames below this one."""
    return call() if frames == 0 else _from_frames_deeper(frames - 1, call)


def test_whether_a_text_is_blocks_does_not_depend_on_the_caller_stack() -> None:
    """The parser recurses a frame a level, counted from the caller's frame: two 400-level
    documents were blocks from a test and "not blocks" from 700 frames deeper (a RecursionError),
    so one text was cut as JSON or as characters by where it was cut. Decided by the depth now:
    past ``BLOCK_DEPTH`` not blocks, from any stack; at it, blocks from any stack."""
    def nested(levels: int) -> str:
        return "[" * levels + "1" + "]" * levels

    for levels, blocks in ((400, False), (BLOCK_DEPTH + 1, False), (BLOCK_DEPTH, True), (3, True)):
        text = nested(levels) + "\n" + nested(levels)
        shallow = value_spans(text)
        assert (shallow is not None) is blocks, levels
        assert _from_frames_deeper(700, lambda: value_spans(text)) == shallow, levels  # noqa: B023

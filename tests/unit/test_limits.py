"""Input limits: oversized and over-deep inputs are rejected with a typed error and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from contextfold.domain.errors import InputLimitError, InvalidInputError, UnknownToolCallError
from contextfold.domain.events import (
    AnyEvent,
    ModelResponse,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
    canonical_json,
    known_json_depth,
)
from contextfold.domain.log import RecordedEvent
from contextfold.domain.manifest import BuildConfig, manifest_json_depth, schema_json_depth
from contextfold.projections.builder import build_context
from contextfold.projections.fold import fold_event, new_state
from contextfold.store.event_store import EventStore
from contextfold.store.limits import StoreLimits, json_depth


@pytest.fixture
def store(tmp_path: Path) -> EventStore:
    return EventStore(f"sqlite:///{tmp_path / 's.db'}", artifact_threshold=1024,
                      limits=StoreLimits(max_event_bytes=16 * 1024, max_artifact_bytes=64 * 1024,
                                         max_depth=16, max_batch=50))


def _nested(depth: int) -> dict[str, object]:
    node: dict[str, object] = {"type": "string"}
    for _ in range(depth - 1):
        node = {"type": "object", "properties": {"x": node}}
    return node


def _nothing_written(store: EventStore, run: str = "r") -> None:
    assert store.version(run) == 0
    assert store.artifact_count() == 0


def _reference_json_depth(body: bytes) -> int:
    """The per-bracket loop json_depth replaced, kept as its specification."""
    import re

    depth = deepest = 0
    stripped = re.sub(rb'"[^"\\]*(?:\\.[^"\\]*)*"', b"", body)
    for m in re.finditer(rb"[\[\]{}]", stripped):
        if m.group() in (b"{", b"["):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


_TRICKY = st.text(alphabet='"\\[]{}a/\n\u2028é', max_size=8)
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TRICKY, inner, max_size=4),
    max_leaves=40)


@settings(max_examples=1000, deadline=None)
@given(_JSON_VALUES, st.booleans())
def test_json_depth_equals_the_per_bracket_reference(value: object, ascii_only: bool) -> None:
    """Valid JSON (what the store checks: canonical event JSON), strings full of quotes,
    backslashes and brackets."""
    body = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":")).encode()
    assert json_depth(body) == _reference_json_depth(body)


def test_json_depth_counts_structure_not_brackets_in_strings() -> None:
    assert json_depth(b'{"a":[1,{"b":"[[[[{{{{"}]}') == 3
    assert json_depth(b'"no structure"') == 0


def test_limit_errors_are_invalid_input() -> None:
    assert issubclass(InputLimitError, InvalidInputError)


def test_oversized_inline_event_is_rejected(store: EventStore) -> None:
    with pytest.raises(InputLimitError, match="bytes of JSON"):
        store.append("r", [UserInput("ok"), UserInput("x" * 20_000)])
    _nothing_written(store)


def test_oversized_artifact_is_rejected_before_any_write(store: EventStore) -> None:
    events: list[AnyEvent] = [ModelResponse(tool_calls=(ToolCall(call_id="c1", name="cat"),)),
              ToolResult(call_id="c1", content="y" * 100_000)]
    with pytest.raises(InputLimitError, match="artifact"):
        store.append("r", events)
    _nothing_written(store)
    with pytest.raises(InputLimitError):
        store.put_artifact(b"z" * 100_000)
    assert store.artifact_count() == 0


def test_payload_under_the_artifact_limit_is_offloaded_not_rejected(store: EventStore) -> None:
    events: list[AnyEvent] = [ModelResponse(tool_calls=(ToolCall(call_id="c1", name="cat"),)),
              ToolResult(call_id="c1", content="y" * 50_000)]
    store.append("r", events)
    assert store.version("r") == 2 and store.artifact_count() == 1


def test_over_deep_json_is_rejected(store: EventStore) -> None:
    deep = ToolsRegistered(tools=(ToolSpec(name="deep", parameters=_nested(20)),))
    with pytest.raises(InputLimitError, match="levels deep"):
        store.append("r", [UserInput("first"), deep])
    _nothing_written(store)
    store.append("r", [ToolsRegistered(tools=(ToolSpec(name="ok", parameters=_nested(5)),))])
    assert store.version("r") == 1


def test_json_too_deep_to_serialise_is_the_same_typed_error(store: EventStore) -> None:
    """Past 255 levels pydantic-core's serializer stops with a bare ValueError, before the depth
    check could run: a runtime's (or an imported trace's) deep tool schema was an untyped error."""
    for levels in (128, 2_000):  # 255 and 3,999 levels of JSON
        deep = ToolsRegistered(tools=(ToolSpec(name="deep", parameters=_nested(levels)),))
        with pytest.raises(InputLimitError, match=r"^event 1 \(tools_registered\) nests JSON "):
            store.append("r", [UserInput("first"), deep])
    _nothing_written(store)


def test_an_error_quotes_a_huge_id_clipped(store: EventStore) -> None:
    """An id from a caller or a model may be long (a call id up to the event size limit): the error
    says how long, it does not repeat it."""
    huge = "x" * 10_000
    with pytest.raises(InputLimitError) as bad_run:
        store.append(huge, [UserInput("hi")])
    with pytest.raises(UnknownToolCallError) as unknown:
        store.append("r", [ToolResult(call_id=huge, content="ok")])
    for exc in (bad_run.value, unknown.value):
        assert len(str(exc)) < 300 and "… (10000 characters)" in str(exc), str(exc)[:300]
    assert unknown.value.call_id == huge  # the error's field keeps the whole id
    _nothing_written(store)


def test_deep_looking_text_is_not_depth(store: EventStore) -> None:
    store.append("r", [UserInput("[" * 500 + "{" * 500)])
    assert store.version("r") == 1


def test_batch_and_run_id_limits(store: EventStore) -> None:
    with pytest.raises(InputLimitError, match="events in one append"):
        store.append("r", [UserInput(str(i)) for i in range(51)])
    for bad in ("", "-starts-with-dash", "has space", "x" * 201, "semi;colon", "ünïcode"):
        with pytest.raises(InputLimitError, match="invalid run id"):
            store.append(bad, [UserInput("hi")])
    _nothing_written(store)


def test_default_limits() -> None:
    limits = StoreLimits()
    assert limits.max_event_bytes == 8 * 1024 * 1024
    assert limits.max_artifact_bytes == 256 * 1024 * 1024
    assert limits.max_depth == 64 and limits.max_batch == 10_000


def test_schema_depth_bounds_only_what_the_schema_fixes() -> None:
    class Leaf(BaseModel):
        model_config = ConfigDict(extra="forbid")
        tags: tuple[str, ...] = ()

    class Node(BaseModel):
        model_config = ConfigDict(extra="forbid")
        leaves: list[Leaf] = []
        counts: dict[str, int] = {}
        maybe: Leaf | None = None

    class Loose(BaseModel):
        payload: dict[str, Any]

    class Tree(BaseModel):
        children: list[Tree] = []

    assert schema_json_depth(Leaf) == 2 and schema_json_depth(Node) == 4  # {"leaves": [{"tags": [..]}]}
    assert json_depth(json.dumps(Node(leaves=[Leaf(tags=("a",))]).model_dump(mode="json")).encode()) == 4
    assert schema_json_depth(Loose) is None  # Any: no bound
    assert schema_json_depth(Tree) is None  # recursive: no bound
    assert manifest_json_depth() == 5


def test_a_vouched_depth_over_the_limit_is_still_checked(tmp_path: Path) -> None:
    """A build's record skips the depth read only while its bound is within the limit; past
    it, the real depth decides (here below the bound: no media lines)."""
    state = new_state("r")
    fold_event(state, RecordedEvent("r", 1, UserInput("hello"), ""))
    record = build_context(state, BuildConfig(window=4000, reserve=500)).record()
    real = json_depth(canonical_json(record))
    assert known_json_depth(record) == 6 and real < 6
    strict = EventStore(f"sqlite:///{tmp_path / 'strict.db'}", limits=StoreLimits(max_depth=real - 1))
    with pytest.raises(InputLimitError, match="levels deep"):
        strict.append("r", [UserInput("hello"), record])  # the record after what it folded
    assert strict.version("r") == 0
    exact = EventStore(f"sqlite:///{tmp_path / 'exact.db'}", limits=StoreLimits(max_depth=real))
    stored = exact.append("r", [UserInput("hello"), record])
    assert exact.read("r")[1].event == record and stored[1].hash == exact.read("r")[1].hash

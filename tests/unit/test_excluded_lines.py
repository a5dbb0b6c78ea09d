"""ExcludedLines reads, compares, validates and serializes as the tuple of lines it holds."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextfold.domain.manifest import ContextManifest, ExcludedFragment, ExcludedLines


def _line(i: int) -> ExcludedFragment:
    return ExcludedFragment(id=f"e{i}", kind="history", source_ref=f"log:{i}", tokens=i,
                            reason="low_priority")


_LINES = [_line(i) for i in range(12)]


@given(sizes=st.lists(st.integers(0, 4), max_size=6), index=st.integers(-15, 15),
       start=st.none() | st.integers(-15, 15), stop=st.none() | st.integers(-15, 15),
       step=st.none() | st.integers(1, 3) | st.integers(-3, -1))
def test_reads_as_the_tuple_of_its_chunks(sizes: list[int], index: int, start: int | None,
                                          stop: int | None, step: int | None) -> None:
    chunks, at = [], 0
    for size in sizes:
        chunks.append(tuple(_LINES[at:at + size]))
        at += size
    flat = tuple(_LINES[:at])
    lines = ExcludedLines.from_chunks(chunks)
    assert len(lines) == len(flat)
    assert tuple(lines) == flat and list(reversed(lines)) == list(reversed(flat))
    assert lines == flat and flat == lines and lines == ExcludedLines.of(flat)
    assert hash(lines) == hash(flat)
    assert lines[start:stop:step] == flat[start:stop:step]
    assert lines + flat == flat + flat and flat + lines == flat + flat
    if -len(flat) <= index < len(flat):
        assert lines[index] is flat[index]
    else:
        with pytest.raises(IndexError):
            lines[index]
    assert all(chunk for chunk in lines.chunks)  # empty chunks are dropped
    if flat:
        assert lines.index(flat[-1]) == len(flat) - 1 and flat[0] in lines


def test_chunks_are_held_not_copied() -> None:
    head, tail = tuple(_LINES[:5]), tuple(_LINES[5:])
    lines = ExcludedLines.from_chunks([head, (), tail])
    assert lines.chunks[0] is head and lines.chunks[1] is tail
    assert ExcludedLines.of(lines) is lines
    assert copy.deepcopy(lines) == lines == pickle.loads(pickle.dumps(lines))


def test_a_manifest_validates_and_serializes_it_as_a_tuple() -> None:
    """Through the model it is ``tuple[ExcludedFragment, ...]``: the same JSON schema, the same
    JSON, and validation (from a tuple, a list or JSON) gives an ExcludedLines equal to it."""
    from contextfold.domain.manifest import BuildConfig

    lines = ExcludedLines.from_chunks([tuple(_LINES[:3]), tuple(_LINES[3:7])])
    fields: dict[str, Any] = dict(
        request_id="r", run_id="run", turn=1, log_version=3, provider="neutral", model=None,
        encoding="cl100k_base",
        window_tokens=100, reserved_output_tokens=10, budget_tokens=90, selected_tokens=3,
        overhead_tokens=3, layer_tokens={}, fragments=(), excluded={"low_priority": 7}, tools=(),
        tool_tokens=0, cache_key="k", request_hash="h", config_hash="c", config=BuildConfig())
    built = ContextManifest.model_construct(**fields, excluded_items=lines)
    validated = ContextManifest.model_validate({**fields, "excluded_items": list(_LINES[:7])})
    assert isinstance(validated.excluded_items, ExcludedLines)
    assert validated == built
    assert built.model_dump_json() == validated.model_dump_json()
    assert ContextManifest.model_validate_json(built.model_dump_json()) == built
    dumped = built.model_dump()
    assert type(dumped["excluded_items"]) is tuple  # as a tuple field dumps, not the sequence itself
    assert dumped["excluded_items"] == tuple(line.model_dump() for line in _LINES[:7])
    assert json.loads(built.model_dump_json())["excluded_items"][6]["id"] == "e6"
    schema = ContextManifest.model_json_schema()
    assert schema["properties"]["excluded_items"] == {
        "items": {"$ref": "#/$defs/ExcludedFragment"}, "title": "Excluded Items", "type": "array"}
    assert ContextManifest.model_json_schema(mode="serialization")["properties"]["excluded_items"] == \
        schema["properties"]["excluded_items"]

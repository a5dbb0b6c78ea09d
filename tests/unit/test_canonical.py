"""``canonical_utf8`` writes ``json.dumps``'s canonical bytes, whether orjson or the C encoder
writes them: the store's hash chain, content hashes and request hashes rest on those bytes."""

from __future__ import annotations

import enum
import json
import math
import struct
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.domain.canonical import (
    canonical_dumps,
    canonical_utf8,
    compact_json,
    orjson_writes_the_same,
    quote,
    quote_utf8,
)


def _expected(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_every_character_is_escaped_alike() -> None:
    """Every code point but the surrogates, as a value and as a key, in one orjson call."""
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    text = "".join(chars)
    obj = {"text": text, "keys": {c: i for i, c in enumerate(chars[:5000])}, "astral": chars[-3000:]}
    assert orjson_writes_the_same(obj)
    assert canonical_utf8(obj) == _expected(obj)
    assert quote_utf8(text) == quote(text).encode() == _expected(text)


def test_keys_sort_by_code_point() -> None:
    obj = {"\U0001f600": 1, "\uffff": 2, "é": 3, "e": 4, "E": 5, "": 6, "ea": 7, "\x00": 8}
    assert canonical_utf8(obj) == _expected(obj)


@pytest.mark.parametrize("value", [
    0.0, -0.0, 1.0, 2.5, 1e-4, 9.999999999999998e15, 1e16, 1e22, 5e-05, 1e-7, 5e-324,
    1.7976931348623157e308, -3.14, math.inf, -math.inf, math.nan, 2**63 - 1, -(2**63), 2**64 - 1,
    2**64, -(2**63) - 1, 10**30, True, None])
def test_numbers_out_of_orjsons_agreement_take_the_standard_encoder(value: Any) -> None:
    obj = {"v": value, "l": [value, {"x": value}]}
    assert canonical_utf8(obj) == _expected(obj)


def test_random_floats_of_every_exponent_agree() -> None:
    """Bit patterns of every magnitude: those orjson writes alike take it, the others do not."""
    import random

    rng = random.Random(7)
    floats = [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    floats += [rng.uniform(1, 10) * 10.0 ** e for e in range(-8, 20) for _ in range(200)]
    for value in floats:
        assert canonical_utf8([value]) == _expected([value]), value


def test_the_fast_path_is_taken_for_model_dumps() -> None:
    """A message dump (str, int, None, bool, nested lists and dicts) goes to orjson."""
    dump = {"role": "tool", "content": [{"type": "tool_result", "call_id": "c1", "text": 'a "b"\n' * 500,
                                         "exit_code": 0, "artifact": None, "ok": True, "score": 0.25}]}
    assert orjson_writes_the_same(dump)
    assert canonical_utf8(dump) == _expected(dump)


class _Color(enum.IntEnum):
    RED = 1


class _Name(str):
    pass


@pytest.mark.parametrize("obj", [
    {"e": _Color.RED}, {"s": _Name("x")}, {1: "int key"}, {"t": ("a", 1)}, [[[[]]]] * 3,
])
def test_types_orjson_writes_otherwise_take_the_standard_encoder(obj: Any) -> None:
    assert canonical_utf8(obj) == _expected(obj)


def test_nesting_past_orjsons_limit_falls_back() -> None:
    deep: list[Any] = []
    inner = deep
    for _ in range(400):
        inner.append([])
        inner = inner[0]
    assert canonical_utf8(deep) == _expected(deep)


def test_a_lone_surrogate_fails_as_the_standard_encoder_does() -> None:
    with pytest.raises(UnicodeEncodeError):
        _expected({"t": "\ud800"})
    with pytest.raises(UnicodeEncodeError):
        canonical_utf8({"t": "\ud800"})
    with pytest.raises(UnicodeEncodeError):
        quote_utf8("a\ud800")


def test_an_object_that_is_not_json_fails_alike() -> None:
    with pytest.raises(TypeError):
        canonical_utf8({"x": object()})


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=30)


@settings(max_examples=500, deadline=None)
@given(obj=_JSON)
def test_any_json_value_gives_json_dumps_bytes(obj: Any) -> None:
    assert canonical_utf8(obj) == _expected(obj)
    assert canonical_dumps(obj).encode() == _expected(obj)


def _compact(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@settings(max_examples=500, deadline=None)
@given(obj=_JSON)
def test_compact_json_is_json_dumps_text_with_keys_in_their_order(obj: Any) -> None:
    assert compact_json(obj) == _compact(obj)


@pytest.mark.parametrize("obj", [
    {"z": 1, "a": [5e-05, 1e16, math.nan, -math.inf, 2**64, {"k": "é\u2028\x00"}]}, {"e": _Color.RED},
    {1: "int key"}, {"t": "\ud800"}, {"b": 1, "a": 2},
    "\ud800", "a\udfffb", "é\u2028\x00\"\\", "",  # a str alone: orjson without the walk, or the fallback
])
def test_compact_json_falls_back_where_orjson_differs(obj: Any) -> None:
    assert compact_json(obj) == _compact(obj)


@pytest.mark.parametrize("obj", [[], (), {}, [[]], "", [""], {"": []}])
def test_empty_values_are_written_alike(obj: Any) -> None:
    """An empty list is written without the walk (a request body's empty member lists)."""
    assert canonical_utf8(obj) == _expected(obj)
    assert compact_json(obj) == _compact(obj)



def test_canonical_bytes_hold_no_more_memory_than_their_length() -> None:
    """orjson returns its output in the buffer it sized for the worst case (a long string's: ~13x
    its length) and the JSON memos keep these bytes: a 10,000-message run's message memo, bounded
    at 64 MB of text, held ~375 MB. Measured with ``tracemalloc`` (allocations, not time)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [canonical_utf8({"role": "tool", "content": "x" * 20_000 + str(i)}) for i in range(50)]
        kept += [canonical_utf8("y" * 20_000 + str(i)) for i in range(50)]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 1.5 * sum(map(len, kept))

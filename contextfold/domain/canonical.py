"""Canonical JSON: ``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``.

That text (as UTF-8) is what the store hashes and keeps for every event, what content hashes
and request hashes are taken over, and what a request body is sent as: its bytes must never
change for the same data, whichever encoder wrote them.

:func:`canonical_utf8` writes it with orjson when orjson's output is known to be the same,
and with the standard library's C encoder otherwise. Why: a long run's build dumps each new
message (a tool output of ~10 KB with many escaped quotes took ~70 us with the C encoder, 7 ns a
character), every event is dumped once to be hashed, and every new manifest line once for the
record; with the walk below, this writes them 2.9x (events), 3.5x (request messages) and 1.4x
(manifest lines) faster than the C encoder did (``scripts/bench_json.py``). When the two are the
same (``tests/unit/test_canonical.py`` checks each case against ``json.dumps``):

- strings, keys and their order: the same escapes (``\\"``, ``\\\\``, ``\\n`` and the other short
  forms, ``\\u00XX`` for the other control characters, nothing else escaped), keys sorted by code
  point (UTF-8 byte order is code-point order); a lone surrogate makes orjson raise;
- integers within 64 bits (signed or unsigned); orjson raises past them;
- floats that ``repr`` writes without an exponent, ``1e-4 <= |x| < 1e16``, and zero: both
  write the shortest round-trip digits. Outside that range they differ (``5e-05`` is
  ``0.00005`` in orjson), and ``NaN``/``Infinity`` are ``null`` in orjson.

So :func:`canonical_utf8` walks the value first (exact builtin types only: a str or int subclass,
an enum, a float out of that range, a non-str key all take the standard encoder) and falls back
when orjson raises (a surrogate, nesting past orjson's limit). The walk is ~1.5 us on a message
or a manifest line; nothing is cached here: the callers keep what they reuse.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

__all__ = ["CONSTANTS_DECODER", "canonical_dumps", "canonical_object", "canonical_utf8",
           "canonical_utf8_no_float", "compact_json", "constants_json", "orjson_writes_the_same", "quote",
           "quote_utf8", "reject_constant", "strict_json"]


def reject_constant(name: str) -> Any:
    """``json.loads(..., parse_constant=reject_constant)``: ``NaN`` and ``Infinity``, which Python's
    parser takes, are not JSON; a text holding them is not parsed as JSON (a ``ValueError``)."""
    raise ValueError(f"not JSON: {name}")


def _finite_float(text: str) -> float:
    """``float(text)``, or a ValueError when the double is not the number written: past its range
    (``1e400`` is ``inf``), below it (``1e-400`` is ``0.0``) or beyond its precision
    (``12345678901234567890.123456789``). Re-emitted, the value would be another number."""
    value = float(text)
    if len(text) <= 16 and "e" not in text and "E" not in text:
        return value  # at most 15 digits and no exponent: a double holds it exactly as written
    if math.isinf(value) or Decimal(text) != Decimal(repr(value)):
        raise ValueError(f"not JSON: {text[:40]} is not a number a double holds as written")
    return value


def strict_json(text: str) -> Any:
    """``json.loads(text)`` for a value that is written back as JSON: a ``ValueError`` for
    ``NaN``/``Infinity`` (see :func:`reject_constant`) and for a number a double does not hold as
    written (:func:`_finite_float`). ``1e400`` re-emitted is ``Infinity``: tool arguments holding it
    made the Anthropic and Gemini bodies invalid JSON, and a JSON tool result cut at its values
    became text that is no longer JSON; ``1e-400`` became ``0.0``, another number. Such a text is
    not parsed: arguments go as written (``unparsed_arguments``), a result is cut as lines."""
    return json.loads(text, parse_constant=reject_constant, parse_float=_finite_float)


CONSTANTS_DECODER = json.JSONDecoder(parse_float=_finite_float)
""":func:`constants_json`'s decoder (its ``raw_decode`` reads one document of several)."""


def constants_json(text: str) -> Any:
    """:func:`strict_json`, but ``NaN``, ``Infinity`` and ``-Infinity`` read as floats: for a text
    that is cut, not sent as a value. Python's ``json.dumps`` writes them by default (a metric, a
    loss that diverged), and such a tool result was cut as characters, no longer JSON. ``dump``
    writes them back as the same tokens (the standard encoder's; orjson, which writes ``null``,
    is not used for a value holding one: ``orjson_writes_the_same``). A number a double does not
    hold as written is refused as by :func:`strict_json`."""
    return CONSTANTS_DECODER.decode(text)


def _not_json(obj: object) -> Any:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _make_canonical_dumps() -> Callable[[Any], str]:
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the standard encoder
        return json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
    encode = make(None, _not_json, json.encoder.encode_basestring, None, ":", ",", True, False, True)
    return lambda obj: "".join(encode(obj, 0))


canonical_dumps: Callable[[Any], str] = _make_canonical_dumps()
"""The canonical JSON as text, from the standard library's C encoder (see :func:`canonical_utf8`
for the bytes, faster).

One C encoder with those options is made once and reused. Why: ``JSONEncoder.encode`` makes a
new one (and its circular-reference table) per call, half of the 8 us it took per small dict
here. Without that table a circular value recurses until RecursionError instead of raising
ValueError; ``model_dump`` output cannot be circular."""

quote: Callable[[str], str] = json.encoder.encode_basestring
"""What ``canonical_dumps`` gives for a str (a key, say), without its per-call dispatch."""


def quote_utf8(text: str) -> bytes:
    """``quote(text).encode()``: a str's JSON literal as UTF-8, from orjson (its escapes are
    json's, see the module docstring); a lone surrogate fails in ``encode`` as before. For the
    large texts of a recipe's canonical JSON (``projections.entries``): escaping a 10 KB tool
    output in C took ~70 us."""
    try:
        return orjson.dumps(text)
    except TypeError:
        return quote(text).encode()


_SORT_KEYS = orjson.OPT_SORT_KEYS
_INT_MIN, _INT_END = -(1 << 63), 1 << 64
_FLOAT_MIN, _FLOAT_END = 1e-4, 1e16


def orjson_writes_the_same(obj: Any, str_: type = str, int_: type = int, float_: type = float,
                            bool_: type = bool, dict_: type = dict, list_: type = list,
                            tuple_: type = tuple) -> bool:
    """Whether orjson's canonical bytes of ``obj`` are ``json.dumps``'s (module docstring), short
    of the cases where orjson raises instead. (The builtins are bound as defaults, once: a
    manifest line is a dozen values, and binding them per call was a third of its walk.)"""
    stack = [obj]
    pop, extend = stack.pop, stack.extend
    while stack:
        o = pop()
        t = type(o)
        if t is str_ or o is None or t is bool_:
            continue
        if t is dict_:
            for key in o:
                if type(key) is not str_:
                    return False
            extend(o.values())
        elif t is list_ or t is tuple_:
            extend(o)
        elif t is int_:
            if not _INT_MIN <= o < _INT_END:
                return False
        elif t is float_:
            if not (_FLOAT_MIN <= abs(o) < _FLOAT_END or o == 0.0):  # NaN fails both
                return False
        else:
            return False
    return True


def canonical_utf8(obj: Any) -> bytes:
    """``canonical_dumps(obj).encode()``, byte for byte; through orjson where that is the same.

    A str, a bool, None or an int goes straight to orjson (no walk: a record dumps ~25 such
    members one by one); an empty list is ``[]`` (a request body's empty member lists, ~1 in 8
    of the walks in a tau-bench first build)."""
    t = type(obj)
    if t is str:
        return _packed(quote_utf8(obj))
    if t is list and not obj:
        return b"[]"
    if t is bool or obj is None or (t is int and _INT_MIN <= obj < _INT_END):
        return _packed(orjson.dumps(obj))
    if orjson_writes_the_same(obj):
        try:
            return _packed(orjson.dumps(obj, option=_SORT_KEYS))
        except TypeError:  # orjson.JSONEncodeError: a lone surrogate, nesting past its limit
            pass
    return canonical_dumps(obj).encode()


def canonical_utf8_no_float(obj: Any) -> bytes:
    """:func:`canonical_utf8` of a value the caller knows holds no float, and of builtin types
    only (str keys): it is not walked. For such a value orjson writes ``json.dumps``'s bytes or
    raises (module docstring), so the walk could only say yes. Why: a request message's dump is
    vouched for by its model's schema (``domain.float_members``)."""
    try:
        return _packed(orjson.dumps(obj, option=_SORT_KEYS))
    except TypeError:  # orjson.JSONEncodeError: an int past 64 bits, a lone surrogate, nesting
        return canonical_dumps(obj).encode()


def compact_json(obj: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``: compact, keys in their
    order; through orjson where that is the same text (the cases above do not depend on key
    order). For structured values carried as text: the importers' tool arguments and outputs
    (key order as the model produced it), and safe truncation's renders of a JSON tool result,
    several per cut (the standard encoder was ~2% of a tau-bench first build). A lone surrogate
    is written as the standard encoder writes it (the caller decides what to do with such text).

    A str goes straight to orjson (no walk: a JSON cut's pieces write each short string member
    of a tool result alone, ~1 in 8 of the walks in a tau-bench first build)."""
    if type(obj) is str or orjson_writes_the_same(obj):
        try:
            return orjson.dumps(obj).decode()
        except TypeError:  # orjson.JSONEncodeError: a lone surrogate, nesting past its limit
            pass
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _packed(data: bytes) -> bytes:
    """``data`` in a bytes object of its own size. Why: orjson returns its output in the buffer
    it wrote it into, sized for the worst case and not shrunk. A short output sits alone in ~4
    KB: the memos keep ~10,000 manifest lines per long run, and joining them into a record read
    one page per line (a 10,000-line join 0.6 ms against 0.4 ms for lines laid out densely,
    ``bench_ab --write`` B 1.07 before this copy). A long string holds ~13x its length (orjson
    3.13: a 5 KB message 64 KB, a 100 KB one 1 MB, by ``tracemalloc``): the JSON memo of a
    10,000-message run's messages, bounded at 64 MB of text, held ~375 MB, and ``contextfold
    audit`` of that run peaked at 861 MB. The copy costs ~0.2 us for a short output, a
    ``memcpy`` for a long one."""
    return bytes(memoryview(data))


def canonical_object(members: dict[str, bytes]) -> bytes:
    """The canonical JSON (UTF-8) of an object whose members' canonical JSON is known (key ->
    bytes): for callers that keep the JSON of large members instead of dumping them again.

    One join of the pieces: a record's manifest member is ~2 MB on a long run, and a member
    formatted first and joined after was copied twice. Bytes, not str: encoding a large str
    with one non-ASCII character in it is ~30x slower than copying its bytes."""
    parts = [b"{"]
    for key in sorted(members):
        parts += (quote(key).encode(), b":", members[key], b",")
    parts[-1] = b"}" if len(parts) > 1 else b"{}"
    return b"".join(parts)

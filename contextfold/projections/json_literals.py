"""JSON as safe truncation reads and writes it: every number as it was written.

Why: a JSON cut parses the document, drops items, members and string tails, and writes what is
left. A number Python's value does not write back as it was read was refused (``strict_json``):
``1e400`` (``inf``, written ``Infinity``, not JSON), ``1e-400`` (``0.0``),
``1234567.123456789012345`` (digits lost), an integer past Python's 4,300-digit conversion limit.
Such a tool result was cut as text, and the kept head and tail around a marker no JSON reader
parses (DESIGN 7: "a truncated JSON value stays valid JSON"). Here such a number is read as a
:class:`Number` holding its literal and written back verbatim, so the cut stays a JSON cut and
its numbers are the document's, byte for byte (``-0``, ``1.50`` and ``1E5`` too: Python would
write ``0``, ``1.5`` and ``100000.0``). ``NaN`` and ``Infinity`` read as floats, which the
standard encoder writes as the same tokens.

An object that names a member twice (RFC 8259 leaves it to the reader) raises
:class:`DuplicateKeys`: a parse keeps the last value at the first name's place, so a cut of the
parse showed one member where the document has two, and the other's value nowhere. The cut keeps
a head of such a document as written instead (:mod:`~contextfold.projections.json_deep`), as it
does of one whose numbers to keep could not be told from its strings (:class:`Number`).

A byte order mark before the document (:data:`BOM`) is no part of it: the cut reads and shows
what follows it (Python's parser refuses a text that starts with one).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

__all__ = ["BOM", "SYNTAX_DECODER", "DuplicateKeys", "Number", "Unwritable", "is_scalar", "loads",
           "scalar_literal", "unquote"]

BOM = "\ufeff"


class Number(str):
    """A JSON number kept as its literal (:attr:`text`): Python's value of it would be written
    otherwise.

    A ``str`` whose characters are the literal between two NULs, so that the encoders (orjson's
    check refuses a ``str`` subclass: the standard library's C encoder) write a render holding it
    at C speed, as the string ``"\\u0000<literal>\\u0000"``, which :func:`unquote` replaces by the
    literal. Unambiguous while no string of the document holds a NUL: one can only be written
    ``\\u0000`` in JSON, and :func:`loads` refuses a text with numbers to keep that holds one
    (:class:`Unwritable`). A walk that wrote the numbers itself cost more than the parse (~280
    ms to find the containers holding one in a 2 MB array of records: a price written ``19.90``)."""

    __slots__ = ()

    def __new__(cls, literal: str) -> Number:
        return super().__new__(cls, f"\0{literal}\0")

    @property
    def text(self) -> str:
        return self[1:-1]

    def __repr__(self) -> str:
        return f"Number({self.text!r})"


def is_scalar(value: Any) -> bool:
    """Whether a parsed JSON value is a number, ``true``, ``false`` or ``null``: neither a string
    (a :class:`Number` is a ``str`` subclass, not a ``str``) nor a container."""
    return type(value) is not str and not isinstance(value, list | dict)


def scalar_literal(value: Any) -> str:
    """A scalar's JSON text as the document wrote it: a :class:`Number`'s literal; any other
    number is one Python writes back as it was read (:func:`loads`)."""
    return value.text if isinstance(value, Number) else json.dumps(value)


_QUOTED = re.compile(r'"\\u0000(-?[0-9][-+.0-9eE]*)\\u0000"')
"""A :class:`Number` as the encoders write it: a string of its literal between two NULs."""


def unquote(text: str) -> str:
    """The JSON ``text`` (a render of a value holding a :class:`Number`) with each number as its
    literal."""
    return _QUOTED.sub(r"\1", text)


class Unwritable(ValueError):
    """JSON whose parse would not be written back as the document says (see the module doc):
    the cut keeps a head of it as written."""


class DuplicateKeys(Unwritable):
    """An object of the document names one member twice (see the module doc)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise DuplicateKeys("an object names a member twice")
    return out


def loads(text: str) -> tuple[Any, bool]:
    """``text`` (after a leading :data:`BOM`) parsed, and whether it holds a :class:`Number`.

    A ``ValueError`` when it is not JSON (:class:`Unwritable` when it is, but an object names a
    member twice or a number to keep meets a NUL), a ``RecursionError`` when it is nested past
    the parser. Integers are read by
    the parser's own code unless the text could hold ``-0`` or the first parse failed (a literal
    past the digit limit): a hook on every integer cost ~15% of a large document's parse."""
    text = text.removeprefix(BOM)
    kept = False

    def floats(literal: str) -> float | Number:
        nonlocal kept
        value = float(literal)
        if repr(value) == literal:
            return value
        kept = True
        return Number(literal)

    def ints(literal: str) -> int | Number:
        nonlocal kept
        if literal != "-0":
            try:
                return int(literal)
            except ValueError:  # past ``sys.get_int_max_str_digits()``
                pass
        kept = True
        return Number(literal)

    hooked = "-0" in text
    while True:
        decoder = json.JSONDecoder(parse_float=floats, parse_int=ints if hooked else None,
                                   object_pairs_hook=_unique)
        try:
            value = decoder.decode(text)
        except Unwritable:
            raise
        except ValueError:
            if hooked or len(text) <= sys.get_int_max_str_digits():  # no literal past it: not JSON
                raise
            hooked = True
            continue
        if kept and "\\u0000" in text:  # a string may hold what a Number's text looks like
            raise Unwritable("a number to keep as written, and a NUL in a string")
        return value, kept


SYNTAX_DECODER = json.JSONDecoder(parse_float=str, parse_int=str)
"""Whether (and where: ``raw_decode``) a text is JSON as :func:`loads` takes it, its values not
converted: any number, a member named twice (the cut keeps a head of it), ``NaN``. Not for a text
that starts with a :data:`BOM`."""

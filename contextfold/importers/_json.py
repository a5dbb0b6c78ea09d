"""Strict loading of JSON / JSONL import sources, with line numbers for errors.

Importers are pure parsers: bytes in, events out. Everything hostile about an
input is caught here, before any format logic runs, and reported as an
:class:`~contextfold.domain.errors.ImportFormatError` with ``source:line``:

- bytes that are not UTF-8 (decoded strictly; the line of the first bad byte), or not the
  UTF-16/UTF-32 a byte order mark (or the zero bytes of ASCII) names: such a file is read;
- JSON that does not parse (the line :mod:`json` reports, e.g. a truncated file);
- nesting deeper than :data:`MAX_DEPTH` (also the interpreter's own recursion
  limit), reported at the line where the limit is crossed;
- an integer of more digits than the interpreter converts (4,300 by default), at its line.

A number the trace spells more exactly than a double holds (``1e400``, ``0.10000000000000000001``)
is read as the float it rounds to, but as a :class:`SpelledFloat` that remembers its spelling, so
:func:`spelled_json` writes a tool call's parsed arguments with the numbers the model wrote.

One thing is mended instead: a ``\\ud83d`` escape with no partner (half a UTF-16 pair: a
JavaScript tool cut its output inside an emoji) is read as U+FFFD, as a UTF-8 decoder reads a
broken sequence, and counted (:attr:`Doc.lone_surrogates`) so the import says so. No UTF-8 store
or request body can carry the lone half, and refusing it refused the whole trace.

Format parsers then work on plain Python values and raise :class:`Bad` with a
*JSON path* (``("messages", 4, "tool_calls", 0)``) instead of a line: the
path is turned into a line only when an error actually happens
(:meth:`Doc.line_of`), so the happy path pays nothing for locations.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, TypeAlias

from contextfold.domain.canonical import compact_json
from contextfold.domain.errors import ImportFormatError

__all__ = ["MAX_DEPTH", "Bad", "Doc", "JsonPath", "SpelledFloat", "load", "spelled_json"]

MAX_DEPTH = 200
"""Deepest container nesting accepted. Real agent histories stay far below it
(tool arguments are strings); anything deeper is hostile or broken."""

JsonPath: TypeAlias = tuple[str | int, ...]


class Bad(Exception):
    """Internal: a format error at a JSON path, turned into ``source:line`` by the caller."""

    def __init__(self, path: JsonPath, reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason


_DECODER = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
"""A JSON string (unrolled loop, fast on huge strings)."""
# A JSON string or a bracket.
_TOKEN = re.compile(_STRING + r"|[\[\]{}]", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Doc:
    """A loaded source: one JSON document, or JSONL (one value per non-blank line).

    For JSONL, ``value`` is the list of line values and ``lines[i]`` is the
    1-based line number of ``value[i]``; a path's first element indexes it.
    """

    text: str
    value: Any
    jsonl: bool
    lines: tuple[int, ...] = ()
    lone_surrogates: tuple[int, int] = (0, 0)
    """How many lone surrogates were read as U+FFFD (module docstring), and the line of the first."""

    def surrogate_note(self, source: str) -> list[str]:
        """The import's note on the lone surrogates mended, if any."""
        count, line = self.lone_surrogates
        if not count:
            return []
        return [f"note: {source}:{line}: {count} lone surrogate escape(s) (half a UTF-16 pair, e.g. "
                "\\ud83d of an emoji cut in two) recorded as U+FFFD: no UTF-8 text can hold one"]

    def line_of(self, path: JsonPath) -> int:
        if self.jsonl:
            if path and isinstance(path[0], int) and 0 <= path[0] < len(self.lines):
                return self.lines[path[0]]
            return 1
        return self.text.count("\n", 0, _offset_of(self.text, path)) + 1


def _ws(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m else pos


def _offset_of(text: str, path: JsonPath) -> int:
    """Character offset where the value at ``path`` starts (best effort).

    Walks the text with :meth:`json.JSONDecoder.raw_decode` to skip sibling
    values at C speed. Only used on the error path. Falls back to the deepest
    position it reached when the path does not resolve.
    """
    pos = _ws(text, 0)
    try:
        for key in path:
            ch = text[pos]
            if ch == "[" and isinstance(key, int):
                pos = _ws(text, pos + 1)
                for _ in range(key):
                    _, pos = _DECODER.raw_decode(text, pos)
                    pos = _ws(text, pos)
                    if text[pos] != ",":
                        return pos
                    pos = _ws(text, pos + 1)
            elif ch == "{" and isinstance(key, str):
                start = pos
                pos = _ws(text, pos + 1)
                while text[pos] == '"':
                    k, pos = _DECODER.raw_decode(text, pos)
                    pos = _ws(text, _ws(text, pos) + 1)  # past ':'
                    if k == key:
                        break
                    _, pos = _DECODER.raw_decode(text, pos)
                    pos = _ws(text, pos)
                    if text[pos] != ",":
                        return start
                    pos = _ws(text, pos + 1)
                else:
                    return start
            else:
                return pos
    except (IndexError, ValueError):
        return min(pos, len(text))
    return pos


def _deep_offset(text: str) -> int:
    """Offset of the first bracket that opens nesting level ``MAX_DEPTH + 1``."""
    depth = 0
    for m in _TOKEN.finditer(text):
        ch = text[m.start()]
        if ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return m.start()
        elif ch in "]}":
            depth -= 1
    return 0


def _long_number(text: str) -> tuple[int, int] | None:
    """Offset and length of the first number outside a string with more digits than the
    interpreter converts to an int; None if there is none.

    Why: :func:`json.loads` raises a bare ``ValueError`` for such a number (Python's guard against
    quadratic int parsing, 4,300 digits by default), not a ``JSONDecodeError`` with a position,
    and an import file holding one ended in a traceback (exit 1) instead of naming its line."""
    limit = sys.get_int_max_str_digits()
    if limit == 0:  # no limit set: the ValueError was another one
        return None
    pattern = re.compile(_STRING + f"|([0-9]{{{limit + 1},}})", re.DOTALL)
    for m in pattern.finditer(text):
        if m.group(1):
            return m.start(1), len(m.group(1))
    return None


def _too_deep(value: Any) -> bool:
    """Iterative (no recursion) check that no container nests deeper than MAX_DEPTH."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        children = v.values() if isinstance(v, dict) else v
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


class SpelledFloat(float):
    """A float read from a number the double does not hold exactly (``1e400`` is inf,
    ``0.10000000000000000001`` is 0.1), with the number's text (:attr:`text`).

    Why: an importer writes a tool call's parsed arguments back as text (the log keeps arguments
    as a JSON string), and ``json.dumps`` wrote ``Infinity`` (not JSON) or the rounded number: the
    call in the log was not the one the model made. Everything else reads the float it is."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> SpelledFloat:
        spelled = super().__new__(cls, text)
        spelled.text = text
        return spelled


def _number(text: str) -> float:
    """``parse_float``: the float of ``text``, a :class:`SpelledFloat` when ``json.dumps`` would
    write it as another number (``repr`` of the float is not the number ``text`` is). ``1E5``,
    ``1.50``, ``1e-7`` are written ``100000.0``, ``1.5``, ``1e-07`` as before: the same numbers.
    The usual number (the shortest spelling of its double) costs one ``repr``."""
    value = float(text)
    shown = repr(value)
    if shown == text or (value - value == 0 and Decimal(shown) == Decimal(text)):  # finite, same number
        return value
    return SpelledFloat(text)


def spelled_json(value: Any) -> str:
    """:func:`~contextfold.domain.canonical.compact_json` of a parsed value, a
    :class:`SpelledFloat` in it written as the trace spelled it (its type says it is one)."""
    if not _holds_spelled(value):
        return compact_json(value)
    parts: list[str] = []
    _write_spelled(value, parts)
    return "".join(parts)


def _holds_spelled(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if type(node) is SpelledFloat:
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _write_spelled(value: Any, parts: list[str]) -> None:
    """Recursive: a parsed value nests at most :data:`MAX_DEPTH` deep."""
    if type(value) is SpelledFloat:
        parts.append(value.text)
    elif isinstance(value, dict):
        parts.append("{")
        for i, (key, item) in enumerate(value.items()):
            parts.append("," if i else "")
            parts += (compact_json(key), ":")
            _write_spelled(item, parts)
        parts.append("}")
    elif isinstance(value, list):
        parts.append("[")
        for i, item in enumerate(value):
            parts.append("," if i else "")
            _write_spelled(item, parts)
        parts.append("]")
    else:
        parts.append(compact_json(value))


def _loads(text: str, source: str, line_base: int) -> Any:
    """Parse one JSON text; errors carry the absolute line (``line_base`` = line of text[0])."""
    try:
        value = json.loads(text, parse_float=_number)
    except json.JSONDecodeError as e:
        raise ImportFormatError(
            f"{source}:{line_base + e.lineno - 1}", f"invalid JSON: {e.msg} (column {e.colno})"
        ) from None
    except RecursionError:
        value = None
        deep = True
    except ValueError as e:  # an integer longer than the interpreter converts (see _long_number)
        found = _long_number(text)
        offset, reason = (0, f"invalid JSON: {e}") if found is None else (
            found[0], f"invalid JSON: a number of {found[1]} digits (at most "
                      f"{sys.get_int_max_str_digits()} are read)")
        raise ImportFormatError(f"{source}:{line_base + text.count(chr(10), 0, offset)}", reason) from None
    else:
        deep = isinstance(value, dict | list) and _too_deep(value)
    if deep:
        line = line_base + text.count("\n", 0, _deep_offset(text))
        raise ImportFormatError(
            f"{source}:{line}", f"JSON nested deeper than {MAX_DEPTH} levels"
        ) from None
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _mend(text: str) -> tuple[str, int, int]:
    """``text`` with every lone surrogate escape written ``\\ufffd``, how many were, and the
    offset of the first (module docstring). Done on the text, before it is parsed: the escape and
    its mend are as long, so every offset, line and column stays. An escape is real when an even
    run of backslashes comes before it (``\\\\ud83d`` is a backslash, then text); a high half is
    paired when a low one follows at once, as :mod:`json` joins them. The scan starts at the
    first escape: a source without one (nearly every source) is searched once."""
    found = _SURROGATE_ESCAPE.search(text)
    if found is None:
        return text, 0, 0
    lone: list[int] = []
    pos = found.start()
    while (m := _SURROGATE_ESCAPE.search(text, pos)) is not None:
        at, pos = m.start(), m.end()
        start = at
        while start and text[start - 1] == "\\":
            start -= 1
        if (at - start) % 2:  # the backslash is the second of an escaped one
            continue
        if text[at + 3] in "89abAB":  # a high half: paired with a low one right after it
            after = _SURROGATE_ESCAPE.match(text, pos)
            if after is not None and text[pos + 3] not in "89abAB":
                pos = after.end()
                continue
        lone.append(at)
    if not lone:  # the escapes were whole pairs (an emoji written as ASCII)
        return text, 0, 0
    parts: list[str] = []
    last = 0
    for at in lone:
        parts += (text[last:at], "\\ufffd")
        last = at + 6
    parts.append(text[last:])
    return "".join(parts), len(lone), lone[0]


def _decode(data: bytes, source: str) -> str:
    """The text of ``data``: UTF-8 (a byte order mark dropped), or UTF-16/UTF-32 when a byte
    order mark or the zero bytes of ASCII text say so (RFC 4627 section 3, as ``json.loads``
    reads bytes). Why read them: RFC 8259 asks for UTF-8 between systems, but Windows tools
    write UTF-16 by default (PowerShell 5's ``>``), and such a file was refused as "invalid
    UTF-8 byte 0xff", naming neither its encoding nor the fix. Decoded strictly in every case."""
    encoding = json.detect_encoding(data)
    if encoding.startswith("utf-8"):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise ImportFormatError(
                f"{source}:{line}", f"invalid UTF-8 byte 0x{data[e.start]:02x} at byte {e.start}"
            ) from None
        return text.removeprefix("\ufeff")
    try:
        return data.decode(encoding).removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = data[:e.start].decode(encoding, errors="replace").count("\n") + 1
        said = ("its byte order mark" if encoding in ("utf-16", "utf-32")
                else "the zero bytes of its first characters")
        raise ImportFormatError(
            f"{source}:{line}", f"invalid {encoding.upper()} at byte {e.start} ({e.reason}): read as "
            f"{encoding.upper()} because of {said}; save the file as UTF-8 to import it"
        ) from None


def load(data: bytes, source: str, *, jsonl: bool | None = None) -> Doc:
    """Decode and parse ``data``.

    ``jsonl=None`` accepts either: one JSON document, or (when the text holds
    several top-level values) one value per line. ``True`` forces JSONL.
    """
    text, count, first = _mend(_decode(data, source))
    mended = (count, text.count("\n", 0, first) + 1) if count else (0, 0)
    if not text.strip():
        raise ImportFormatError(f"{source}:1", "empty input")
    if jsonl is None:
        try:
            return Doc(text, _loads(text, source, 1), jsonl=False, lone_surrogates=mended)
        except ImportFormatError as e:
            if not e.reason.startswith("invalid JSON: Extra data"):
                raise
    values: list[Any] = []
    lines: list[int] = []
    for n, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            values.append(_loads(line, source, n))
            lines.append(n)
    return Doc(text, values, jsonl=True, lines=tuple(lines), lone_surrogates=mended)

"""Untrusted text made safe to show: control and format characters made visible.

Fragment sources, tool names, model names and details come from tool output,
files and imported histories. Printed raw, an ANSI escape (``\\x1b[2J``) clears
or recolours the reader's terminal, a newline or tab breaks a table row, and a
bidi override (U+202E) reorders what follows it on screen, in a terminal as in
the HTML report. :func:`visible` replaces each such character by its escape
(``\\x1b``, ``\\n``, ``\\u202e``), so what the reader sees is what is there.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["visible", "visible_json", "visible_text"]

_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
"""Control, format (bidi overrides and isolates, zero-width characters), surrogate, private-use
and line/paragraph separator characters."""


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(value: object) -> str:
    """``str(value)`` with every control/format character replaced by its backslash escape."""
    text = str(value)
    if text.isprintable():  # the common case: nothing to replace (isprintable is False for all of _HIDDEN)
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _HIDDEN else ch for ch in text)


_LINES = re.compile(r"(\r?\n|\t)")


def visible_text(text: str) -> str:
    """:func:`visible`, keeping the newlines (``\\r\\n`` read as one) and tabs that lay out a
    multi-line text: a tool's output shown whole (``show``), where an escaped newline would run
    every line into one."""
    if text.isprintable():
        return text
    parts = _LINES.split(text)  # text, separator, text, ...: the separators at odd indices
    return "".join(visible(part) if i % 2 == 0 else "\n" if part == "\r\n" else part
                   for i, part in enumerate(parts))


_JSON_SUSPECT = re.compile(r"[^\x20-\x7e\n\r\t]")
"""What JSON text may hold that is not printable ASCII; raw line breaks and tabs are the layout
between its tokens (a string holds them escaped)."""


def _json_escape(match: re.Match[str]) -> str:
    ch = match.group()
    if unicodedata.category(ch) not in _HIDDEN:
        return ch
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON spells a character past U+FFFF as its UTF-16 surrogate pair
    return f"\\u{0xd800 + (code >> 10):04x}\\u{0xdc00 + (code & 0x3ff):04x}"


def visible_json(text: str) -> str:
    """JSON text with every control/format character :func:`visible` escapes written as its JSON
    escape (``\\u202e``, ``\\u009b``): the same JSON value, safe to show on a terminal, where
    the raw character would reorder what follows it or start a control sequence.

    Why not :func:`visible`: its ``\\x1b`` is no JSON escape, and ``--json`` output stays JSON
    that a person can copy into a program. Why not ``ensure_ascii``: a CJK or accented text stays
    readable, and only what a terminal acts on is escaped. Outside its strings JSON is printable
    ASCII and whitespace, so each character replaced is inside a string, where its escape means
    the same character."""
    if text.isascii() and "\x7f" not in text:  # the common case: nothing to replace
        return text
    return _JSON_SUSPECT.sub(_json_escape, text)

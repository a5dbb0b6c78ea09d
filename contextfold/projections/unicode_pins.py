"""NFKC pinned to Unicode 15.1, whatever Unicode database the running Python ships.

Why: a build's request must be the same bytes on every machine a run is replayed on
(``replay --verify``), and ``unicodedata`` is the interpreter's: Python 3.11 has Unicode 14.0,
3.12 has 15.0, 3.13 has 15.1. Unicode's stability policy freezes a character's decomposition
once it is assigned, so NFKC differs between those databases only for characters assigned after
14.0, and of those only the 62 modifier Cyrillic letters of Unicode 15.0 (U+1E030..U+1E06D,
``<super>`` forms of Cyrillic letters) decompose at all (measured over every code point, 3.11
against 3.13; 15.1 added no decomposition). Several of them read as the ASCII letters the trust
boundary looks for (``</d\\U0001e030ta>`` is ``</data>`` to a reader), so on 3.11 the tag stayed
and on 3.13 it was neutralised: two requests from one log. They are folded here by an explicit
table (their Unicode 15.1 decompositions), so the skeleton and the tool terms are the same on
3.11, 3.12 and 3.13.
"""

from __future__ import annotations

import re
import sys
import unicodedata

__all__ = ["PINNED_UNICODE", "pinned_nfkc", "reclassified_characters", "unicode_database"]

PINNED_UNICODE = "15.1.0"
"""The Unicode version whose NFKC :func:`pinned_nfkc` gives (on an interpreter that has it or an
older one; the tests check the table against a real 15.0 and 15.1 database)."""

_MODIFIER_CYRILLIC = dict(zip(
    range(0x1E030, 0x1E06E),
    "абвгдежзиклмопрстуфхцчшыэюꚉәіјөүӏабвгдежзиклопсуфхцчшъыґіѕџҫꙑұ",
    strict=True))
"""U+1E030..U+1E06D (Cyrillic Extended-D, Unicode 15.0) -> their compatibility decompositions."""
_DECOMPOSED_ALREADY = unicodedata.normalize("NFKC", "\U0001e030") != "\U0001e030"
"""This Python's database has them (3.12 and later): the table is then what it does anyway."""


def pinned_nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)`` as Unicode 15.1 defines it (module docstring)."""
    if not _DECOMPOSED_ALREADY and not text.isascii():
        text = text.translate(_MODIFIER_CYRILLIC)
    return unicodedata.normalize("NFKC", text)


_RECLASSIFIED_RANGES = (
    (0x1123F, 0x11240), (0x11F02, 0x11F02), (0x11F04, 0x11F10), (0x11F12, 0x11F33),
    (0x11F50, 0x11F59), (0x1342F, 0x1342F), (0x13441, 0x13446), (0x1B132, 0x1B132),
    (0x1B155, 0x1B155), (0x1D2C0, 0x1D2D3), (0x1DF25, 0x1DF2A), (0x1E030, 0x1E06D),
    (0x1E4D0, 0x1E4EB), (0x1E4F0, 0x1E4F9), (0x2B739, 0x2B739), (0x2EBF0, 0x2EE5D),
    (0x31350, 0x323AF),
)
"""The letters and digits Unicode assigned after 14.0, up to 15.1 (Kawi, Nag Mundari, Kaktovik
numerals, CJK extensions H and I...): measured over every code point, the only characters whose
``\\w``, ``\\b``, ``\\d``, ``str.isalnum``/``isalpha``/``isdigit`` or tool terms differ between
Python 3.11, 3.12 and 3.13 (the other characters assigned since, emoji and marks, differ only in
``isprintable``, which no build reads). Their NFKC is pinned above; their classification, read by
dozens of patterns, is not: a build over them may differ between those Pythons, which
:func:`reclassified_characters` lets a replay say."""
_RECLASSIFIED = re.compile("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in _RECLASSIFIED_RANGES) + "]")


def reclassified_characters(text: str) -> list[str]:
    """The characters of ``text`` that Python 3.11, 3.12 and 3.13 classify differently (above)."""
    return [] if text.isascii() else _RECLASSIFIED.findall(text)


def unicode_database() -> str:
    """This interpreter and its Unicode database, as a replay names them."""
    return f"Python {sys.version.split()[0]}, Unicode {unicodedata.unidata_version}"

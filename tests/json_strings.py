"""Every string a JSON-like value holds, in document order: how the tests look for text in a
rendered request, whatever shape the provider nests its messages in (four test modules had a
copy of this walk)."""

from __future__ import annotations

from typing import Any

__all__ = ["joined_strings", "strings"]


def strings(value: Any) -> list[str]:
    """The strings of ``value`` (dict values, list items, nested), depth first."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def joined_strings(value: Any) -> str:
    """:func:`strings` of ``value``, a line apart."""
    return "\n".join(strings(value))

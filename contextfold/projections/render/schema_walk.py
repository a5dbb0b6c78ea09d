"""The subschemas of a JSON Schema, found only where a key is a keyword.

Why a module of its own: two rules read every subschema of a tool's parameters, each with the
keywords it cares about and in its own order — the strict-mode subset (``strict_mode``: draft 7's
``definitions`` too, since OpenAI reads them) and the 2020-12 metaschema's keyword types
(``schema_validity``: ``contentSchema`` too, never ``definitions``, an unknown keyword there).
The walk is the same: a ``properties`` map's keys are names, an ``enum``'s or a ``default``'s
value is data, and only objects are schemas with keywords of their own (a boolean schema has
none). Iterative, so a schema nested past the interpreter's recursion limit is walked too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, TypeAlias

__all__ = ["KeywordGroups", "schema_nodes", "subschemas"]

KeywordGroups: TypeAlias = Sequence[tuple[Literal["schema", "list", "map"], Sequence[str]]]
"""Keywords by the shape of their value, in the order their subschemas are walked: ``schema``
(one schema), ``list`` (an array of schemas), ``map`` (names to schemas)."""


def subschemas(node: Mapping[str, Any], path: str, groups: KeywordGroups) -> Iterator[tuple[str, Any]]:
    """``node``'s direct subschemas under ``groups``' keywords, each with its path (dot-joined
    keys), whatever their type: a value that is no schema is for the caller to name."""
    at = f"{path}." if path else ""
    for shape, keys in groups:
        for key in keys:
            if key not in node:
                continue
            value = node[key]
            if shape == "schema":
                yield f"{at}{key}", value
            elif shape == "list" and isinstance(value, list):
                yield from ((f"{at}{key}.{i}", sub) for i, sub in enumerate(value))
            elif shape == "map" and isinstance(value, dict):
                yield from ((f"{at}{key}.{name}", sub) for name, sub in value.items())


def schema_nodes(schema: Any, groups: KeywordGroups) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object subschema of ``schema`` with its path ("" for the top level), each node before
    its children, its children in ``groups``' order."""
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        stack.extend(reversed(list(subschemas(node, path, groups))))

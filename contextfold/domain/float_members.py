"""Which members of a model's JSON dump may hold a float: decided once per model class.

Why: :func:`~contextfold.domain.canonical.canonical_utf8` walks every value before it lets
orjson write it, because orjson writes some floats otherwise than ``json.dumps`` (``5e-05`` is
``0.00005``, ``NaN`` is ``null``). For everything else orjson writes the same bytes or raises
(an int past 64 bits, a lone surrogate, nesting past its limit: the standard encoder then
writes it). A model's schema says where a float can be: a request message is strings, ints,
bools and literals, and walking each new one was ~0.75% of a tau-bench first build's
machine instructions (``scripts/count_build_work.py``). So the
schema is read once per class (:func:`float_members`) and only the members it cannot vouch
for are walked (``request_json``'s model dumps).

The schema vouches for the values of an instance that holds its fields' types: a validated
one, or one made by :func:`~contextfold.domain.trusted.trusted` from values of those types (the
builder's messages; the suite checks each against validation, and each text written this way
against the walked one). Not for one made by ``model_construct`` from values of other types
(pydantic's own warning says so as it dumps it). Why not have pydantic check the types as it
dumps (``warnings="error"``): that made a message's dump ~35% dearer, as much as the walk saved.

Anything this module does not know (a float, ``Any``, a custom serializer, an after-validator
whose return is not validated, a computed field, an alias) may hold a float.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["float_members"]

_PLAIN_LEAVES = frozenset({"str", "int", "bool", "none"})
"""Core schema types whose JSON value is never a float (a str, an int, a bool, null)."""
_PLAIN_VALUES = (str, int, bool, type(None))
_WRAPPERS = frozenset({"nullable", "default", "function-before"})
"""Core schema types whose value is their inner schema's (a before-validator's output is
validated by the inner schema)."""
_ARRAYS = frozenset({"tuple", "list", "set", "frozenset"})

_MEMO: dict[type[BaseModel], tuple[str, ...] | None] = {}


def float_members(cls: type[BaseModel]) -> tuple[str, ...] | None:
    """The top-level keys of ``cls``'s JSON dump whose values may hold a float (``()``: none
    can), or ``None`` when the schema does not tell (a root model, a model serializer, computed
    fields, aliases, extra values): then the whole dump may."""
    try:
        return _MEMO[cls]
    except KeyError:
        pass
    out = _MEMO[cls] = _decide(cls)
    return out


def _decide(cls: type[BaseModel]) -> tuple[str, ...] | None:
    schema: Mapping[str, Any] = cls.__pydantic_core_schema__
    definitions: dict[str, Mapping[str, Any]] = {}
    if schema.get("type") == "definitions":
        definitions = {d["ref"]: d for d in schema["definitions"]}
        schema = schema["schema"]
    if schema.get("type") == "definition-ref":
        schema = definitions.get(schema["schema_ref"], {})
    fields = _model_fields(schema)
    if fields is None:
        return None
    walk = _Walk(definitions)
    keys: list[str] = []
    for name, field in fields.items():
        if field.get("serialization_alias") is not None:
            return None
        if not walk.plain(field["schema"]):
            keys.append(name)
    return tuple(keys)


def _model_fields(schema: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The field schemas of a ``model`` schema whose dump is its fields, each under its name."""
    if schema.get("type") != "model" or schema.get("root_model") or "serialization" in schema:
        return None
    inner = schema["schema"]
    if (inner.get("type") != "model-fields" or inner.get("computed_fields")
            or inner.get("extras_schema") is not None or "serialization" in inner
            or schema.get("config", {}).get("extra_fields_behavior") == "allow"):
        return None
    fields: Mapping[str, Any] = inner["fields"]
    return fields


class _Walk:
    """Whether a core schema's JSON value never holds a float; a reference being walked counts
    as plain (a recursive model is plain if the rest of it is)."""

    def __init__(self, definitions: dict[str, Mapping[str, Any]]) -> None:
        self._definitions = definitions
        self._visiting: set[str] = set()

    def plain(self, schema: Mapping[str, Any]) -> bool:
        if "serialization" in schema:  # a custom serializer may write anything
            return False
        kind = schema.get("type")
        if kind in _PLAIN_LEAVES:
            return True
        if kind == "literal":
            return all(type(v) in _PLAIN_VALUES for v in schema["expected"])
        if kind == "enum":
            return all(type(m.value) in _PLAIN_VALUES for m in schema["members"])
        if kind in _WRAPPERS:
            return self.plain(schema["schema"])
        if kind in _ARRAYS:
            items = schema.get("items_schema", {"type": "any"})
            return all(map(self.plain, items if isinstance(items, list) else [items]))
        if kind == "dict":
            return (self.plain(schema.get("keys_schema", {"type": "any"}))
                    and self.plain(schema.get("values_schema", {"type": "any"})))
        if kind == "union":
            return all(self.plain(c[0] if isinstance(c, tuple) else c) for c in schema["choices"])
        if kind == "tagged-union":
            return all(map(self.plain, schema["choices"].values()))
        if kind == "model":
            fields = _model_fields(schema)
            return fields is not None and all(
                f.get("serialization_alias") is None and self.plain(f["schema"]) for f in fields.values())
        if kind == "definitions":
            self._definitions.update((d["ref"], d) for d in schema["definitions"])
            return self.plain(schema["schema"])
        if kind == "definition-ref":
            ref = schema["schema_ref"]
            if ref in self._visiting:
                return True
            target = self._definitions.get(ref)
            if target is None:
                return False
            self._visiting.add(ref)
            try:
                return self.plain(target)
            finally:
                self._visiting.discard(ref)
        return False  # float, any, decimal, an after-validator's unvalidated return, ...

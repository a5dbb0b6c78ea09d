"""An SDK request type's pydantic-core schema made strict and eager, for one pass in Rust.

Why: the OpenAI and Anthropic request types are TypedDicts. Validated as they are, unknown keys
are dropped silently and ``Iterable[...]`` fields come back as lazy ``ValidatorIterator``s, so
:mod:`.validate` used to drain every iterator and then walk the output beside the body looking
for a dropped key: two Python walks per node, most of the check's time (~50 us for a turn's new
openai-chat messages, a tenth of a build). The same verdict comes from the type's own core
schema with three edits, applied to a copy:

- every ``typed-dict`` that would drop unknown keys forbids them: an unknown key is an
  ``extra_forbidden`` error at its path, as the walk reported it (a TypedDict declared to allow
  them, as a tool's JSON Schema is, still does). The SDK's response models, which a request may
  hold as content blocks, forbid them too: they allow extra keys so that a newer API's response
  still parses, not because a request may carry them (the walk refused such a block's unknown
  key through the TypedDict it matched first);
- every ``generator`` (a lazy ``Iterable``) is a ``list``: its items are validated in the same
  pass (the lax list schema takes the lists and tuples a JSON body holds);
- a ``union`` whose choices all hold a literal ``type`` (or ``role``) field becomes a
  ``tagged-union`` on it: a value's tag leads to the choices whose literal takes it (one, or a
  smaller union of those), instead of trying each in turn (Anthropic's content blocks have 17
  choices, Responses' input items 33). An optional literal also takes a dict without the key,
  a nullable one a None there; a choice without such a literal leaves the union as it is.

``tests/unit/test_strict_schema.py`` compares the verdicts with the walk's on rendered bodies
and every single mutation of them (a key added or removed anywhere, any value replaced): they
agree, but for an empty JSON object where the type takes an array, refused now (the lazy
``Iterable`` iterated it as no items; the API refuses it), and for an Anthropic message block's
``cache_control`` that is not ``{"type": "ephemeral"...}``, refused now (the walk let any value
through there; the SDK's ``CacheControlEphemeralParam`` requires its ``type``, as the API does).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["TAG_MARK", "strict_core_schema"]

_TAG_KEYS = ("type", "role")
"""The keys a request type's unions are told apart by: content blocks and items by ``type``,
chat messages by ``role``."""


def strict_core_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A strict, eager copy of ``schema`` (a ``TypeAdapter``'s ``core_schema``); see the module."""
    out: dict[str, Any] = copy.deepcopy(dict(schema))
    definitions = {d["ref"]: d for d in out.get("definitions", ()) if isinstance(d, dict) and "ref" in d}
    if out.get("type") == "definitions":  # the definitions first, so a union whose choice refers
        _edit(out["definitions"], definitions)  # to a union defined there sees it tagged
        _edit(out["schema"], definitions)
    else:
        _edit(out, definitions)
    return out


def _edit(node: Any, definitions: Mapping[str, Any]) -> None:
    """Apply the edits in place, children first (a union's choices are already edited when it
    is tagged)."""
    if isinstance(node, list | tuple):
        for item in node:
            _edit(item, definitions)
        return
    if not isinstance(node, dict):
        return
    for value in node.values():
        _edit(value, definitions)
    kind = node.get("type")
    if (kind == "typed-dict" and _drops_extra_keys(node)) or kind == "model-fields":
        node["extra_behavior"] = "forbid"
    elif kind == "model":
        node.setdefault("config", {})["extra_fields_behavior"] = "forbid"
    elif kind == "generator":
        node["type"] = "list"
    elif kind == "union":
        _tag(node, definitions)


def _drops_extra_keys(typed_dict: Mapping[str, Any]) -> bool:
    """Whether a TypedDict schema drops unknown keys (pydantic's default). One that allows them
    (Anthropic's ``InputSchemaTyped``: a tool's JSON Schema, any keyword) keeps allowing them."""
    config = typed_dict.get("config") or {}
    return (typed_dict.get("extra_behavior") or config.get("extra_fields_behavior")) in (None, "ignore")


def _tag(union: dict[str, Any], definitions: Mapping[str, Any]) -> None:
    """Make ``union`` a ``tagged-union`` in place when a tag key tells its choices apart: each
    tag leads to the choices that take it (one, or a smaller union of them)."""
    choices = [c[0] if isinstance(c, tuple) else c for c in union["choices"]]
    for key in _TAG_KEYS:
        groups: dict[str, list[Any]] = {}
        for choice in choices:
            tags = _tags(_resolve(choice, definitions), key)
            if tags is None:
                break
            for tag in tags:
                groups.setdefault(tag, []).append(choice)
        else:
            if all(len(group) == len(choices) for group in groups.values()):
                continue  # the key tells nothing apart
            kept = {k: union[k] for k in ("ref", "metadata", "serialization") if k in union}
            union.clear()
            union.update(
                type="tagged-union",
                choices={tag: group[0] if len(group) == 1 else {"type": "union", "choices": group}
                         for tag, group in groups.items()},
                discriminator=_Discriminator(key), **kept)
            return


TAG_MARK = "\x00"
"""What every tag starts with. An error's ``loc`` holds the tag after the node it told apart;
the mark tells it from the body's own keys (``validate._body_path`` drops it)."""
_MISSING = TAG_MARK + "missing"
"""The tag of a dict without the key, when some choice takes it so (its literal is optional)."""
_NULL = TAG_MARK + "null"
"""The tag of a dict holding None at the key (a choice whose literal is nullable takes it)."""
_NOT_A_TAG = TAG_MARK + "none"
"""The tag of anything else (not a dict, or a value that is no string): no choice takes it."""


class _Discriminator:
    """A tagged union's discriminator: the tag of a value, by its ``key``."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.__name__ = f"tag_by_{key}"  # (pydantic-core names the validator after it)

    def __call__(self, value: Any) -> str:
        if not isinstance(value, dict):
            return _NOT_A_TAG
        if self.key not in value:
            return _MISSING
        found = value[self.key]
        return TAG_MARK + found if isinstance(found, str) else _NULL if found is None else _NOT_A_TAG


def _resolve(schema: Mapping[str, Any], definitions: Mapping[str, Any]) -> Mapping[str, Any]:
    seen = 0
    while schema.get("type") == "definition-ref" and seen < 64:
        schema, seen = definitions.get(schema["schema_ref"], {}), seen + 1
    return schema


def _tags(schema: Mapping[str, Any], key: str) -> set[str] | None:
    """The values a dict must hold at ``key`` for a TypedDict or model schema to take it (a
    literal field; :data:`_MISSING` among them when the field is optional, :data:`_NULL` when it
    is nullable), or None when the schema takes other values there too. A union tagged here on
    the same key takes its own tags."""
    if schema.get("type") == "tagged-union":
        by = schema.get("discriminator")
        return set(schema["choices"]) if isinstance(by, _Discriminator) and by.key == key else None
    if schema.get("type") == "typed-dict":
        field = schema.get("fields", {}).get(key)
        if not isinstance(field, dict):
            return None
        required = field.get("required", schema.get("total", True))
    elif schema.get("type") == "model" and schema.get("schema", {}).get("type") == "model-fields":
        field = schema["schema"]["fields"].get(key)
        required = True
    else:
        return None
    if not isinstance(field, dict) or "validation_alias" in field:
        return None
    inner = field.get("schema", {})
    if inner.get("type") == "default":
        inner, required = inner.get("schema", {}), False
    nullable = inner.get("type") == "nullable"
    if nullable:
        inner = inner.get("schema", {})
    values = inner.get("expected", []) if inner.get("type") == "literal" else []
    if not values or not all(isinstance(v, str) for v in values):
        return None
    return {TAG_MARK + v for v in values} | (set() if required else {_MISSING}) | (
        {_NULL} if nullable else set())

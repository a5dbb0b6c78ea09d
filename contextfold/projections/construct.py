"""``model_construct`` for the models a build makes whole from validated parts.

Why: the builder makes one ``ContextManifest`` and one ``Conversation`` per build from
parts that are already typed and validated (re-validating a long run's ~10,000 manifest
lines cost 0.35 ms). pydantic's ``model_construct`` then walks every field in Python,
looking for aliases and defaults: ~9 us for the manifest's 26 fields, a twentieth of a
short run's whole build. :func:`construct` gives the same object (same ``__dict__`` in field
order, same ``model_fields_set``) by assigning the instance's dict directly, for models
without aliases, a post-init hook, private attributes or ``extra="allow"`` (checked once per
class; any other model goes through ``model_construct``). Fields not passed take their
plain default, as ``model_construct`` gives them; a field whose default comes from a factory
must be passed (the factory would be called per object) or the call falls back.
tests/unit/test_construct.py compares the two on both models.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["construct"]

M = TypeVar("M", bound=BaseModel)

_Plan = tuple[tuple[str, ...], frozenset[str], dict[str, Any]]
_PLANS: dict[type[BaseModel], _Plan | None] = {}
"""model class -> (its field names in order, as a set, its immutable plain defaults), or None:
not constructible here."""
_IMMUTABLE = (type(None), bool, int, float, str, bytes)
_set = object.__setattr__


def _plan(cls: type[BaseModel]) -> _Plan | None:
    fields = cls.__pydantic_fields__
    if (cls.__pydantic_post_init__ is not None or cls.__pydantic_root_model__
            or cls.__private_attributes__ or cls.model_config.get("extra") == "allow"
            or any(f.alias is not None or f.validation_alias is not None for f in fields.values())):
        return None
    # model_construct hands out a copy of a mutable default: only immutable ones are reused here
    defaults = {name: f.default for name, f in fields.items() if f.default_factory is None and (
        isinstance(f.default, _IMMUTABLE) or f.default == ())}
    return tuple(fields), frozenset(fields), defaults


def construct(cls: type[M], **values: Any) -> M:
    """``cls.model_construct(**values)``, without its per-field walk where the model allows."""
    try:
        plan = _PLANS[cls]
    except KeyError:
        plan = _PLANS[cls] = _plan(cls)
    if plan is None:
        return cls.model_construct(**values)
    names, name_set, defaults = plan
    given = set(values)
    if given != name_set:
        if not given <= name_set or not (name_set - given) <= defaults.keys():
            return cls.model_construct(**values)
        values = {**defaults, **values}
    obj = cls.__new__(cls)
    _set(obj, "__dict__", dict(zip(names, map(values.__getitem__, names), strict=True)))
    _set(obj, "__pydantic_fields_set__", given)
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj

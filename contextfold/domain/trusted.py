"""Models made from values that are already of their fields' types: the builder's hot path.

Why: a build makes a few dozen small frozen models from parts that were validated when they
were folded (a manifest line from a folded fragment's fields, a request message from its
entry's text). Validating a manifest line again costs 2.3 us (pydantic-core), and
``model_construct``, pydantic's own trusted path, is slower still for a small model (4.3 us: it
walks the fields in Python); :func:`trusted` takes 1.6 us (best of 5 repeats here). Validation
was ~6% of a first build's samples (py-spy); ``scripts/bench_ab.py`` put the change at 0.96-0.97
of the first build on both workloads.

:func:`trusted` makes the same instance ``model_construct`` makes: the fields in declaration
order (defaults filled in), ``model_fields_set`` the given names, no extra and no private
values. It checks nothing, so a caller passes exactly the field types (a tuple where the field
is a tuple). The test suite runs with :data:`CHECKED` set (``tests/conftest.py``): then each
instance is also validated from the same values and must equal it, field by field and type by
type, so every test checks what the builder makes this way, and a pydantic upgrade that changes
an instance's layout fails there.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["trusted"]

M = TypeVar("M", bound=BaseModel)

CHECKED = False
"""Validate every instance :func:`trusted` makes and compare (the test suite sets it)."""

_TEMPLATES: dict[type[BaseModel], dict[str, Any]] = {}
_new = object.__new__
# BaseModel's own slot setters, called directly: ``object.__setattr__(model, name, value)`` looks
# the name up on the type each time (four lookups a model); these are the descriptors it finds.
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _template(cls: type[BaseModel]) -> dict[str, Any]:
    """Every field of ``cls`` in declaration order with its default (``None`` where it has
    none: the caller gives those). A model with a default factory, private attributes or
    extra values is refused: its instances need more than a field dict."""
    if cls.__private_attributes__:
        raise TypeError(f"{cls.__name__} has private attributes: use model_construct")
    if cls.__new__ is not object.__new__:
        raise TypeError(f"{cls.__name__} defines __new__: use model_construct")
    if cls.model_config.get("extra") == "allow":
        raise TypeError(f"{cls.__name__} allows extra values: use model_construct")
    template: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        if field.default_factory is not None:
            raise TypeError(f"{cls.__name__}.{name} has a default factory: use model_construct")
        template[name] = None if field.is_required() else field.default
    _TEMPLATES[cls] = template
    return template


def trusted(cls: type[M], /, **values: Any) -> M:
    """``cls.model_construct(**values)`` for a model of plain fields, in a third of its time:
    nothing is checked (see the module docstring). Every required field must be given."""
    model = _new(cls)  # BaseModel defines no __new__: object's, without looking it up on cls
    _set_dict(model, {**(_TEMPLATES.get(cls) or _template(cls)), **values})  # one merge, in field order
    _set_fields_set(model, set(values))
    _set_extra(model, None)
    _set_private(model, None)
    if CHECKED:
        _check(cls, model, values)
    return model


def _check(cls: type[BaseModel], model: BaseModel, values: dict[str, Any]) -> None:
    """Fail unless validating ``values`` gives ``model``: the same fields in the same order, each
    of the same type (a list where a tuple belongs would pass ``==``), the same fields set."""
    valid = cls(**values)
    made, want = model.__dict__, valid.__dict__
    if list(made) != list(want) or model.model_fields_set != valid.model_fields_set:
        raise AssertionError(f"trusted {cls.__name__}: fields {list(made)} != {list(want)}")
    for name, value in want.items():
        if made[name] != value or type(made[name]) is not type(value):
            raise AssertionError(f"trusted {cls.__name__}.{name}: {made[name]!r} is not {value!r}")

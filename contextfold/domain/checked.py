"""Models made from values a caller passed in, with a typed error instead of pydantic's.

Why: the API's keyword arguments and the CLI's flags (a window, a token count) become pydantic
models; a bad value surfaced as pydantic's ``ValidationError`` (a traceback in the CLI), outside
the project's error tree. Here it becomes :class:`~contextfold.domain.errors.InvalidInputError`
naming each field and what is wrong with it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from contextfold.domain.errors import InvalidInputError

__all__ = ["checked", "validation_detail"]

M = TypeVar("M", bound=BaseModel)


def checked(cls: type[M], what: str, /, **fields: Any) -> M:
    """``cls(**fields)``, or :class:`InvalidInputError` ("invalid ``what``: field: problem; ...").
    Positional-only: a model's fields may be called ``cls`` or ``what`` (or ``model``)."""
    for name, value in fields.items():  # pydantic takes True for 1: a count or a window it is not
        if type(value) is bool and _takes_int(cls, name):
            raise InvalidInputError(f"invalid {what}: {name}: expected an integer, got {value!r}")
    try:
        model = cls(**fields)
    except ValidationError as exc:
        raise InvalidInputError(f"invalid {what}: {validation_detail(cls, exc)}") from exc
    for name, value in fields.items():  # what no UTF-8 can carry (a non-UTF-8 argv byte) hashes nowhere
        if (bad := _surrogates(value)) is not None:
            raise InvalidInputError(f"invalid {what}: {name}: text that is not valid Unicode "
                                    f"(U+{ord(bad):04X}, a byte that was not UTF-8)")
    return model


def _takes_int(cls: type[BaseModel], name: str) -> bool:
    """Whether ``cls``'s field ``name`` holds an integer (or None), not a bool."""
    field = cls.model_fields.get(name)
    return field is not None and field.annotation in (int, int | None)


def _surrogates(value: Any) -> str | None:
    """The first lone surrogate in ``value``'s strings (nested in lists, tuples and dicts), if any."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return value[exc.start]
        return None
    items = (list(value) + list(value.values()) if isinstance(value, dict)
             else value if isinstance(value, list | tuple) else ())
    return next((bad for item in items if (bad := _surrogates(item)) is not None), None)


def validation_detail(cls: type[BaseModel], exc: ValidationError) -> str:
    """Each of ``exc``'s errors as ``field.path: message``, joined by ``; `` (the model's name
    for an error of the whole input): how a validation failure is told to a user."""
    return "; ".join(f"{'.'.join(map(str, err['loc'])) or cls.__name__}: {err['msg']}"
                     for err in exc.errors())

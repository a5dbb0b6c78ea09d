"""Models made from values a caller passed in, with a typed error instead of pydantic's.

Why: the API's keyword arguments and the CLI's flags (a window, a token count) become pydantic
models; a bad value surfaced as pydantic's ``ValidationError`` (a traceback in the CLI), outside
the project's error tree. Here it becomes :class:`~contextfold.domain.errors.InvalidInputError`
naming each field and what is wrong with it.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ValidationError
from pydantic_core import PydanticCustomError

from contextfold.domain.errors import InvalidInputError

__all__ = ["Integer", "checked", "checked_turn", "validation_detail"]

M = TypeVar("M", bound=BaseModel)


def _not_a_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a valid integer, not a boolean")
    return value


Integer = Annotated[int, BeforeValidator(_not_a_bool)]
"""An ``int`` field that refuses ``True`` and ``False``. Why: pydantic's lax mode takes ``True``
for 1, so ``ToolResult(exit_code=True)`` logged exit code 1 and ``build(window=True)`` asked for
a window of one token: a bool where a count belongs is a caller's mistake, never a count. The
rest of lax mode stays (``"3"`` and ``3.0`` are 3), so importers and stored records read as before."""


def checked(cls: type[M], what: str, /, **fields: Any) -> M:
    """``cls(**fields)``, or :class:`InvalidInputError` ("invalid ``what``: field: problem; ...").
    Positional-only: a model's fields may be called ``cls`` or ``what`` (or ``model``)."""
    try:
        model = cls(**fields)
    except ValidationError as exc:
        raise InvalidInputError(f"invalid {what}: {validation_detail(cls, exc)}") from exc
    for name, value in fields.items():  # what no UTF-8 can carry (a non-UTF-8 argv byte) hashes nowhere
        if (bad := _surrogates(value)) is not None:
            raise InvalidInputError(f"invalid {what}: {name}: text that is not valid Unicode "
                                    f"(U+{ord(bad):04X}, a byte that was not UTF-8)")
    return model


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


def checked_turn(turn: object) -> int:
    """``turn`` when it is a turn number, else InvalidInputError: a float or a string compared
    with the turn range raised TypeError, and 1.5 matched no turn, so the state and the rebuild
    were silently the run's current ones (recorded as a rebuild of the next turn)."""
    try:
        if isinstance(turn, bool):
            raise TypeError
        return operator.index(turn)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidInputError(f"turn must be an integer (1 is before the first model response), "
                                f"got {turn!r}") from None

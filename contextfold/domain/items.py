"""The type of a model field that holds several values: a tuple when read, any sequence when given.

Why: the log's models keep their lists as tuples (frozen, hashable, compared by value), and
pydantic takes any sequence but a string for a tuple field, a list becoming a tuple. A type
checker, though, reads a model's constructor from its annotations (pydantic's
``dataclass_transform``): ``ModelResponse(tool_calls=[ToolCall(...)])``, the README's own call,
was an ``arg-type`` error under ``mypy --strict`` unless the caller enabled pydantic's mypy
plugin. ``tool_calls: Items[ToolCall]`` is, at run time, exactly ``tuple[ToolCall, ...]`` (the
same schema, validation and JSON, so the log's bytes and hashes are unchanged); to a type checker
it is a descriptor whose ``__set__`` takes a ``Sequence[ToolCall]`` and whose ``__get__`` gives
``tuple[ToolCall, ...]``, so the constructor takes a list and a reader still gets a tuple (the
typing spec's rule for a dataclass field of a descriptor type, which mypy and pyright follow).

A default must then be written ``Items()`` (or ``Items(("a", "b"))``): at run time that is
``()`` (``tuple(...)``), and to a type checker a value of the field's declared type, as a bare
``()`` is not. :class:`ItemsOrNone` is the same for a field that may be None (``None`` means
something else than no items); its default ``ItemsOrNone()`` is None.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

__all__ = ["Items", "ItemsOrNone"]

T = TypeVar("T")

if TYPE_CHECKING:

    class Items(Generic[T]):
        """A field of several ``T``: given as any sequence, read as ``tuple[T, ...]``."""

        def __init__(self, items: Iterable[T] = (), /) -> None: ...

        @overload
        def __get__(self, obj: None, owner: type[Any], /) -> Self: ...
        @overload
        def __get__(self, obj: object, owner: type[Any], /) -> tuple[T, ...]: ...
        def __get__(self, obj: object, owner: type[Any], /) -> Self | tuple[T, ...]: ...

        def __set__(self, obj: object, value: Sequence[T], /) -> None: ...

    class ItemsOrNone(Generic[T]):
        """A field of several ``T`` or None: given as any sequence or None, read as
        ``tuple[T, ...] | None``."""

        def __init__(self) -> None: ...

        @overload
        def __get__(self, obj: None, owner: type[Any], /) -> Self: ...
        @overload
        def __get__(self, obj: object, owner: type[Any], /) -> tuple[T, ...] | None: ...
        def __get__(self, obj: object, owner: type[Any], /) -> Self | tuple[T, ...] | None: ...

        def __set__(self, obj: object, value: Sequence[T] | None, /) -> None: ...

else:

    class Items:
        """``Items[T]`` is ``tuple[T, ...]``; ``Items(iterable)`` is ``tuple(iterable)``."""

        def __new__(cls, items: Iterable[Any] = (), /) -> tuple[Any, ...]:
            return tuple(items)

        def __class_getitem__(cls, item: Any) -> Any:
            return tuple[item, ...]

    class ItemsOrNone:
        """``ItemsOrNone[T]`` is ``tuple[T, ...] | None``; ``ItemsOrNone()`` is None."""

        def __new__(cls) -> None:
            return None

        def __class_getitem__(cls, item: Any) -> Any:
            return tuple[item, ...] | None

"""The manifest's excluded lines as an immutable sequence made of shared chunks.

Why: a long run leaves most of its history out of every request, and its manifest lists each
left-out fragment (a 10k-message run at a 128k window: ~9,800 lines). From one turn to the next
only a few of those lines change, but a flat tuple of them had to be made again per turn: a
~9,800-item tuple whose making, traversal by the cyclic GC while it was young, and freeing each
touched every line object. On that run the gen0 collections that found it young took a median
0.31 ms against 0.02 ms for the others, most of them inside the next build. Here the lines are
held in chunks the builder keeps from build to build (``projections.exclusions``): a turn makes
only the chunks that changed and a tuple of ~40 chunk references.

To a reader it is a tuple of :class:`~contextfold.domain.manifest.ExcludedFragment`: indexing,
slicing (a tuple), iteration, ``len``, ``+`` (a tuple), ``==`` and ``hash`` as a tuple's, validated from and
serialized to a JSON array exactly as ``tuple[ExcludedFragment, ...]`` is.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate, chain
from typing import TYPE_CHECKING, Any, overload

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

if TYPE_CHECKING:
    from contextfold.domain.manifest import ExcludedFragment

__all__ = ["ExcludedLines"]


class ExcludedLines(Sequence["ExcludedFragment"]):
    """An immutable sequence of excluded lines held as chunks (tuples) that other sequences
    may share. Made by :meth:`of` (any iterable) or :meth:`from_chunks` (the builder's)."""

    __slots__ = ("_chunks", "_ends")

    def __init__(self, chunks: Iterable[tuple[ExcludedFragment, ...]]) -> None:
        self._chunks = tuple(c for c in chunks if c)
        self._ends = list(accumulate(map(len, self._chunks)))

    @classmethod
    def of(cls, lines: Iterable[ExcludedFragment]) -> ExcludedLines:
        """The lines as one chunk (a sequence of them already is returned as is)."""
        if isinstance(lines, ExcludedLines):
            return lines
        return cls((tuple(lines),))

    @classmethod
    def from_chunks(cls, chunks: Iterable[tuple[ExcludedFragment, ...]]) -> ExcludedLines:
        """The concatenation of ``chunks``, each held (not copied): empty ones are dropped."""
        return cls(chunks)

    @property
    def chunks(self) -> tuple[tuple[ExcludedFragment, ...], ...]:
        """The chunks, in order: their concatenation is this sequence."""
        return self._chunks

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __iter__(self) -> Iterator[ExcludedFragment]:
        return chain.from_iterable(self._chunks)

    def __reversed__(self) -> Iterator[ExcludedFragment]:
        return chain.from_iterable(map(reversed, reversed(self._chunks)))

    @overload
    def __getitem__(self, index: int) -> ExcludedFragment: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[ExcludedFragment, ...]: ...

    def __getitem__(self, index: int | slice) -> ExcludedFragment | tuple[ExcludedFragment, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("excluded line index out of range")
        c = bisect_right(self._ends, i)
        return self._chunks[c][i - (self._ends[c - 1] if c else 0)]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ExcludedLines):
            return len(self) == len(other) and (self._chunks == other._chunks or tuple(self) == tuple(other))
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __add__(self, other: object) -> tuple[ExcludedFragment, ...]:
        if isinstance(other, ExcludedLines | tuple):
            return (*self, *other)
        return NotImplemented

    def __radd__(self, other: object) -> tuple[ExcludedFragment, ...]:
        if isinstance(other, tuple):
            return (*other, *self)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"ExcludedLines({tuple(self)!r})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler
                                     ) -> core_schema.CoreSchema:
        """Validated as ``tuple[ExcludedFragment, ...]`` then wrapped; serialized as that tuple."""
        from contextfold.domain.manifest import ExcludedFragment

        as_tuple = core_schema.tuple_schema([handler.generate_schema(ExcludedFragment)],
                                            variadic_item_index=0)
        return core_schema.no_info_after_validator_function(
            cls.of, as_tuple,
            serialization=core_schema.plain_serializer_function_ser_schema(
                tuple, return_schema=as_tuple))

"""Token counters shared by the truncation, diagnosis and tool-exposure tests.

``quarter`` is a boundary-test counter (about four characters a token);
``cl100k`` is the project's real counter (tiktoken cl100k_base, offline file,
``encode_ordinary``), cached by content hash as in production.
"""

from __future__ import annotations

from collections.abc import Callable

from contextfold.projections.tokens import get_counter

__all__ = ["Counter", "cl100k", "quarter"]

Counter = Callable[[str], int]


def quarter(text: str) -> int:
    return len(text) // 4


def cl100k(text: str) -> int:
    return get_counter("cl100k_base").count(text)

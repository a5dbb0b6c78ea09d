"""A call made on a fresh Python stack, for the recursive steps of a JSON cut.

Why: the parse, the shrink and the encoders recurse a frame or two a level of the document, and
Python's recursion limit counts from the caller's frame, so a cut that fits from a shallow stack
raised ``RecursionError`` from a deep one, and was then cut another way: one text's cut depended
on where it was cut. A document within ``truncate.PARSE_DEPTH`` is cut the same from any stack by
moving the cut to a new thread (whose stack starts empty) when the caller's ran out. Rare: only
a caller hundreds of frames deep reaches it, and only for a document hundreds of levels deep.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from contextfold.projections.tokens import counted_texts

__all__ = ["on_fresh_stack"]

T = TypeVar("T")


def on_fresh_stack(call: Callable[[], T]) -> T:
    """``call()`` run on a new thread, this one waiting: its result, or its exception raised
    here. The texts it tokenizes are collected by this thread's ``counted_texts`` block, if any
    (that journal is per thread): the work is still this thread's."""
    outcome: list[T] = []
    failure: list[BaseException] = []
    with counted_texts() as carried:  # handed to the caller's block, if any, on exit

        def run() -> None:
            try:
                with counted_texts() as rows:
                    outcome.append(call())
                carried.extend(rows)
            except BaseException as error:  # re-raised on the caller's thread
                failure.append(error)

        worker = threading.Thread(target=run, name="contextfold-fresh-stack")
        worker.start()
        worker.join()
    if failure:
        raise failure[0]
    return outcome[0]

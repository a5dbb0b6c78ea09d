"""One process-wide ceiling on the bytes the memos shared by all runs hold, and what each holds.

Why: a long-lived process builds for many runs, and the memos it shares between them (token
counts, rendered messages and their JSON, redactions, cut texts, neutralised texts) are most of
what it keeps: a run's handle dropped, its rendered messages and manifest lines stay in them
until they start over. Bounds by entry count alone let them hold far more than they counted
(the JSON memos held ~5.5 bytes per byte of JSON text they counted: 64 MB of text was ~350 MB),
and a few huge entries (long tool outputs) could fill hundreds of MB under a count bound.

So each memo has a share of one ceiling (:data:`SHARES`), counts the bytes it holds as it
grows (an estimate made from what it stores, O(1) per new entry: nothing on a hit), and starts
over past its share. The ceiling is ``$CONTEXTFOLD_MEMO_MB`` megabytes (MiB) when set, else
:data:`DEFAULT_MEMO_MB`; :func:`set_memo_ceiling` changes it in a running process (each memo
over its new share starts over at once). A memo that starts over costs recomputation on the
next build of the runs still active, never a different output. What a store caches
(``Store`` text cache, read keyframes) is per store and freed with it, not counted here.

:func:`memo_report` walks what each memo holds (slow: for reports and tests, never a build);
``scripts/measure_memory.py`` prints it every N runs.
"""

from __future__ import annotations

import os
import sys
import warnings
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType
from typing import Any

__all__ = ["DEFAULT_MEMO_MB", "MEMO_MB_ENV", "MIN_MEMO_MB", "SHARES", "MemoCeilingWarning", "MemoSize",
           "deep_size", "memo_ceiling", "memo_report", "memo_share", "set_memo_ceiling"]

MEMO_MB_ENV = "CONTEXTFOLD_MEMO_MB"
DEFAULT_MEMO_MB = 256
"""The ceiling (MiB) on what the process-wide memos hold together, without ``$CONTEXTFOLD_MEMO_MB``:
room for the memos of a few dozen active tau-bench-sized runs, or a handful of 10,000-message
ones, each built turn after turn at the cost of its new events. A process serving more active
long runs at once than fit rebuilds their messages' JSON more often (slower, same output)."""

MIN_MEMO_MB = 1
"""The least ``$CONTEXTFOLD_MEMO_MB`` taken (MiB). Why: a positive value below it (``1e-9``,
a unit slipped) left every memo a share under ~32 KB, some under a byte: each started over at
almost every entry, so every build counted, rendered and redacted all its texts again, slower
with no word of why (one tau-bench run's memos hold ~0.3-1 MB). Such a value is warned about and
the default used, as one that is not a number. :func:`set_memo_ceiling` takes any positive
value: code that asks for a tiny ceiling (a test making memos start over) means it."""

SHARES: dict[str, float] = {
    "request_json": 0.35,  # rendered messages, their JSON, manifest lines (and the protocol checks')
    "token_counts_short": 0.08,  # counts of texts up to 256 characters, by the text
    "token_counts": 0.08,  # counts of longer texts, by a 32-byte digest
    "token_blocks": 0.05,  # where long texts were cut into line blocks to be counted
    "redacted": 0.06,  # redact(): texts and their redacted copies
    "redactions": 0.06,  # fragment redaction results
    "neutralised": 0.06,  # data blocks' neutralised texts
    "cut_parsed": 0.03,  # cut_text: whether a text parses as JSON
    "cut_needs": 0.03,  # cut_text: whether a text needs neutralising
    "file_lines": 0.06,  # fold_files: a file's text split in lines
    "line_probes": 0.06,  # truncation: a cut text's parse and the probes counted
    "tool_specs": 0.08,  # tool memos (canonical JSON, BM25 documents, strict and cut copies)
}
"""Each memo's part of the ceiling (they sum to at most 1)."""



class MemoCeilingWarning(UserWarning):
    """``$CONTEXTFOLD_MEMO_MB`` is set to what is not a positive number of MiB, or to one below
    :data:`MIN_MEMO_MB`, so the default ceiling is used. A warning, not an error
    (``contextfold.errors`` holds those, all under ``ContextfoldError``): the ceiling is read
    while the package is imported, and a tuning knob set wrong must not break every import, the
    command line's included. The command line prints it as one line of its own on stderr;
    filter it with :mod:`warnings` like any other."""


_ceiling: int | None = None
"""Bytes, once read (or set): None until the first memo asks."""
_APPLY: dict[str, list[Callable[[int], None]]] = {}


def _from_env() -> int:
    """``$CONTEXTFOLD_MEMO_MB`` in bytes; a value that is not a positive number, or is below
    :data:`MIN_MEMO_MB`, is warned about and the default used (read while the package is
    imported: an error there would break every import, the CLI's included, over a tuning knob)."""
    raw = os.environ.get(MEMO_MB_ENV, "").strip()
    if not raw:
        return DEFAULT_MEMO_MB << 20
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not 0 < mb < float("inf"):
        warnings.warn(f"{MEMO_MB_ENV}={raw!r} is not a positive number of MiB: using the default memo "
                      f"ceiling, {DEFAULT_MEMO_MB} MiB (set it to a number such as 512, or unset it)",
                      MemoCeilingWarning, stacklevel=2)
        return DEFAULT_MEMO_MB << 20
    if mb < MIN_MEMO_MB:
        warnings.warn(f"{MEMO_MB_ENV}={raw!r} is below the floor of {MIN_MEMO_MB} MiB, where every memo "
                      "would start over at almost every entry: using the default memo ceiling, "
                      f"{DEFAULT_MEMO_MB} MiB (set it to a number from {MIN_MEMO_MB} up, such as 512, or "
                      "unset it)", MemoCeilingWarning, stacklevel=2)
        return DEFAULT_MEMO_MB << 20
    return int(mb * (1 << 20))


def memo_ceiling() -> int:
    """The bytes the process-wide memos may hold together (``$CONTEXTFOLD_MEMO_MB`` MiB, else
    :data:`DEFAULT_MEMO_MB`, or what :func:`set_memo_ceiling` set)."""
    global _ceiling
    if _ceiling is None:
        _ceiling = _from_env()
    return _ceiling


def set_memo_ceiling(megabytes: float | None) -> int:
    """Set the ceiling to ``megabytes`` MiB (None: ``$CONTEXTFOLD_MEMO_MB`` or the default again)
    for this process; returns it in bytes. Each memo over its new share starts over now."""
    global _ceiling
    if megabytes is None:
        _ceiling = _from_env()
    else:
        if isinstance(megabytes, bool) or not isinstance(megabytes, int | float) \
                or not 0 < megabytes < float("inf"):
            from contextfold.domain.errors import InvalidInputError
            raise InvalidInputError(f"the memo ceiling is a positive number of MiB, got {megabytes!r}")
        _ceiling = int(megabytes * (1 << 20))
    for name, hooks in _APPLY.items():
        for apply in hooks:
            apply(memo_share(name))
    return _ceiling


def memo_share(name: str, apply: Callable[[int], None] | None = None) -> int:
    """The bytes of the ceiling memo ``name`` (a key of :data:`SHARES`) may hold; ``apply``, when
    given, is called with the new figure whenever the ceiling changes (the memo sets its bound
    and starts over if it holds more)."""
    if apply is not None:
        _APPLY.setdefault(name, []).append(apply)
    return int(memo_ceiling() * SHARES[name])


@dataclass(frozen=True)
class MemoSize:
    """One memo: ``module.NAME``, its entries, and the bytes of what it alone holds (an object
    two memos share is counted in the first one walked)."""

    name: str
    entries: int
    bytes: int


_OPAQUE = (type, ModuleType, FunctionType, BuiltinFunctionType, MethodType)
"""Not walked into: shared by the whole process, not held for a run."""
_LEAVES = (str, bytes, int, float, bool, type(None), array, bytearray, memoryview)


def deep_size(obj: object, seen: set[int] | None = None) -> int:
    """Bytes of ``obj`` and what it refers to (containers, ``__dict__``, ``__slots__``), each
    object counted once across calls sharing ``seen``."""
    seen = set() if seen is None else seen
    total = 0
    stack: list[Any] = [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, _OPAQUE):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, _LEAVES):
            continue
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset):
            stack.extend(o)
        else:
            d = getattr(o, "__dict__", None)
            if isinstance(d, dict):
                stack.append(d)
            for cls in type(o).__mro__:
                for slot in cls.__dict__.get("__slots__", ()):
                    if slot not in ("__weakref__", "__dict__"):
                        stack.append(getattr(o, slot, None))
    return total


def _memos() -> Iterator[tuple[str, object, int]]:
    """(name, object, entries) of each module-level memo of the loaded contextfold modules: a
    dict, list or set held in a ``_NAME`` global, a :class:`BoundedMemo`, and each token
    counter's tables."""
    from contextfold.projections.bounded_memo import BoundedMemo
    for modname, module in sorted(sys.modules.items()):
        if not modname.startswith("contextfold.") or module is None:
            continue
        for attr, value in sorted(vars(module).items()):
            if not attr.startswith("_") or attr.startswith("__") or not attr[1:2].isupper():
                continue
            if isinstance(value, BoundedMemo) or (isinstance(value, dict | list | set)
                                                  and attr != "_COUNTERS"):
                yield f"{modname}.{attr}", value, len(value)
    tokens = sys.modules.get("contextfold.projections.tokens")
    if tokens is not None:
        for name, counter in sorted(tokens._COUNTERS.items()):
            for table in ("_short", "_cache", "_blocks"):
                held = getattr(counter, table)
                yield f"tokens counter {name}.{table}", held, len(held)


def memo_report() -> list[MemoSize]:
    """Every memo of :func:`_memos` with its entries and estimated bytes."""
    seen: set[int] = set()
    return [MemoSize(name, entries, deep_size(obj, seen)) for name, obj, entries in _memos()]

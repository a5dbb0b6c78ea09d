"""The package's locks, renewed in a forked child: one registry for every process-wide lock.

Why: ``fork`` copies only the thread that called it. A lock another thread held at that moment
(the tiktoken encoding's load, a token counter's cache, the text cache, a bounded memo, a
truncation's line blocks) is copied held, and no thread of the child will ever release it: the
child's first count, cache read or truncation waited forever, with no error. multiprocessing
forks on Linux, and builds run in threads, so a fork while one of them counts is an ordinary
event. (:mod:`contextfold.store.fork_renewal` renews what the store's objects hold besides
locks: a run's head, a handle's folded state.)

Each lock is made here (:func:`fork_safe_lock`, :func:`fork_safe_rlock`) and held weakly. In
the child, right after the fork and before any other thread exists, a lock held by a parent's
thread is made free again, and its owner's ``on_held`` is called: what that thread was changing
under the lock may be half changed (a table's sums one entry longer than its starts), so the
owner drops it. A lock the forking thread holds itself is left as it is: an ``RLock`` tells its
owner; a plain ``Lock`` does not, so none of these is held across a call that may fork (they
guard dict updates and tokenizer calls, never a fork).

Pure apart from that: no I/O; the one process-wide effect is ``os.register_at_fork``.
"""

from __future__ import annotations

import inspect
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["fork_safe_lock", "fork_safe_rlock"]

_Reset = Callable[[], None]

_LOCKS: weakref.WeakKeyDictionary[Any, Callable[[], _Reset | None] | None] = weakref.WeakKeyDictionary()
"""Every lock made here, with how to reach its owner's ``on_held`` (a weak reference to the
owner of a bound method: the entry must not keep the owner, and so the lock, alive)."""


def _register(lock: Any, on_held: _Reset | None) -> None:
    if on_held is None:
        _LOCKS[lock] = None
    elif inspect.ismethod(on_held):
        _LOCKS[lock] = _reach_method(weakref.ref(on_held.__self__), on_held.__func__)
    else:  # a module's function: lives as long as the module
        _LOCKS[lock] = lambda: on_held


def _reach_method(owner: weakref.ref[Any], func: Callable[[Any], None]) -> Callable[[], _Reset | None]:
    """The owner's method while the owner lives, else None. A plain weak reference, not a
    ``weakref.WeakMethod``: that one's callback ran at interpreter exit after the module's
    globals were gone, and printed "Exception ignored in: ... WeakMethod ... '_alive'" for
    owners a handled error's traceback had kept alive until then."""
    def reach() -> _Reset | None:
        obj = owner()
        return None if obj is None else (lambda: func(obj))
    return reach


def fork_safe_lock(on_held: _Reset | None = None) -> threading.Lock:
    """A ``threading.Lock`` made free again in a forked child when a parent's thread held it,
    ``on_held()`` then called in the child (to drop what that thread was changing under it)."""
    lock = threading.Lock()
    _register(lock, on_held)
    return lock


def fork_safe_rlock(on_held: _Reset | None = None) -> threading.RLock:
    """As :func:`fork_safe_lock`, for an ``RLock`` (left held when the forking thread owns it)."""
    lock = threading.RLock()
    _register(lock, on_held)
    return lock


def _held_by_another(lock: Any) -> bool:
    """Whether a thread other than this one (in the child: a parent's thread) holds ``lock``."""
    if hasattr(lock, "_is_owned"):  # an RLock: free, or the forking thread's own
        if lock._is_owned():
            return False
        if lock.acquire(blocking=False):
            lock.release()
            return False
        return True
    return bool(lock.locked())


def _renew_in_child() -> None:
    for lock, reach in list(_LOCKS.items()):
        if not _held_by_another(lock):
            continue
        lock._at_fork_reinit()
        reset = reach() if reach is not None else None
        if reset is not None:
            reset()


os.register_at_fork(after_in_child=_renew_in_child)

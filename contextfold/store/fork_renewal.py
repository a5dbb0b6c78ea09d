"""What a forked child renews of the objects it inherited: the locks its parent's threads held.

Why: ``fork`` copies only the thread that called it. A lock another thread held at that moment
(a run's write lock for the whole of an insert, a run handle's lock for the whole of a fold) is
copied held, and no thread of the child will ever release it: the child's first append to that
run, or fold of it, waited forever, with no error. multiprocessing forks on Linux, and a store
shared by threads is supported, so a fork while one of them writes is an ordinary event.

Objects holding such locks register here (:func:`renew_after_fork`); in the child, right after
the fork and before any other thread exists, each is asked to renew them
(``_after_fork_in_child``), and to drop what a thread of the parent was changing under them (a
run's head with a half-staged batch). Held weakly: registering keeps nothing alive. A lock
whose owner has no more than a cache to drop is made by :mod:`contextfold.domain.fork_locks`
instead (the store's caches, the projections' memos): one registry for all of them.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Protocol

__all__ = ["ForkRenewed", "forget_after_fork", "keep_inherited", "renew_after_fork"]


class ForkRenewed(Protocol):
    """An object whose locks a forked child replaces (called in the child, single-threaded)."""

    def _after_fork_in_child(self) -> None: ...


_RENEWED: weakref.WeakSet[ForkRenewed] = weakref.WeakSet()
_INHERITED: list[Any] = []
"""What a forked child inherited and must neither use nor close (its parent's connection pools:
closing one would end the parent's sessions, or reset the parent's SQLite locks). Kept for the
child's life: collecting them closes them too."""


def renew_after_fork(obj: ForkRenewed) -> None:
    """Have ``obj._after_fork_in_child()`` called in every child forked from now on while
    ``obj`` lives."""
    _RENEWED.add(obj)


def forget_after_fork(obj: ForkRenewed) -> None:
    """Stop renewing ``obj`` (closed: a child must not reopen what its parent closed)."""
    _RENEWED.discard(obj)


def keep_inherited(obj: Any) -> None:
    """Keep ``obj`` (something of the parent's, replaced in the child) alive and unused."""
    _INHERITED.append(obj)


def _renew_in_child() -> None:
    for obj in list(_RENEWED):
        obj._after_fork_in_child()


os.register_at_fork(after_in_child=_renew_in_child)

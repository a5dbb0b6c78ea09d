"""Run test code in threads and collect what it raised: the tests of shared stores and runs."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["errors_in_threads"]


def errors_in_threads(workers: int, work: Callable[[int], object], *,
                      timeout: float = 120) -> list[BaseException]:
    """Run ``work(w)`` for ``w`` in ``range(workers)``, each in its own thread, and wait for all;
    returns the exceptions the workers raised (a thread's error does not fail the test by itself)."""
    errors: list[BaseException] = []

    def run(w: int) -> None:
        try:
            work(w)
        except BaseException as exc:  # reported to the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return errors

"""Run test code in threads and collect what it raised: the tests of shared stores and runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["InThread", "errors_in_threads"]


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


class InThread:
    """``work()`` started now in a daemon thread, for a test that does something else meanwhile
    (cut the network, bring a server back) and then asks what it raised."""

    def __init__(self, work: Callable[[], object]) -> None:
        self._raised: list[BaseException | None] = []
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(work,), daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], object]) -> None:
        try:
            work()
        except BaseException as exc:  # reported by raised()
            self._raised.append(exc)
        else:
            self._raised.append(None)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def raised(self, timeout: float) -> BaseException | None:
        """What ``work`` raised (None: it returned), waiting up to ``timeout`` seconds for it; a
        ``work`` still running then fails the test: it hangs."""
        self._thread.join(timeout)
        elapsed = time.monotonic() - self._started
        assert not self._thread.is_alive(), f"still waiting after {elapsed:.0f} s: it hangs"
        return self._raised[0]

"""The cyclic GC's pause is one for the process: threads pausing it at once never leave it off.

A runtime builds for many runs on a pool of threads, and each build (and each store read) pauses
the collector. Each pause used to read the switch, turn it off, and turn it back on only if it had
found it on: a thread that read "off" during another's pause, then turned it off after that pause
had ended, left it off for the life of the process (4 threads building in a loop: off within
seconds), so the cycles later runs left were never collected; and the first pause to end turned
it on under the others. The interleavings are forced with events, not found by sleeping.
"""

from __future__ import annotations

import gc
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

from contextfold.domain.gc_pause import paused_gc
from contextfold.store.event_reads import bulk_allocation

PATIENCE = 10.0

Pause = Callable[[], AbstractContextManager[None]]


@pytest.fixture(autouse=True)
def _gc_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


class Pauser:
    """A thread inside ``pause()`` until told to leave."""

    def __init__(self, pause: Pause) -> None:
        self.inside, self.go, self.left = threading.Event(), threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, args=(pause,))
        self.thread.start()
        assert self.inside.wait(PATIENCE)

    def _run(self, pause: Pause) -> None:
        with pause():
            self.inside.set()
            self.go.wait(PATIENCE)
        self.left.set()

    def leave(self) -> None:
        self.go.set()
        self.thread.join(PATIENCE)
        assert self.left.is_set()


@pytest.mark.parametrize(("first", "second"), [(paused_gc, paused_gc), (bulk_allocation, paused_gc),
                                               (paused_gc, bulk_allocation)])
def test_the_first_pause_ending_leaves_the_gc_off_for_the_others(first: Pause, second: Pause) -> None:
    a = Pauser(first)
    b = Pauser(second)
    a.leave()
    assert not gc.isenabled(), "the other thread's build runs with the collector back on"
    b.leave()
    assert gc.isenabled()


def test_a_pause_starting_as_another_ends_does_not_leave_the_gc_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """B reads the switch during A's pause, A ends, then B turns it off: the old pause then
    left it off for good (B had found it off)."""
    a = Pauser(paused_gc)
    real_isenabled = gc.isenabled
    b_thread: list[threading.Thread] = []

    def isenabled_then_a_leaves() -> bool:
        seen = real_isenabled()
        if threading.current_thread() in b_thread:
            a.leave()  # A's pause ends between B's read of the switch and B's next step
        return seen

    monkeypatch.setattr(gc, "isenabled", isenabled_then_a_leaves)
    b_inside = threading.Event()

    def b() -> None:
        with paused_gc():
            b_inside.set()

    b_thread.append(threading.Thread(target=b))
    b_thread[0].start()
    b_thread[0].join(PATIENCE)
    a.leave()  # (already left when B read the switch)
    monkeypatch.undo()
    assert b_inside.is_set()
    assert gc.isenabled(), "the collector stayed off after every pause had ended"


def test_pauses_nest_in_one_thread_and_keep_a_gc_the_caller_turned_off() -> None:
    with paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled(), "a pause must not turn on a collector its caller had turned off"
    gc.enable()


def test_a_child_forked_during_another_threads_pause_gets_its_gc_back() -> None:
    """``fork`` copies only the forking thread: the pausing thread's end never comes in the
    child, whose collector stayed off for good."""
    a = Pauser(paused_gc)
    try:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 0
            try:
                on_at_start = gc.isenabled()
                with paused_gc():
                    off_inside = not gc.isenabled()
                code = 0 if on_at_start and off_inside and gc.isenabled() else 1
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        a.leave()
    assert os.waitstatus_to_exitcode(status) == 0, "the child's collector stayed off"
    assert gc.isenabled()


class _Cycle:
    """An object in a reference cycle with itself: only the cyclic GC frees it."""

    def __init__(self) -> None:
        self.me = self


def test_a_pause_ending_under_anothers_collects_the_young_cycles_the_interpreter_would_have() -> None:
    """A pool of threads building back to back always has some pause open, so the GC, off from the
    first pause to the last, never ran: 4 threads building for 15 s saw 1 collection (523 on one
    thread) and the cycles the runtime's own code left piled up. A thread whose pause ends while
    others go on now collects the young generations when their counts are past the thresholds the
    interpreter would have collected at; the GC itself stays off for the others."""
    other = Pauser(paused_gc)
    try:
        with paused_gc():
            cycles = [_Cycle() for _ in range(gc.get_threshold()[0] * 3)]
            canary = weakref.ref(cycles[0])
            del cycles
        assert not gc.isenabled()  # the other's pause goes on
        assert canary() is None  # collected at the end of this one
        with paused_gc():  # under the threshold: no collection
            small = _Cycle()
            ref = weakref.ref(small)
            del small
        assert ref() is not None
    finally:
        other.leave()
    assert gc.isenabled()


def test_a_pause_left_by_an_exception_ends_and_lets_the_exception_through() -> None:
    # ``paused_gc`` is a plain context manager (no generator per build): its exit must still end
    # the pause on the way out of a failed build and never swallow what failed it
    with pytest.raises(ValueError, match="the build failed"), paused_gc(), paused_gc():  # nested
        raise ValueError("the build failed")
    assert gc.isenabled()
    with paused_gc() as entered:
        assert entered is None and not gc.isenabled()
    assert gc.isenabled()


class _Old:
    """An object in a cycle with itself, small (no ``__dict__``): many make a quarter of the heap."""

    __slots__ = ("__weakref__", "me")

    def __init__(self) -> None:
        self.me = self


def _pause_past_the_young_threshold() -> None:
    """One pause whose end finds generation 0's count past its threshold (what it allocated is
    alive until the pause has ended; twice the threshold: lists taken from the free list are not
    counted)."""
    with paused_gc():
        filler: list[list[None]] = [[] for _ in range(2 * gc.get_threshold()[0] + 1)]
    del filler


def test_a_pause_ending_under_anothers_collects_generation_2_when_the_interpreter_would_have() -> None:
    """A pool that always builds never has a last pause, so generation 2, left for the last pause
    to end, was never collected: the cycles a runtime kept long enough to reach it piled up for
    the life of the process. Here another pause is held throughout, cycles as many as a quarter of
    generation 2 (the interpreter's rule for a full collection) are promoted into it and dropped,
    and pauses end one after another: one of them runs the full collection that frees them."""
    other = Pauser(paused_gc)
    try:
        gc.collect()  # a full collection: the pauses count what is promoted from here
        old = [_Old() for _ in range(len(gc.get_objects(2)) // 4 + gc.get_threshold()[0])]
        canary = weakref.ref(old[0])
        promotions = gc.get_stats()[1]["collections"]
        for _ in range(100 * gc.get_threshold()[1]):  # until a pause's end collects generation 1
            _pause_past_the_young_threshold()
            if gc.get_stats()[1]["collections"] > promotions:
                break
        assert gc.get_stats()[1]["collections"] > promotions
        assert any(o is old[0] for o in gc.get_objects(2)), "the cycles were not promoted to generation 2"
        del old
        full = gc.get_stats()[2]["collections"]
        for _ in range(100 * gc.get_threshold()[1] * max(gc.get_threshold()[2], 1)):
            _pause_past_the_young_threshold()
            if gc.get_stats()[2]["collections"] > full:
                break
            assert not gc.isenabled()  # the other's pause goes on
        assert gc.get_stats()[2]["collections"] > full, "generation 2 never collected under the other's pause"
        assert canary() is None
    finally:
        other.leave()
    assert gc.isenabled()

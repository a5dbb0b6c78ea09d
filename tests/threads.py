"""Run test code in threads and collect what it raised: the tests of shared stores and runs."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import CodeType, FrameType
from typing import Any

__all__ = ["InThread", "errors_in_threads", "instruction_hook", "switching_at_every_instruction"]


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


@contextmanager
def instruction_hook(wanted: Callable[[CodeType], bool],
                     act: Callable[[CodeType, int], None]) -> Iterator[None]:
    """Call ``act(code, offset)`` before each instruction of the code ``wanted`` accepts, in the
    threads started meanwhile (from 3.12, in every thread): a test's way to force a thread switch
    or hold a thread between two bytecodes of one line.

    Why two ways: up to 3.11 a tracer's opcode events (``f_trace_opcodes``); from 3.12 tracing is
    built on ``sys.monitoring`` and CPython 3.12.1 sends a tracer no opcode events at all (3.13.0
    none when ``f_trace_opcodes`` is set in its call event: a test built that way passed without
    ever switching), so there the monitor's own instruction events are used, and code not wanted
    is switched off at its first instruction (``DISABLE``), so the rest runs at full speed.
    """
    if sys.version_info < (3, 12):
        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                act(frame.f_code, frame.f_lasti)
            return local

        def tracer(frame: FrameType, event: str, arg: Any) -> Any:
            if not wanted(frame.f_code):
                return None
            frame.f_trace = local
            frame.f_trace_opcodes = True
            return local

        previous = threading.gettrace()
        threading.settrace(tracer)
        try:
            yield
        finally:
            threading.settrace(previous)
        return
    monitoring = sys.monitoring
    tool = monitoring.DEBUGGER_ID
    monitoring.use_tool_id(tool, "tests.threads.instruction_hook")

    def on_instruction(code: CodeType, offset: int) -> Any:
        if not wanted(code):
            return monitoring.DISABLE
        act(code, offset)
        return None

    monitoring.register_callback(tool, monitoring.events.INSTRUCTION, on_instruction)
    monitoring.set_events(tool, monitoring.events.INSTRUCTION)
    try:
        yield
    finally:
        monitoring.set_events(tool, 0)
        monitoring.register_callback(tool, monitoring.events.INSTRUCTION, None)
        monitoring.free_tool_id(tool)


def switching_at_every_instruction(modules: tuple[str, ...]) -> AbstractContextManager[None]:
    """Threads yield the GIL to each other at every bytecode of the code in ``modules`` (file
    names ending so): a race between two bytecodes of one line (an iterator made, then advanced)
    is met within a few operations, not once in minutes."""
    return instruction_hook(lambda code: code.co_filename.endswith(modules),
                            lambda code, offset: time.sleep(0))

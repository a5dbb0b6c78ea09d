"""A store forked while another thread uses it: the child must not inherit that thread's locks.

multiprocessing forks on Linux, and a store (or a run handle) may be shared by threads. ``fork``
copies only the forking thread, so a lock another thread held at that moment is copied held
and never released in the child: its first append to the run being written, or fold of the run
being folded, waited forever (``/tmp/r3/04``). Each test forks while a thread is held inside a
real append or fold, lets that thread finish in the parent, and gives the child a few seconds."""

from __future__ import annotations

import multiprocessing as mp
import threading
from collections.abc import Callable
from typing import Any

import contextfold
from contextfold import UserInput
from contextfold.store.event_store import EventStore

CHILD_PATIENCE = 10.0
"""Seconds the child has to answer: its append or fold takes well under one."""


def _in_child(work: Callable[[], object], release: threading.Event) -> str:
    """``work()`` run in a forked child: "ok", its error, or "blocked" after CHILD_PATIENCE s.
    ``release`` is set once the child is forked (the parent's held thread goes on)."""
    def child(conn: Any) -> None:
        try:
            work()
            conn.send("ok")
        except BaseException as exc:  # what the child met, for the assertion's message
            conn.send(repr(exc))

    ctx = mp.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=child, args=(send,))
    process.start()
    release.set()
    try:
        return str(receive.recv()) if receive.poll(CHILD_PATIENCE) else "blocked"
    finally:
        process.kill()
        process.join()


def test_a_child_forked_while_a_thread_appends_appends_to_that_run(store_url: str) -> None:
    """The thread is held inside its insert's transaction (a slow commit: fsync, a big batch, a
    lock wait), with the run's write lock and, on SQLite, the pool's one writer's turn."""
    with EventStore(store_url) as store:
        store.append("r", [UserInput("first")])
        recorder = store.backend.recorder
        original = recorder._insert_events
        inside, release = threading.Event(), threading.Event()

        def slow_insert(*args: Any, **kwargs: Any) -> Any:
            inside.set()
            release.wait(CHILD_PATIENCE)
            return original(*args, **kwargs)

        recorder._insert_events = slow_insert
        writer = threading.Thread(target=lambda: store.append("r", [UserInput("a parent's thread")]))
        writer.start()
        try:
            assert inside.wait(CHILD_PATIENCE)

            def child_appends() -> None:
                del recorder._insert_events  # the child's own writes are not slowed
                store.append("r", [UserInput("the child")])
                store.append("other", [UserInput("the child, another run")])

            got = _in_child(child_appends, release)
        finally:
            release.set()
            writer.join()
        del recorder._insert_events
        assert got == "ok", got
        texts = [rec.event.text for rec in store.read("r")]  # type: ignore[union-attr]
        assert sorted(texts) == sorted(["first", "a parent's thread", "the child"])
        assert store.verify("r").ok
        store.append("r", [UserInput("the parent again")])  # the parent's own locks are intact


def test_a_child_forked_while_a_thread_folds_a_run_folds_it(store_url: str) -> None:
    """A run handle shared by threads: one is inside a fold (its progress callback is slow)
    when the process forks; the child folds the same handle."""
    store = contextfold.open_store(store_url)
    try:
        run = store.run("r")
        run.append([UserInput(f"turn {i}") for i in range(5)])
        inside, release = threading.Event(), threading.Event()

        def slow_progress(done: int) -> None:
            inside.set()
            release.wait(CHILD_PATIENCE)

        folder = threading.Thread(target=lambda: run.state(progress=slow_progress))
        folder.start()
        try:
            assert inside.wait(CHILD_PATIENCE)

            def child_folds() -> None:
                assert run.state().version == 5
                run.append(UserInput("the child"))
                assert run.state().version == 6

            got = _in_child(child_folds, release)
        finally:
            release.set()
            folder.join()
        assert got == "ok", got
        assert run.state().version == 6  # the child's append, in the log they share
    finally:
        store.close()

"""A child forked while another thread holds one of the package's locks must not inherit it held.

``fork`` copies only the forking thread: a lock another thread held at that moment was copied
held, and the child's first use of it waited forever (the tiktoken encoding's load, a token
counter, the text cache, a bounded memo, a truncation's line blocks or JSON pieces, the SDK
import lock, a store's caches). Each test holds the real lock in a thread, forks, lets the
thread go in the parent, and gives the child a few seconds to use the object; the child's own
assertions say what it kept of the state the held lock guarded (:mod:`contextfold.domain.fork_locks`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from contextfold.domain.fork_locks import fork_safe_lock, fork_safe_rlock
from contextfold.projections import offline_encodings, tokens
from contextfold.projections.bounded_memo import BoundedMemo
from contextfold.projections.json_pieces import JsonPieces
from contextfold.projections.json_shrink import ShrinkStats
from contextfold.projections.line_counts import LineCounts, joined
from contextfold.projections.render import validate
from contextfold.projections.tokens import TokenCounter, get_counter
from contextfold.store.deltas import DeltaWriter, KeyframesRead
from contextfold.store.head_check import FoldedTails
from contextfold.text_cache import TextCache

CHILD_PATIENCE = 10.0
"""Seconds the child has to finish: its work takes milliseconds; a lock inherited held, forever."""


def _child_while_held(lock: Any, work: Callable[[], None]) -> str:
    """Fork while another thread holds ``lock``; run ``work()`` in the child. "ok", "failed"
    (an assertion or error in the child, printed to stderr), or "blocked" (killed after
    CHILD_PATIENCE seconds)."""
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            inside.set()
            release.wait(CHILD_PATIENCE)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert inside.wait(CHILD_PATIENCE)
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 0
            try:
                work()
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stderr.flush()
            os._exit(code)
    finally:
        release.set()
        holder.join()
    return _outcome(pid)


def _outcome(pid: int) -> str:
    deadline = time.monotonic() + CHILD_PATIENCE
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "ok" if os.waitstatus_to_exitcode(status) == 0 else "failed"
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "blocked"


def test_the_encoding_load_lock() -> None:
    def child() -> None:
        assert TokenCounter().count("a b") == 2

    assert _child_while_held(offline_encodings._LOCK, child) == "ok"


def test_the_counters_lock() -> None:
    def child() -> None:
        assert get_counter().count("a b") == 2

    assert _child_while_held(tokens._COUNTERS_LOCK, child) == "ok"


def test_a_token_counters_lock_and_its_counts_dropped() -> None:
    counter = TokenCounter()
    counter.count("counted in the parent " * 20)

    def child() -> None:
        assert counter.count("counted in the child " * 20) == len(
            counter._encoding.encode_ordinary("counted in the child " * 20))
        assert counter.stats().size == 1  # the parent's half-written table was not trusted

    assert _child_while_held(counter._lock, child) == "ok"
    assert counter.stats().size == 1  # the parent's are intact


def test_the_text_caches_lock_and_its_texts_dropped() -> None:
    cache = TextCache()
    cache.get(("r", 1), lambda: "the parent's")

    def child() -> None:
        assert cache.get(("r", 1), lambda: "loaded again") == "loaded again"
        assert cache._chars == len("loaded again")

    assert _child_while_held(cache._lock, child) == "ok"
    assert cache.get(("r", 1), lambda: "not loaded") == "the parent's"


def test_a_bounded_memos_lock_and_its_entries_dropped() -> None:
    memo: BoundedMemo[str, str] = BoundedMemo(8, 1000)
    memo.put("a", "the parent's", 12)

    def child() -> None:
        memo.put("b", "the child's", 11)
        assert memo.get("a") is None  # the parent's half-written table was not trusted
        assert memo.get("b") == "the child's" and memo.bytes == 11

    assert _child_while_held(memo._lock, child) == "ok"
    assert memo.get("a") == "the parent's"


def test_a_line_counts_lock_and_its_blocks_started_over() -> None:
    counter = TokenCounter()
    rule = counter.line_splitting
    assert rule is not None
    lines = [f"line {i}: some words, {i * 7} and more" if i % 5 else f"}} block {i}" for i in range(200)]
    counts = LineCounts(lines, rule)
    counts.count([range(0, 150)], "\n")  # scanned 150 lines from the head

    def child() -> None:
        windows: list[list[str | range]] = [[range(0, 120)], ["a marker", range(180, 200)]]
        for items in windows:
            assert counts.count(items, "\n") == counter.count_uncached(joined(lines, items, "\n"))
        assert counts._head_next == 120  # scanned again from line 0, not trusted past 150

    assert _child_while_held(counts._lock, child) == "ok"
    assert counts._head_next > 1


def test_json_pieces_lock_and_its_tables_dropped() -> None:
    counter = TokenCounter()
    value = {"items": [{"id": i, "name": f"item {i}"} for i in range(100)], "note": "x" * 50}
    pieces = JsonPieces(value, counter.count, lambda t: t)
    pieces.tokens(pieces.atoms(40, ShrinkStats()))

    def child() -> None:
        atoms = pieces.atoms(40, ShrinkStats())
        assert pieces.tokens(atoms) == counter.count(pieces.text(atoms))

    assert _child_while_held(pieces._lock, child) == "ok"


def test_the_sdk_import_lock() -> None:
    def child() -> None:
        validate._SDK_FOUND.clear()  # asked again, under the lock
        validate.sdk_available("anthropic")

    assert _child_while_held(validate._SDK_IMPORTS, child) == "ok"


def test_a_stores_folded_tails_delta_writer_and_keyframes_read() -> None:
    tails, writer, frames = FoldedTails(4), DeltaWriter(), KeyframesRead()
    tails.put("r", 3, "h", b"state")
    frames.put("r", 3, b"frame", b"state")

    def child() -> None:
        tails.put("r", 4, "h4", b"state")
        assert tails.holds("r", 4, "h4", b"state")
        assert not tails.holds("r", 3, "h", b"state")  # dropped: decoded again, not trusted

    assert _child_while_held(tails._lock, child) == "ok"
    assert _child_while_held(writer._lock, lambda: writer.forget("r")) == "ok"

    def child_reads() -> None:
        frames.put("r", 4, b"frame", b"state")
        assert frames.get("r", 3) is None

    assert _child_while_held(frames._lock, child_reads) == "ok"
    assert frames.get("r", 3) == (b"frame", b"state")


def test_a_lock_the_forking_thread_holds_itself_stays_its_own() -> None:
    """An RLock the forking thread holds is left held (its ``with`` releases it in the child);
    a free lock is left free, and its owner's state kept."""
    rlock, free = fork_safe_rlock(), fork_safe_lock()
    with rlock:
        pid = os.fork()
        if pid == 0:
            code = 0 if rlock._is_owned() and not free.locked() else 1  # type: ignore[attr-defined]
            try:
                rlock.release()
            except RuntimeError:
                code = 1
            os._exit(code)
    assert _outcome(pid) == "ok"


EXIT_CHILD = r'''
import tempfile
import contextfold
from contextfold import BuildResult, PolicySet, UserInput  # a loop's type hints import this too
store = contextfold.open_store(f"sqlite:///{tempfile.mkdtemp()}/runs.db")
run = store.run("r")
run.append(PolicySet(text="rule " * 3000), UserInput("go"))
try:
    run.build("anthropic", window=3000, reserve=500)
except contextfold.RequiredContextExceedsBudgetError as error:
    print("handled:", type(error).__name__)
store.close()
'''


def test_a_program_that_handled_a_build_error_exits_without_a_traceback(tmp_path: Path) -> None:
    """The registry reaches an owner's ``on_held`` by a plain weak reference. It held a
    ``weakref.WeakMethod``, whose callback ran at interpreter exit, after the module's globals
    were gone, for owners a handled error's traceback had kept alive until then: every agent
    loop that caught ``RequiredContextExceedsBudgetError`` printed "Exception ignored in: ...
    WeakMethod ... '_alive'" on exiting, which log scrapers read as a crash."""
    script = tmp_path / "loop.py"
    script.write_text(EXIT_CHILD)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "handled: RequiredContextExceedsBudgetError"
    assert done.stderr == ""

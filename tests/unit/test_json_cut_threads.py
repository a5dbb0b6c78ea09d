"""Threads cutting one JSON text at once get the same cut, and no error.

Why: the cut's memo is process-wide (``line_windows.probe_entry``, keyed by the text), so threads
building different runs that hold the same tool output (one API reply in many agents' runs, or a
build beside a preview of one run) share an entry. Each thread that found it new stored its own
renders beside the shared probes; a thread whose answer another thread's probe had cached never
rendered it, and the lookup of its renders raised a bare ``KeyError`` (the hunt's repro: 20-51 of
240 concurrent previews failed).
"""

from __future__ import annotations

import json
import threading

from contextfold.projections import truncate as truncate_module
from contextfold.projections.tokens import get_counter
from contextfold.projections.truncate import truncate
from tests.threads import errors_in_threads

THREADS = 6
ROUNDS = 40


def test_threads_cutting_one_json_text_agree_and_raise_nothing() -> None:
    counter = get_counter("cl100k_base")
    failures: list[BaseException] = []
    for r in range(ROUNDS):
        doc = json.dumps({"items": [{"id": i, "name": f"item {r}-{i} " + "abc " * (i % 9),
                                     "tags": list(range(i % 7))} for i in range(300)]})
        original = counter.count(doc)
        truncate_module._PROBES.clear()  # a fresh entry every round: the race is at its start
        barrier = threading.Barrier(THREADS)
        texts: list[str] = []

        def cut(_: int, doc: str = doc, original: int = original, barrier: threading.Barrier = barrier,
                texts: list[str] = texts) -> None:
            barrier.wait()
            texts.append(truncate(doc, 2_000, kind="json", count=counter.count,
                                  line_splitting=counter.line_splitting).text)
            assert original > 2_000

        failures += errors_in_threads(THREADS, cut)
        assert not failures, failures[:3]
        assert len(set(texts)) == 1 and len(texts) == THREADS

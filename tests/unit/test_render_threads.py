"""Threads that render for several providers at once, in a process that has rendered nothing yet."""

from __future__ import annotations

import subprocess
import sys

# Run in a fresh interpreter: the point is the first import of each SDK's request types, which
# this test process has long done. Each thread renders (and so validates) one request; they
# start together at a barrier.
_FIRST_RENDERS = """
import threading
from contextfold.domain.conversation import Conversation, InstructionPart, UserMessage
from contextfold.projections.render import render

providers = ["openai-chat", "openai-responses", "anthropic", "gemini", "openai-chat", "openai-responses"]
part = InstructionPart(text="hi", authority="user", fragment_id="e1")
conversation = Conversation(messages=(UserMessage(parts=(part,)),))
start = threading.Barrier(len(providers))
errors = []

def first_render(provider):
    start.wait()
    try:
        render(conversation, provider, max_tokens=100)
    except BaseException as exc:
        errors.append(f"{provider}: {type(exc).__name__}: {exc}")

threads = [threading.Thread(target=first_render, args=(p,)) for p in providers]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("\\n".join(errors) or "ok")
"""


def test_first_renders_in_threads_at_once_all_succeed() -> None:
    """The openai package's modules import each other in a cycle: two threads importing its chat
    and responses request types at once deadlocked in the import system, and one of two builds
    started together failed with ``_DeadlockError`` (8 of 8 fresh processes before the fix)."""
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", _FIRST_RENDERS], capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "ok", done.stdout[-2000:]

"""A build's own record is bounded by ``StoreLimits.max_record_bytes``, not by the event limit
meant for user input: on every backend, written, read back, verified and replayed.

Why: the record lists every fragment the build left out (~190 bytes each), so a long run's record
outgrows ``max_event_bytes`` (a 28,000-call run: 9.3 MB against 8 MiB), and ``Run.build`` and
``compact`` raised an InputLimitError telling the caller to carry payloads as artifacts, which it
cannot do. The limits here are small so that a few hundred calls reach them."""

from __future__ import annotations

import re

import pytest

import contextfold
from contextfold import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.errors import InputLimitError
from contextfold.domain.events import AnyEvent, ContextBuilt, canonical_json
from contextfold.store.limits import StoreLimits

_EVENT = 16 * 1024
_LIMITS = StoreLimits(max_event_bytes=_EVENT)


def _long_run(calls: int) -> list[AnyEvent]:
    events: list[AnyEvent] = [UserInput("go")]
    for i in range(calls):
        events.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{i}", name="grep", arguments="{}"),)))
        events.append(ToolResult(call_id=f"c{i}", content=f"line {i} " + "word " * 30))
    return events


def test_a_builds_record_over_the_event_limit_is_written_read_back_and_replayed(store_url: str) -> None:
    store = contextfold.open_store(store_url, limits=_LIMITS)
    run = store.run("long")
    run.append(*_long_run(400))
    built = run.build(provider="openai-chat", model="gpt-4o", window=4000, reserve=500)
    record = run.events()[-1].event
    assert isinstance(record, ContextBuilt)
    size = len(canonical_json(record))
    assert size > 2 * _EVENT  # over the event limit, and stored as a zstd frame (>= 32 KiB)
    store.close()
    # a new store with the same limits reads it back (its frame declares more than max_event_bytes)
    again = contextfold.open_store(store_url, limits=_LIMITS)
    assert again.events.verify("long").ok
    back = again.run("long")
    assert back.events()[-1].event == record
    assert back.replay(turn=built.manifest.turn).ok
    # the next build's record is a delta of that frame: read back too
    back.append(UserInput("more"))
    back.build(provider="openai-chat", model="gpt-4o", window=4000, reserve=500)
    again.close()
    third = contextfold.open_store(store_url, limits=_LIMITS)
    assert third.events.verify("long").ok
    assert isinstance(third.run("long").events()[-1].event, ContextBuilt)
    third.close()


def test_user_input_keeps_the_event_limit_and_a_record_the_record_limit(store_url: str) -> None:
    store = contextfold.open_store(store_url, limits=StoreLimits(max_event_bytes=_EVENT,
                                                                 max_record_bytes=64 * 1024))
    run = store.run("r")
    with pytest.raises(InputLimitError, match="carry large payloads as artifacts"):
        run.append(UserInput("x" * 2 * _EVENT))
    run.append(*_long_run(400))
    with pytest.raises(InputLimitError, match=re.escape("StoreLimits.max_record_bytes")):
        run.build(provider="openai-chat", model="gpt-4o", window=4000, reserve=500)
    assert not any(isinstance(r.event, ContextBuilt) for r in run.events())
    store.close()

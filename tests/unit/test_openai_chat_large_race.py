"""A body with a message of more than 128 calls is sent split, whatever threads render at once.

Why: a body made of kept renders is walked for such messages only when one was noted since the
body began (a module-wide tally) or one of its messages is in the noted set. When the set was
emptied meanwhile (the render memos starting over, on any thread), the tally alone tells. It was
an int bumped with ``+=``: a thread that had read it, then stored its bump after two others had
bumped it, set it back to the value a third thread had read before noting its own large message,
and that thread, the set emptied meanwhile, sent the message unsplit ("array too long" from
OpenAI). The GIL makes that interleaving rare, not impossible (and free-threaded builds have no
GIL): the test forces it with a tracer that holds each thread at the step named.
"""

from __future__ import annotations

import dis
import inspect
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import FrameType
from typing import Any

from contextfold.domain.conversation import (
    AssistantMessage,
    DataPart,
    InstructionPart,
    ToolCallPart,
    ToolResultPart,
    ToolResults,
    UserMessage,
)
from contextfold.projections import request_json
from contextfold.projections.render import check_protocol
from contextfold.projections.render import openai_chat as chat
from contextfold.projections.render.tool_checks import MAX_CHAT_TOOL_CALLS
from tests.threads import instruction_hook

PATIENCE = 10.0
STAT = [{"type": "function",
         "function": {"name": "stat", "parameters": {"type": "object", "properties": {}}}}]
Tracer = Callable[[FrameType, str, Any], Any]


def _batch(tag: str) -> tuple[UserMessage, AssistantMessage, ToolResults]:
    """A turn of more calls than one Chat Completions message takes, new objects each time (so
    their renders are not kept)."""
    n = MAX_CHAT_TOOL_CALLS + 2
    calls = tuple(ToolCallPart(call_id=f"{tag}_{i}", name="stat", arguments="{}") for i in range(n))
    results = tuple(ToolResultPart(call_id=f"{tag}_{i}", name="stat", status="ok", fragment_id=f"r{tag}{i}",
                                   content=(DataPart(text=f"size {i}", source="stat", trust="workspace",
                                                             fragment_id=f"d{tag}{i}"),))
                    for i in range(n))
    ask = InstructionPart(text=f"stat {tag}", authority="user", fragment_id=f"u{tag}")
    return (UserMessage(parts=(ask,)),
            AssistantMessage(tool_calls=calls, fragment_id=f"a{tag}"), ToolResults(results=results))


def _held_at(code: Any, at: Callable[[FrameType, str], bool], reached: threading.Event,
             go: threading.Event) -> Tracer:
    """A tracer that holds its thread at the first event of ``code`` that ``at`` accepts."""

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if not reached.is_set() and at(frame, event):
            reached.set()
            assert go.wait(PATIENCE)
        return local

    def global_(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code is code:
            # f_trace first: from 3.12 (tracing built on sys.monitoring) f_trace_opcodes turns the
            # frame's opcode events on only when the frame already has its local tracer; set in
            # the call event before that, it is ignored and the opcode step is never reached
            frame.f_trace = local
            frame.f_trace_opcodes = True
            return local
        return None

    return global_


def _first_caller_held_at(code: Any, offsets: list[int], reached: threading.Event,
                          go: threading.Event) -> AbstractContextManager[None]:
    """Hold the first thread to reach one of ``offsets`` in ``code`` there (an opcode, not a
    line: the tally's new value computed, not yet stored)."""

    def hold(seen: Any, offset: int) -> None:
        if offset in offsets and not reached.is_set():
            reached.set()
            assert go.wait(PATIENCE)

    return instruction_hook(lambda seen: seen is code, hold)


def _in_thread(work: Callable[[], Any], tracer: Tracer | None, out: list[Any]) -> threading.Thread:
    def run() -> None:
        if tracer is not None:
            sys.settrace(tracer)
        try:
            out.append(work())
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _tally_stores() -> list[int]:
    """The store of the tally in ``_noted_large`` (its new value computed, not yet stored)."""
    return [i.offset for i in dis.get_instructions(chat._noted_large)
            if i.opname == "STORE_GLOBAL" and i.argval == "_large_seen"]


def _after_rendering(frame: FrameType, event: str) -> bool:
    """At the first line of ``_history`` after the body's renders were gathered."""
    lines, first = inspect.getsourcelines(chat._history)
    gathered = first + next(i for i, line in enumerate(lines) if "out = rendered_all(" in line)
    return event == "line" and frame.f_lineno > gathered


def test_a_large_message_noted_while_others_note_theirs_and_the_memos_start_over_is_sent_split() -> None:
    a_reached, a_go, b_reached, b_go = (threading.Event() for _ in range(4))
    a_out: list[Any] = []
    b_out: list[Any] = []
    batch_a, batch_b, batch_c = _batch("a"), _batch("b"), _batch("c")
    # A notes its large message and stops just before storing the tally it computed
    with _first_caller_held_at(chat._noted_large.__code__, _tally_stores(), a_reached, a_go):
        a = _in_thread(lambda: chat._history(batch_a), None, a_out)
        assert a_reached.wait(PATIENCE), "A was never held at the tally's store (no opcode event there)"
        try:
            chat._history(batch_c)  # another render notes one: the tally moves on
            # B reads the tally, notes its own, and stops before looking at it again
            b = _in_thread(lambda: chat._history(batch_b),
                           _held_at(chat._history.__code__, _after_rendering, b_reached, b_go), b_out)
            assert b_reached.wait(PATIENCE)
        finally:
            a_go.set()
        a.join(PATIENCE)
    request_json._clear()  # the memos start over (their bound, on any thread): the noted set is emptied
    b_go.set()
    b.join(PATIENCE)
    assert a_out and b_out, "a render did not finish"
    for messages in (a_out[0], b_out[0]):
        widest = max(len(m.get("tool_calls") or ()) for m in messages)
        assert widest <= MAX_CHAT_TOOL_CALLS, f"a message of {widest} calls sent unsplit"
        check_protocol("openai-chat", {"model": "gpt-4o", "messages": messages, "tools": STAT})
